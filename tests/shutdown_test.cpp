// Proves run()'s shutdown contract under workers = 1, 2, 4 and 8: when main returns, every fiber
// still alive is unwound so its destructors run, whatever it waits on (semaphore, an hour-long
// sleep, mutex, condvar, waitgroup, join, a yield loop), without waiting for it; FiberUnwind
// passes through `catch (...) { throw; }` and is not swallowed by `catch (const std::exception&)`;
// a fiber parked in blocking() is let finish its job first; fibers that never started have their
// closures and arguments destroyed; and run() works again afterwards.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "weft/runtime.hpp"
#include "weft/sync.hpp"

namespace {

using namespace weft_test;

class ShutdownTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(ShutdownTest);

// Counts live instances (copies and moves included) and destructions.
struct Probe {
  static inline std::atomic<int> alive{0};
  static inline std::atomic<int> destroyed{0};
  Probe() { ++alive; }
  Probe(const Probe&) { ++alive; }
  Probe(Probe&&) noexcept { ++alive; }
  Probe& operator=(const Probe&) = default;
  ~Probe() {
    --alive;
    ++destroyed;
  }
  static void reset() {
    alive = 0;
    destroyed = 0;
  }
};

// A scope guard whose destructor counts: "this fiber's frame was unwound".
struct Unwound {
  std::atomic<int>* counter;
  ~Unwound() { ++*counter; }
};

TEST_P(ShutdownTest, ParkedFibersAreUnwoundWhenMainReturns) {
  // Everything the parked fibers wait on outlives run(): they are unwound after main returned.
  weft::Semaphore never(0);
  weft::Mutex held;
  weft::Mutex cv_mu;
  weft::CondVar cv;
  weft::WaitGroup wg;
  wg.add(1);
  std::atomic<int> unwound{0}, parked{0}, resumed_normally{0};
  const int kFibers = 6;
  const auto t0 = Clock::now();
  weft::run(
      [&] {
        weft::go([&] {
          Unwound u{&unwound};
          ++parked;
          never.acquire();
          ++resumed_normally;
        });
        weft::go([&] {
          Unwound u{&unwound};
          ++parked;
          weft::this_fiber::sleep_for(std::chrono::hours(1));
          ++resumed_normally;
        });
        weft::go([&] {
          Unwound u{&unwound};
          std::lock_guard lock(held);  // holds it while parked forever
          ++parked;
          never.acquire();
          ++resumed_normally;
        });
        weft::go([&] {
          Unwound u{&unwound};
          weft::this_fiber::sleep_for(2ms);  // let the fiber above take `held` first
          ++parked;
          // Either unwound here, or (when the holder's unwinding releases `held` first) woken
          // normally with the lock; then it runs on until its next park point. Both are fine.
          std::lock_guard lock(held);
        });
        weft::go([&] {
          Unwound u{&unwound};
          std::unique_lock lock(cv_mu);
          ++parked;
          cv.wait(lock, [] { return false; });
          ++resumed_normally;
        });
        weft::go([&] {
          Unwound u{&unwound};
          ++parked;
          wg.wait();
          ++resumed_normally;
        });
        // (A fiber parked in Task::join is covered by JoinWaiterIsUnwoundNotFailed below.)
        EXPECT_TRUE(eventually([&] { return parked.load() == kFibers; }));
        weft::this_fiber::sleep_for(5ms);  // let the last ones reach their park
      },
      opts());
  EXPECT_EQ(unwound.load(), kFibers) << "some parked fiber's destructors did not run";
  EXPECT_EQ(resumed_normally.load(), 0);
  EXPECT_LT(ms_since(t0), 5000.0) << "shutdown waited for a sleeping fiber";
  // The primitives are consistent afterwards: nobody is queued on them any more.
  EXPECT_TRUE(held.try_lock());
  held.unlock();
  EXPECT_EQ(never.available(), 0);
}

class ShutdownDeathTest : public WorkersTest {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};
WEFT_INSTANTIATE_WORKERS(ShutdownDeathTest);

// Regression: a go() fiber parked in Task::join() on a fiber that is itself parked when main
// returns. If shutdown unwinds the child first, the joiner is woken normally; join() must then
// unwind it too (FiberUnwind), not throw std::logic_error, which would be fatal in a go() fiber.
// Which fiber unwinds first depends on the registry's order, hence many runs. Runs in a child
// process because the failure mode is an abort.
TEST_P(ShutdownDeathTest, JoinWaiterIsUnwoundNotFailed) {
  const weft::Options o = opts();
  EXPECT_EXIT(
      {
        weft::Semaphore never(0);
        std::atomic<int> unwound{0};
        std::atomic<int> started{0};
        for (int round = 0; round < 200; ++round) {
          unwound = 0;
          started = 0;
          weft::run(
              [&] {
                for (int i = 0; i < 8; ++i) {
                  weft::go([&] {
                    Unwound u{&unwound};
                    ++started;
                    auto child = weft::spawn([&] {
                      Unwound cu{&unwound};
                      ++started;
                      never.acquire();
                    });
                    child.join();
                  });
                }
                // Return only once every fiber runs (a loaded machine may delay a worker):
                // never-started fibers are dropped, not unwound, and would not count.
                for (int i = 0; i < 2000 && started.load() < 16; ++i) {
                  weft::this_fiber::sleep_for(1ms);
                }
              },
              o);
          if (started.load() == 16 && unwound.load() != 16) std::_Exit(3);
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_P(ShutdownTest, RunnableFibersAreUnwound) {
  // Fibers that yield a while (sitting in run queues, or running) and then park.
  weft::Semaphore never(0);
  std::atomic<int> unwound{0};
  const int kFibers = 6;
  weft::run(
      [&] {
        std::atomic<int> started{0};
        for (int i = 0; i < kFibers; ++i) {
          weft::go([&] {
            Unwound u{&unwound};
            ++started;
            for (int j = 0; j < 20000; ++j) weft::this_fiber::yield();
            never.acquire();
          });
        }
        EXPECT_TRUE(eventually([&] { return started.load() == kFibers; }));
      },
      opts());
  EXPECT_EQ(unwound.load(), kFibers);
}

WEFT_TEST_OPAQUE long current_tid() { return syscall(SYS_gettid); }

// Regression: a fiber that keeps calling this_fiber::yield() on another worker when main returns
// must still be unwound, and run() must return. (yield() once returned without switching when
// nothing else was runnable during shutdown, so that worker never got back to its scheduler loop.)
TEST_P(ShutdownTest, FiberYieldingOnAnotherWorkerIsUnwound) {
  std::atomic<int> unwound{0};
  // Outside main's frame: the yielders keep writing them after main has returned.
  std::atomic<long> yielder_tid{0};
  std::atomic<int> started{0};
  // The yielders stop by themselves after 60 s (standing in for `for (;;)`, bounded); a run()
  // that waits for that takes over 60 s, while a correct one returns long before 30 s even on a
  // loaded machine under the sanitizers.
  const auto t0 = Clock::now();
  weft::run(
      [&] {
        for (int i = 0; i < 4; ++i) {
          weft::go([&] {
            Unwound u{&unwound};
            ++started;
            const auto end = Clock::now() + 60s;
            while (Clock::now() < end) {
              yielder_tid = current_tid();
              weft::this_fiber::yield();
            }
          });
        }
        // Return while a yielder runs on a worker other than main's (when there is one).
        const auto give_up = Clock::now() + 10s;
        while (Clock::now() < give_up &&
               (started.load() < 4 || (workers() > 1 && yielder_tid == current_tid()))) {
          weft::this_fiber::sleep_for(100us);
        }
      },
      opts());
  EXPECT_LT(ms_since(t0), 30000.0) << "run() waited for a yielding fiber to stop by itself";
  EXPECT_EQ(unwound.load(), 4);
}

TEST_P(ShutdownTest, UnwindPassesThroughCatchAllAndIsNotAStdException) {
  weft::Semaphore never(0);
  std::atomic<int> catch_all{0}, swallowed{0}, unwound{0}, parked{0};
  weft::run(
      [&] {
        weft::go([&] {
          Unwound u{&unwound};
          try {
            ++parked;
            never.acquire();
          } catch (...) {
            ++catch_all;
            throw;  // as the contract requires
          }
        });
        weft::go([&] {
          Unwound u{&unwound};
          try {
            ++parked;
            weft::this_fiber::sleep_for(std::chrono::hours(1));
          } catch (const std::exception&) {
            ++swallowed;  // must not happen: the unwind is not a std::exception
          }
        });
        EXPECT_TRUE(eventually([&] { return parked.load() == 2; }));
        weft::this_fiber::sleep_for(2ms);
      },
      opts());
  EXPECT_EQ(catch_all.load(), 1);
  EXPECT_EQ(swallowed.load(), 0);
  EXPECT_EQ(unwound.load(), 2);
}

TEST_P(ShutdownTest, NeverStartedFibersHaveTheirClosuresDestroyed) {
  Probe::reset();
  std::atomic<int> ran{0};
  const int kGo = 10, kSpawn = 5;
  weft::run(
      [&] {
        for (int i = 0; i < kGo; ++i) {
          // Captured by the closure, and a move-only argument: both must be destroyed.
          weft::go([p = Probe(), &ran](std::unique_ptr<Probe>) { ++ran; },
                   std::make_unique<Probe>());
        }
        for (int i = 0; i < kSpawn; ++i) {
          // Unjoined tasks whose Task handle is dropped before shutdown.
          auto t = weft::spawn([p = Probe(), &ran] {
            ++ran;
            return 1;
          });
        }
        // main returns without yielding: on one worker none of them ever started.
      },
      opts());
  EXPECT_EQ(Probe::alive.load(), 0) << "a closure or argument was leaked";
  EXPECT_GE(Probe::destroyed.load(), 2 * kGo + kSpawn);
  if (workers() == 1) {
    EXPECT_EQ(ran.load(), 0) << "expected no fiber to start on one worker";
  }
  EXPECT_LE(ran.load(), kGo + kSpawn);
}

TEST_P(ShutdownTest, TaskHeldByMainAcrossShutdownIsReleased) {
  Probe::reset();
  std::atomic<int> unwound{0};
  weft::Semaphore never(0);
  weft::run(
      [&] {
        // The Task handle dies with main's frame, while its fiber is still parked. A fiber that
        // never started is dropped, not unwound: wait until it runs (a loaded machine may delay
        // the worker that took it), then give it a moment to park.
        std::atomic<bool> started{false};
        auto t = weft::spawn([&, p = Probe()] {
          Unwound u{&unwound};
          started = true;
          never.acquire();
          return 5;
        });
        EXPECT_TRUE(eventually([&] { return started.load(); }));
        weft::this_fiber::sleep_for(2ms);
      },
      opts());
  EXPECT_EQ(unwound.load(), 1);
  EXPECT_EQ(Probe::alive.load(), 0);
}

TEST_P(ShutdownTest, BlockingJobInFlightIsLetFinish) {
  std::atomic<int> unwound{0};
  std::atomic<bool> job_finished{false}, returned_from_blocking{false}, started{false};
  weft::run(
      [&] {
        weft::go([&] {
          Unwound u{&unwound};
          weft::blocking([&] {
            started = true;  // set by the job itself: main returns only once it is in flight
            std::this_thread::sleep_for(50ms);
            job_finished = true;
          });
          returned_from_blocking = true;
          weft::this_fiber::sleep_for(std::chrono::hours(1));  // unwound here
        });
        EXPECT_TRUE(eventually([&] { return started.load(); }));
      },
      opts());
  EXPECT_TRUE(job_finished.load()) << "run() returned while a blocking() job still ran";
  EXPECT_TRUE(returned_from_blocking.load());
  EXPECT_EQ(unwound.load(), 1);
}

TEST_P(ShutdownTest, RunWorksAgainAfterAnUnwindingShutdown) {
  weft::Semaphore never(0);
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> unwound{0};
    const int r = weft::run(
        [&] {
          std::atomic<int> parked{0};
          for (int i = 0; i < 20; ++i) {
            weft::go([&] {
              Unwound u{&unwound};
              ++parked;
              never.acquire();
            });
          }
          auto t = weft::spawn([] { return 7; });
          const int v = t.join();
          EXPECT_TRUE(eventually([&] { return parked.load() == 20; }));
          weft::this_fiber::sleep_for(2ms);
          EXPECT_EQ(weft::stats().fibers_alive, 21u);
          return v + round;
        },
        opts());
    EXPECT_EQ(r, 7 + round);
    EXPECT_EQ(unwound.load(), 20);
  }
}

}  // namespace
