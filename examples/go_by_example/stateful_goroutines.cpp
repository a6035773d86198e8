// Go by Example: Stateful Goroutines -- https://gobyexample.com/stateful-goroutines
//
// Instead of a mutex, the state is owned by a single fiber; other fibers read and write it by
// sending requests over channels and waiting on a per-request response channel ("share memory by
// communicating"). Sleeps are scaled down 10x from the Go program.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <weft/weft.hpp>

using namespace std::chrono_literals;

// The requests: each carries the channel its owner waits on for the response.
struct ReadOp {
  int key;
  weft::Chan<int> resp;
};
struct WriteOp {
  int key;
  int val;
  weft::Chan<bool> resp;
};

// We'll count how many operations we perform. They live outside weft::run's main function: the
// reader and writer fibers still run, until run() unwinds them, after that function returns.
std::atomic<std::uint64_t> read_ops{0};
std::atomic<std::uint64_t> write_ops{0};

int main() {
  weft::run([] {
    // The reads and writes channels will be used by other fibers to issue read and write
    // requests, respectively.
    weft::Chan<ReadOp> reads;
    weft::Chan<WriteOp> writes;

    // Here is the fiber that owns the state, a map private to it. It repeatedly selects on the
    // reads and writes channels, responding to requests as they arrive.
    weft::go([reads, writes] {
      std::map<int, int> state;
      for (;;) {
        weft::select(weft::case_recv(reads,
                                     [&](std::optional<ReadOp> read) {
                                       const ReadOp& r = read.value();
                                       r.resp.send(state[r.key]);
                                     }),
                     weft::case_recv(writes, [&](std::optional<WriteOp> write) {
                       const WriteOp& w = write.value();
                       state[w.key] = w.val;
                       w.resp.send(true);
                     }));
      }
    });

    // This starts 100 fibers to issue reads to the state-owning fiber via the reads channel. Each
    // read requires constructing a ReadOp, sending it over the reads channel, and then receiving
    // the result over the provided resp channel.
    for (int r = 0; r < 100; ++r) {
      weft::go([reads] {
        std::minstd_rand rng(static_cast<unsigned>(weft::this_fiber::id()));
        for (;;) {
          ReadOp read{static_cast<int>(rng() % 5), weft::Chan<int>()};
          reads.send(read);
          read.resp.recv();
          read_ops.fetch_add(1);
          weft::this_fiber::sleep_for(1ms);
        }
      });
    }

    // We start 10 writes as well, using a similar approach.
    for (int w = 0; w < 10; ++w) {
      weft::go([writes] {
        std::minstd_rand rng(static_cast<unsigned>(weft::this_fiber::id()));
        for (;;) {
          WriteOp write{static_cast<int>(rng() % 5), static_cast<int>(rng() % 100),
                        weft::Chan<bool>()};
          writes.send(write);
          write.resp.recv();
          write_ops.fetch_add(1);
          weft::this_fiber::sleep_for(1ms);
        }
      });
    }

    // Let the fibers work for 100 ms.
    weft::this_fiber::sleep_for(100ms);

    // Finally, capture and report the op counts.
    std::printf("readOps: %llu\n", static_cast<unsigned long long>(read_ops.load()));
    std::printf("writeOps: %llu\n", static_cast<unsigned long long>(write_ops.load()));
  });
}
