// Go by Example: Atomic Counters -- https://gobyexample.com/atomic-counters
//
// Go's sync/atomic is std::atomic; fibers on different workers are different kernel threads, so
// shared counters need it exactly as goroutines do.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <weft/weft.hpp>

int main() {
  weft::run([] {
    // We'll use an atomic integer type to represent our (always-positive) counter.
    std::atomic<std::uint64_t> ops{0};

    // A WaitGroup will help us wait for all fibers to finish their work.
    weft::WaitGroup wg;

    // We'll start 50 fibers that each increment the counter exactly 1000 times.
    for (int i = 0; i < 50; ++i) {
      wg.add(1);
      weft::go([&] {
        for (int c = 0; c < 1000; ++c) ops.fetch_add(1);  // ops.Add(1)
        wg.done();
      });
    }

    // Wait until all the fibers are done.
    wg.wait();

    // Here no fiber is writing to ops, but it's safe to atomically read a value even while other
    // fibers are (atomically) updating it.
    std::printf("ops: %llu\n", static_cast<unsigned long long>(ops.load()));
  });
}
