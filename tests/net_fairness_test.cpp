// Fairness of the network path: thousands of connections, all ready at once, are served in about
// the order they became ready, so none of them waits many rounds while others get ahead.
//
// One runtime with one worker holds both ends: N client fibers, each with its own connection to
// an echo server fiber in the same runtime. The clients connect, wait at a gate, and are released
// together; each then does K round trips. A shared counter numbers every finished round trip, and
// each client notes the counter's value when it finishes its last one. In a fair schedule the
// clients move in step: every client's round trip k comes after about N*(k-1) others, so all
// finish within about one round (N trips) of each other. The assertion allows three rounds.
//
// Why it is not timing luck: with one worker, which fiber runs when follows only from the order
// of the run queue and of the kernel's epoll ready list, both FIFO; no second thread races. The
// counter measures progress in round trips, never in time. The old run queue, which moved half
// of a full ring to the global queue (read only every 61st pick), let later wake-ups overtake
// earlier ones there; its spread was many rounds, and this test failed on it.
//
// One worker only: with two, stealing legitimately reorders within a round trip and the bound
// would say less; the scheduler's FIFO guarantee is per worker.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>
#include <weft/weft.hpp>

#include "net_test_util.hpp"
#include "test_util.hpp"

namespace {

using namespace weft_test;
using namespace weft_net_test;

constexpr int kConns = kSanitized ? 1000 : 3000;
constexpr int kTrips = 8;
constexpr int kMsg = 64;

void echo_until_eof(net::TcpStream s) {
  char buf[4096];  // on the fiber's stack, as a user writes it
  for (;;) {
    auto n = s.read(buf, sizeof buf);
    if (!n.ok() || *n == 0) return;
    if (!s.write_all(std::string_view(buf, *n)).ok()) return;
  }
}

TEST(NetFairness, ThousandsOfReadyConnectionsFinishWithinThreeRoundsOfEachOther) {
  std::vector<std::int64_t> finished_at(kConns, -1);
  std::atomic<std::int64_t> trips{0};
  weft::run(
      [&] {
        auto l = must(net::listen_tcp("127.0.0.1:0"), "listen");
        const std::string addr = l.local_addr();
        auto acceptor = weft::spawn([&] {
          for (int i = 0; i < kConns; ++i) {
            weft::go(echo_until_eof, must(l.accept(), "accept"));
          }
        });
        weft::WaitGroup connected, gate, done;
        connected.add(kConns);
        gate.add(1);
        done.add(kConns);
        for (int i = 0; i < kConns; ++i) {
          weft::go([&, i] {
            net::TcpStream c = must(net::dial_tcp(addr, kIoBound), "dial");
            c.set_deadline(in(kIoBound));
            connected.done();
            gate.wait();
            char out[kMsg], back[kMsg];
            for (int k = 0; k < kTrips; ++k) {
              std::fill(out, out + kMsg, static_cast<char>('a' + (i + k) % 26));
              must_ok(c.write_all(std::string_view(out, kMsg)), "write");
              int got = 0;
              while (got < kMsg)
                got += static_cast<int>(must(c.read(back + got, kMsg - got), "read"));
              if (!std::equal(out, out + kMsg, back)) throw std::runtime_error("echo mismatch");
              trips.fetch_add(1, std::memory_order_relaxed);
            }
            finished_at[i] = trips.load(std::memory_order_relaxed);
            done.done();
          });
        }
        connected.wait();
        acceptor.join();
        gate.done();
        done.wait();
      },
      with_workers(1));
  const auto [lo, hi] = std::minmax_element(finished_at.begin(), finished_at.end());
  ASSERT_GE(*lo, 0) << "a client never finished";
  const double rounds = static_cast<double>(*hi - *lo) / kConns;
  RecordProperty("spread_rounds_x100", static_cast<int>(rounds * 100));
  EXPECT_LE(rounds, 3.0) << "the first client finished its " << kTrips << " round trips after "
                         << *lo << " trips in all, the last after " << *hi << ": " << rounds
                         << " rounds of " << kConns << " connections apart (fair: about 1)";
}

// A busy worker collects I/O only while its own queue is short (kBusyPollMaxQueued), so that
// readiness goes to a worker that will run it soon. A queue that never gets short -- more fibers
// than that, each yielding in a loop -- must still not starve the sockets: past a backstop any
// busy worker polls. One worker, so that nobody is ever idle to poll instead; without the
// backstop the round trips below never complete (the test hangs until ctest's timeout).
TEST(NetFairness, SocketsAreServedWhileALongQueueOfYieldingFibersNeverDrains) {
  constexpr int kYielders = 200;  // well over kBusyPollMaxQueued
  constexpr int kRoundTrips = 50;
  weft::run(
      [&] {
        auto l = must(net::listen_tcp("127.0.0.1:0"), "listen");
        std::atomic<bool> stop{false};
        weft::WaitGroup yielders;
        yielders.add(kYielders);
        for (int i = 0; i < kYielders; ++i) {
          weft::go([&] {
            while (!stop.load(std::memory_order_relaxed)) weft::this_fiber::yield();
            yielders.done();
          });
        }
        auto server = weft::spawn([&] { echo_until_eof(must(l.accept(), "accept")); });
        net::TcpStream c = must(net::dial_tcp(l.local_addr(), kIoBound), "dial");
        c.set_deadline(in(kIoBound));
        for (int k = 0; k < kRoundTrips; ++k) {
          const char out = static_cast<char>('a' + k % 26);
          must_ok(c.write_all(std::string_view(&out, 1)), "write");
          char back = 0;
          ASSERT_EQ(must(c.read(&back, 1), "read"), 1u);
          ASSERT_EQ(back, out);
        }
        c.close();
        server.join();
        stop = true;
        yielders.wait();
      },
      with_workers(1));
}

}  // namespace
