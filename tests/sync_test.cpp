// Proves the fiber synchronisation primitives of docs/api.md under workers = 1, 2, 4 and 8: Mutex
// (mutual exclusion under contention, try_lock, std::lock_guard/unique_lock/scoped_lock, the
// contended path needs a fiber), CondVar (predicate waits, notify_one wakes one, notify_all wakes
// all, wait_for/wait_until time out), WaitGroup (many fibers, plain-thread waiters and done()
// callers, destruction right after wait() returns, negative counter) and Semaphore
// (acquire/release/try_acquire, release(n) wakes exactly n, plain threads on either side).
#include "weft/sync.hpp"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "weft/runtime.hpp"

namespace {

using namespace weft_test;

class SyncTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(SyncTest);

// ---- Mutex --------------------------------------------------------------------------------------

TEST_P(SyncTest, MutexProtectsACounterUnderContention) {
  const int kFibers = 16;
  const int kIters = static_cast<int>(scaled(5000));
  const std::int64_t counter = weft::run(
      [&] {
        weft::Mutex mu;
        std::int64_t value = 0;  // deliberately not atomic: the mutex must protect it
        int inside = 0;
        std::vector<weft::Task<void>> ts;
        for (int f = 0; f < kFibers; ++f) {
          ts.push_back(weft::spawn([&, f] {
            for (int i = 0; i < kIters; ++i) {
              std::lock_guard lock(mu);
              EXPECT_EQ(++inside, 1);
              const std::int64_t v = value;
              if ((i + f) % 64 == 0) weft::this_fiber::yield();  // hold it across a switch
              value = v + 1;
              --inside;
            }
          }));
        }
        for (auto& t : ts) t.join();
        return value;
      },
      opts());
  EXPECT_EQ(counter, static_cast<std::int64_t>(kFibers) * kIters);
}

TEST_P(SyncTest, MutexTryLock) {
  weft::run(
      [] {
        weft::Mutex mu;
        EXPECT_TRUE(mu.try_lock());
        EXPECT_FALSE(mu.try_lock());  // not recursive
        auto other = weft::spawn([&] { return mu.try_lock(); });
        EXPECT_FALSE(other.join());
        mu.unlock();
        auto again = weft::spawn([&] {
          const bool got = mu.try_lock();
          if (got) mu.unlock();
          return got;
        });
        EXPECT_TRUE(again.join());
        EXPECT_TRUE(mu.try_lock());
        mu.unlock();
      },
      opts());
}

TEST_P(SyncTest, MutexWorksWithStandardLockTypes) {
  const int kIters = static_cast<int>(scaled(2000));
  const std::int64_t total = weft::run(
      [&] {
        weft::Mutex a, b;
        std::int64_t in_a = 0, in_b = 0;
        std::vector<weft::Task<void>> ts;
        for (int f = 0; f < 8; ++f) {
          ts.push_back(weft::spawn([&, f] {
            for (int i = 0; i < kIters; ++i) {
              switch ((i + f) % 3) {
                case 0: {
                  std::lock_guard lock(a);
                  ++in_a;
                  break;
                }
                case 1: {
                  std::unique_lock lock(b);
                  EXPECT_TRUE(lock.owns_lock());
                  ++in_b;
                  lock.unlock();
                  EXPECT_FALSE(lock.owns_lock());
                  break;
                }
                default: {
                  // Opposite orders in different fibers: std::scoped_lock's deadlock avoidance
                  // relies on try_lock.
                  if (f % 2) {
                    std::scoped_lock lock(a, b);
                    ++in_a;
                    ++in_b;
                    if (i % 16 == 0) weft::this_fiber::yield();
                  } else {
                    std::scoped_lock lock(b, a);
                    ++in_a;
                    ++in_b;
                  }
                }
              }
              std::unique_lock maybe(a, std::try_to_lock);
              if (!maybe.owns_lock()) maybe.lock();
              ++in_a;  // net zero, but only correct under the lock
              --in_a;
            }
          }));
        }
        for (auto& t : ts) t.join();
        return in_a + in_b;
      },
      opts());
  // Every iteration adds exactly one to in_a or in_b, except scoped_lock rounds which add two.
  std::int64_t expected = 0;
  for (int f = 0; f < 8; ++f) {
    for (int i = 0; i < kIters; ++i) expected += ((i + f) % 3 == 2) ? 2 : 1;
  }
  EXPECT_EQ(total, expected);
}

TEST_P(SyncTest, ContendedMutexLockOutsideAFiberThrowsLogicError) {
  weft::Mutex mu;
  ASSERT_TRUE(mu.try_lock());
  EXPECT_THROW(mu.lock(), std::logic_error);  // contended, and no fiber to park
  mu.unlock();
  // The same from a plain thread while a runtime runs and a fiber holds the mutex.
  std::atomic<int> outcome{0};
  weft::run(
      [&] {
        std::lock_guard lock(mu);
        std::thread t([&] {
          try {
            mu.lock();
            outcome = 2;
            mu.unlock();
          } catch (const std::logic_error&) {
            outcome = 1;
          }
        });
        t.join();
      },
      opts());
  EXPECT_EQ(outcome.load(), 1);
}

TEST_P(SyncTest, MutexUnlockOfAnUnlockedMutexThrows) {
  weft::run(
      [] {
        weft::Mutex mu;
        EXPECT_THROW(mu.unlock(), std::logic_error);
      },
      opts());
}

TEST_P(SyncTest, MutexWaiterIsNotStarved) {
  // One fiber re-locks in a tight loop; a waiter must still get the lock (handoff after ~1 ms).
  const bool got = weft::run(
      [] {
        weft::Mutex mu;
        std::atomic<bool> stop{false};
        auto hog = weft::spawn([&] {
          const auto end = Clock::now() + 5s;
          while (!stop.load() && Clock::now() < end) {
            std::lock_guard lock(mu);
            weft::this_fiber::yield();
          }
        });
        weft::this_fiber::sleep_for(1ms);
        auto waiter = weft::spawn([&] {
          std::lock_guard lock(mu);
          return true;
        });
        const bool ok = waiter.join();
        stop = true;
        hog.join();
        return ok;
      },
      opts());
  EXPECT_TRUE(got);
}

TEST_P(SyncTest, MutexKeepsExclusionAndProgressWithWokenTurnsStarvationAndTimedLockers) {
  // Many fibers per worker on one mutex, mixing lock(), try_lock_for() (whose timeouts withdraw
  // queued waiters) and try_lock(), with sections that yield or sleep past the 1 ms starvation
  // threshold: the woken-waiter turn (kWoken), hand-offs (kStarving) and withdrawals all happen.
  // What must hold whatever the interleaving: one holder at a time, every acquisition counted
  // once, and every fiber finishes.
  const int kFibers = 8 * static_cast<int>(workers());
  const int kIters = static_cast<int>(scaled(1500));
  struct Totals {
    std::int64_t value, acquired;
  };
  const Totals t = weft::run(
      [&] {
        weft::Mutex mu;
        std::int64_t value = 0;  // guarded by mu
        int inside = 0;          // guarded by mu
        std::atomic<std::int64_t> acquired{0};
        std::vector<weft::Task<void>> ts;
        for (int f = 0; f < kFibers; ++f) {
          ts.push_back(weft::spawn([&, f] {
            for (int i = 0; i < kIters; ++i) {
              bool got = true;
              switch ((f + i) % 4) {
                case 0:
                case 1:
                  mu.lock();
                  break;
                case 2:
                  got = mu.try_lock_for(std::chrono::microseconds(50 + 10 * (i % 7)));
                  break;
                default:
                  got = mu.try_lock();
                  break;
              }
              if (!got) continue;
              EXPECT_EQ(++inside, 1);
              ++value;
              if (i % 97 == 0) {
                weft::this_fiber::sleep_for(std::chrono::microseconds(1500));  // others starve
              } else if (i % 13 == 0) {
                weft::this_fiber::yield();
              }
              --inside;
              mu.unlock();
              acquired.fetch_add(1, std::memory_order_relaxed);
            }
          }));
        }
        for (auto& task : ts) task.join();
        std::lock_guard lock(mu);  // the mutex is free and usable at the end
        return Totals{value, acquired.load()};
      },
      opts());
  EXPECT_EQ(t.value, t.acquired);
  // The lock() calls alone, about half of the iterations, always succeed.
  EXPECT_GE(t.acquired, static_cast<std::int64_t>(kFibers) * (kIters / 2 - 2));
}

// ---- CondVar ------------------------------------------------------------------------------------

TEST_P(SyncTest, CondVarProducerConsumer) {
  const int kItems = static_cast<int>(scaled(5000));
  const std::int64_t sum = weft::run(
      [&] {
        weft::Mutex mu;
        weft::CondVar not_empty, not_full;
        std::vector<int> queue;
        bool closed = false;
        std::int64_t consumed = 0;
        std::vector<weft::Task<void>> consumers;
        for (int c = 0; c < 4; ++c) {
          consumers.push_back(weft::spawn([&] {
            for (;;) {
              std::unique_lock lock(mu);
              not_empty.wait(lock, [&] { return !queue.empty() || closed; });
              if (queue.empty()) return;
              consumed += queue.back();
              queue.pop_back();
              not_full.notify_one();
            }
          }));
        }
        auto producer = weft::spawn([&] {
          for (int i = 1; i <= kItems; ++i) {
            std::unique_lock lock(mu);
            not_full.wait(lock, [&] { return queue.size() < 8; });
            queue.push_back(i);
            not_empty.notify_one();
          }
          std::lock_guard lock(mu);
          closed = true;
          not_empty.notify_all();
        });
        producer.join();
        for (auto& c : consumers) c.join();
        return consumed;
      },
      opts());
  EXPECT_EQ(sum, static_cast<std::int64_t>(kItems) * (kItems + 1) / 2);
}

TEST_P(SyncTest, CondVarNotifyOneWakesOneNotifyAllWakesAll) {
  weft::run(
      [] {
        weft::Mutex mu;
        weft::CondVar cv;
        int tickets = 0;
        bool open = false;
        std::atomic<int> woken{0}, waiting{0};
        std::atomic<int> checks{0};  // predicate evaluations: one per wake-up
        const int kWaiters = 5;
        std::vector<weft::Task<void>> ts;
        for (int i = 0; i < kWaiters; ++i) {
          ts.push_back(weft::spawn([&] {
            std::unique_lock lock(mu);
            ++waiting;
            cv.wait(lock, [&] {
              ++checks;
              return tickets > 0 || open;
            });
            if (tickets > 0) --tickets;
            ++woken;
          }));
        }
        ASSERT_TRUE(eventually([&] { return waiting.load() == kWaiters; }));
        {
          // wait() releases mu only once parked: holding mu now means all five are queued.
          std::lock_guard lock(mu);
          EXPECT_EQ(checks.load(), kWaiters);
          tickets = 1;
        }
        cv.notify_one();
        ASSERT_TRUE(eventually([&] { return woken.load() == 1; }));
        weft::this_fiber::sleep_for(5ms);
        EXPECT_EQ(woken.load(), 1);
        // CondVar promises no spurious wake-ups: exactly one waiter re-checked its predicate.
        EXPECT_EQ(checks.load(), kWaiters + 1) << "notify_one woke more than one waiter";
        {
          std::lock_guard lock(mu);
          open = true;
        }
        cv.notify_all();
        for (auto& t : ts) t.join();
        EXPECT_EQ(woken.load(), kWaiters);
        cv.notify_one();  // no waiters: a no-op
        cv.notify_all();
      },
      opts());
}

TEST_P(SyncTest, CondVarWaitForTimesOut) {
  weft::run(
      [] {
        weft::Mutex mu;
        weft::CondVar cv;
        std::unique_lock lock(mu);
        auto t0 = Clock::now();
        EXPECT_EQ(cv.wait_for(lock, 10ms), std::cv_status::timeout);
        EXPECT_GE(Clock::now() - t0, 10ms);
        EXPECT_TRUE(lock.owns_lock());

        t0 = Clock::now();
        EXPECT_FALSE(cv.wait_for(lock, 5ms, [] { return false; }));
        EXPECT_GE(Clock::now() - t0, 5ms);
        EXPECT_TRUE(lock.owns_lock());

        // A deadline already passed: immediate timeout.
        EXPECT_EQ(cv.wait_until(lock, Clock::now() - 1s), std::cv_status::timeout);
        EXPECT_TRUE(cv.wait_until(lock, Clock::now() - 1s, [] { return true; }));
        // A huge timeout must not overflow into the past.
        bool flag = false;
        auto notifier = weft::spawn([&] {
          std::lock_guard l(mu);
          flag = true;
          cv.notify_all();
        });
        EXPECT_TRUE(cv.wait_for(lock, std::chrono::hours(24 * 365 * 100), [&] { return flag; }));
        lock.unlock();
        notifier.join();
      },
      opts());
}

TEST_P(SyncTest, CondVarWaitForReturnsNoTimeoutWhenNotified) {
  weft::run(
      [] {
        weft::Mutex mu;
        weft::CondVar cv;
        bool ready = false;
        auto notifier = weft::spawn([&] {
          weft::this_fiber::sleep_for(2ms);
          std::lock_guard lock(mu);
          ready = true;
          cv.notify_one();
        });
        std::unique_lock lock(mu);
        const auto t0 = Clock::now();
        EXPECT_TRUE(cv.wait_for(lock, 10s, [&] { return ready; }));
        EXPECT_LT(Clock::now() - t0, 5s);
        lock.unlock();
        notifier.join();
      },
      opts());
}

// Runs in a child process (a death test) so that a hang fails the test after 30 s instead of
// hanging the suite.
class SyncDeathTest : public WorkersTest {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};
WEFT_INSTANTIATE_WORKERS(SyncDeathTest);

// Regression: many timed waits on one CondVar. Due timers were once fired inside park(), while the
// parking fiber still held the CondVar's guard that another wait's timer callback needs: the
// worker deadlocked on itself. Timers now fire only where the worker holds no lock.
TEST_P(SyncDeathTest, CondVarTimeoutsRaceWithNotify) {
  // Many short timed waits on one CondVar, some timing out, some racing with notify_all: each
  // wait ends exactly once, either way.
  const int kRounds = static_cast<int>(scaled(5000));
  const weft::Options o = opts();
  EXPECT_EXIT(
      {
        exit_on_hang("the timed CondVar waits", 30);
        weft::run(
            [&] {
              weft::Mutex mu;
              weft::CondVar cv;
              std::int64_t generation = 0;
              std::atomic<bool> stop{false};
              auto notifier = weft::spawn([&] {
                for (int i = 0; !stop.load(); ++i) {
                  if (i % 4 == 0) {
                    std::lock_guard lock(mu);
                    ++generation;
                    cv.notify_all();
                  }
                  weft::this_fiber::sleep_for(std::chrono::microseconds(20));
                }
              });
              std::vector<weft::Task<int>> waiters;
              for (int w = 0; w < 8; ++w) {
                waiters.push_back(weft::spawn([&] {
                  int done = 0;
                  for (int i = 0; i < kRounds; ++i) {
                    std::unique_lock lock(mu);
                    const std::int64_t seen = generation;
                    cv.wait_for(lock, std::chrono::microseconds(1 + i % 30),
                                [&] { return generation != seen; });
                    if (lock.owns_lock()) ++done;
                  }
                  return done;
                }));
              }
              int total = 0;
              for (auto& w : waiters) total += w.join();
              stop = true;
              notifier.join();
              if (total != 8 * kRounds) std::_Exit(4);
            },
            o);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_P(SyncTest, CondVarWaitOutsideAFiberThrowsLogicError) {
  weft::Mutex mu;
  weft::CondVar cv;
  EXPECT_THROW(mu.lock(), std::logic_error);    // lock() needs a fiber, contended or not
  std::unique_lock lock(mu, std::try_to_lock);  // try_lock never parks: allowed anywhere
  ASSERT_TRUE(lock.owns_lock());
  EXPECT_THROW(cv.wait(lock), std::logic_error);
  EXPECT_THROW(cv.wait_for(lock, 1ms), std::logic_error);
  EXPECT_TRUE(lock.owns_lock());
  // wait() without holding the lock is a programming error too.
  weft::run(
      [] {
        weft::Mutex m;
        weft::CondVar c;
        std::unique_lock<weft::Mutex> unlocked(m, std::defer_lock);
        EXPECT_THROW(c.wait(unlocked), std::logic_error);
      },
      opts());
}

// ---- WaitGroup ----------------------------------------------------------------------------------

TEST_P(SyncTest, WaitGroupWaitsForManyFibers) {
  const int kFibers = 500;
  const int finished = weft::run(
      [&] {
        weft::WaitGroup wg;
        std::atomic<int> count{0};
        wg.add(kFibers);
        for (int i = 0; i < kFibers; ++i) {
          weft::go([&, i] {
            if (i % 3 == 0) weft::this_fiber::sleep_for(std::chrono::microseconds(i));
            if (i % 3 == 1) weft::this_fiber::yield();
            ++count;
            wg.done();
          });
        }
        wg.wait();
        const int seen = count.load();
        wg.wait();  // counter is zero: returns at once
        return seen;
      },
      opts());
  EXPECT_EQ(finished, kFibers);
}

TEST_P(SyncTest, WaitGroupWorksFromPlainThreads) {
  weft::run(
      [] {
        // Plain-thread waiters, fibers call done().
        {
          weft::WaitGroup wg;
          wg.add(4);
          std::atomic<int> released{0};
          std::vector<std::thread> waiters;
          for (int i = 0; i < 3; ++i) {
            waiters.emplace_back([&] {
              wg.wait();
              ++released;
            });
          }
          for (int i = 0; i < 4; ++i) {
            weft::go([&] {
              weft::this_fiber::sleep_for(2ms);
              wg.done();
            });
          }
          // Join the threads off the workers so this fiber's worker stays free for the others.
          weft::blocking([&] {
            for (auto& t : waiters) t.join();
          });
          EXPECT_EQ(released.load(), 3);
        }
        // A fiber waits, plain threads call done().
        {
          weft::WaitGroup wg;
          wg.add(4);
          std::atomic<int> dones{0};
          std::vector<std::thread> doers;
          for (int i = 0; i < 4; ++i) {
            doers.emplace_back([&] {
              std::this_thread::sleep_for(2ms);
              ++dones;
              wg.done();
            });
          }
          wg.wait();
          EXPECT_EQ(dones.load(), 4);
          for (auto& t : doers) t.join();
        }
      },
      opts());
}

TEST_P(SyncTest, WaitGroupMayBeDestroyedRightAfterWait) {
  // The last done() must not touch the WaitGroup after waking the waiter (ASan catches a
  // use-after-free here).
  const int kRounds = static_cast<int>(scaled(2000));
  const int rounds = weft::run(
      [&] {
        int ok = 0;
        for (int r = 0; r < kRounds; ++r) {
          auto wg = std::make_unique<weft::WaitGroup>();
          const int n = 1 + r % 4;
          wg->add(n);
          for (int i = 0; i < n; ++i) {
            weft::go([w = wg.get(), i] {
              if (i % 2) weft::this_fiber::yield();
              w->done();
            });
          }
          wg->wait();
          wg.reset();
          ++ok;
        }
        // The same with a plain thread calling the last done().
        for (int r = 0; r < kRounds / 20 + 1; ++r) {
          auto wg = std::make_unique<weft::WaitGroup>();
          wg->add(1);
          std::thread t([w = wg.get()] { w->done(); });
          wg->wait();
          wg.reset();
          t.join();
        }
        return ok;
      },
      opts());
  EXPECT_EQ(rounds, kRounds);
}

TEST_P(SyncTest, WaitGroupNegativeCounterThrowsLogicError) {
  weft::run(
      [] {
        weft::WaitGroup a;
        EXPECT_THROW(a.done(), std::logic_error);
        weft::WaitGroup b;
        b.add(2);
        b.done();
        b.done();
        EXPECT_THROW(b.add(-1), std::logic_error);
      },
      opts());
  weft::WaitGroup outside;  // add/done work without a runtime too
  outside.add(1);
  outside.done();
  outside.wait();
  EXPECT_THROW(outside.done(), std::logic_error);
}

// ---- Semaphore ----------------------------------------------------------------------------------

TEST_P(SyncTest, SemaphoreAcquireReleaseTryAcquire) {
  weft::run(
      [] {
        weft::Semaphore s(2);
        EXPECT_EQ(s.available(), 2);
        EXPECT_TRUE(s.try_acquire());
        s.acquire();
        EXPECT_FALSE(s.try_acquire());
        EXPECT_EQ(s.available(), 0);
        auto waiter = weft::spawn([&] {
          s.acquire();
          return 1;
        });
        weft::this_fiber::sleep_for(1ms);
        s.release();
        EXPECT_EQ(waiter.join(), 1);
        EXPECT_EQ(s.available(), 0);  // the permit went to the waiter
        s.release(3);
        EXPECT_EQ(s.available(), 3);
        EXPECT_THROW(s.release(-1), std::invalid_argument);
      },
      opts());
  EXPECT_THROW(weft::Semaphore(-1), std::invalid_argument);
}

TEST_P(SyncTest, SemaphoreReleaseNWakesExactlyN) {
  weft::run(
      [] {
        weft::Semaphore s(0);
        const int kWaiters = 6;
        std::atomic<int> acquired{0}, arrived{0};
        std::vector<weft::Task<void>> ts;
        for (int i = 0; i < kWaiters; ++i) {
          ts.push_back(weft::spawn([&] {
            ++arrived;
            s.acquire();
            ++acquired;
          }));
        }
        // Let all six reach acquire() (a late one takes a permit without parking: same count).
        ASSERT_TRUE(eventually([&] { return arrived.load() == kWaiters; }));
        weft::this_fiber::sleep_for(2ms);
        s.release(4);
        ASSERT_TRUE(eventually([&] { return acquired.load() == 4; }));
        weft::this_fiber::sleep_for(5ms);
        EXPECT_EQ(acquired.load(), 4) << "release(4) woke more than 4";
        EXPECT_EQ(s.available(), 0);
        s.release(3);  // two waiters left: one permit stays
        for (auto& t : ts) t.join();
        EXPECT_EQ(acquired.load(), kWaiters);
        EXPECT_EQ(s.available(), 1);
      },
      opts());
}

TEST_P(SyncTest, SemaphoreWorksFromPlainThreads) {
  const int kRounds = static_cast<int>(scaled(2000));
  weft::run(
      [&] {
        // A plain thread and a fiber hand a token back and forth.
        weft::Semaphore to_fiber(0), to_thread(0);
        std::atomic<int> thread_rounds{0};
        std::thread t([&] {
          for (int i = 0; i < kRounds; ++i) {
            to_fiber.release();
            to_thread.acquire();
            ++thread_rounds;
          }
        });
        int fiber_rounds = 0;
        for (int i = 0; i < kRounds; ++i) {
          to_fiber.acquire();
          ++fiber_rounds;
          to_thread.release();
        }
        weft::blocking([&] { t.join(); });
        EXPECT_EQ(fiber_rounds, kRounds);
        EXPECT_EQ(thread_rounds.load(), kRounds);
        EXPECT_EQ(to_fiber.available(), 0);
        EXPECT_EQ(to_thread.available(), 0);
      },
      opts());
  // Without any runtime: plain threads only.
  weft::Semaphore s(0);
  std::thread t([&] { s.release(2); });
  s.acquire();
  s.acquire();
  t.join();
  EXPECT_FALSE(s.try_acquire());
}

TEST_P(SyncTest, SemaphoreBoundsConcurrency) {
  const int kFibers = 32, kLimit = 3;
  const int peak = weft::run(
      [&] {
        weft::Semaphore slots(kLimit);
        std::atomic<int> inside{0}, peak{0};
        std::vector<weft::Task<void>> ts;
        for (int i = 0; i < kFibers; ++i) {
          ts.push_back(weft::spawn([&] {
            for (int j = 0; j < 10; ++j) {
              slots.acquire();
              const int now = ++inside;
              int p = peak.load();
              while (now > p && !peak.compare_exchange_weak(p, now)) {
              }
              weft::this_fiber::yield();
              --inside;
              slots.release();
            }
          }));
        }
        for (auto& t : ts) t.join();
        EXPECT_EQ(slots.available(), kLimit);
        return peak.load();
      },
      opts());
  EXPECT_LE(peak, kLimit);
  EXPECT_GE(peak, 1);
}

}  // namespace
