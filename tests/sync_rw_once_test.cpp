// RWMutex and Once (weft/sync.hpp) under workers = 1, 2, 4 and 8.
//
// RWMutex: readers overlap, writers exclude everyone (an invariant checked inside the critical
// sections under contention), writer preference (a queued writer keeps new readers out), a
// writer's unlock lets in every reader that queued before the next writer, the last reader hands
// over to a queued writer, and the standard lock types. Once: exactly one run among many callers,
// callers that arrive during the run wait for it, and a throwing run is retried by the next caller.
// Ordering tests wait until the fibers involved are parked on the primitive (the fiber dump), so
// what they assert follows from the algorithm, not from how fast a scheduler got there.
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "weft/weft.hpp"

namespace {

using namespace weft_test;

class RWMutexTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(RWMutexTest);
class OnceTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(OnceTest);

// Who got the lock in which order; readers may note at the same time.
class OrderLog {
 public:
  void note(const std::string& who) {
    std::lock_guard lock(mu_);
    entries_.push_back(who);
  }
  std::vector<std::string> entries() {
    std::lock_guard lock(mu_);
    return entries_;
  }

 private:
  weft::Mutex mu_;
  std::vector<std::string> entries_;
};

// ---- RWMutex ------------------------------------------------------------------------------------

TEST_P(RWMutexTest, WritersExcludeEveryoneAndReadersOverlapUnderContention) {
  const int kIters = static_cast<int>(scaled(2000));
  std::atomic<int> max_readers{0};
  weft::run(
      [&] {
        weft::RWMutex rw;
        std::atomic<int> readers{0}, writers{0};
        std::int64_t value = 0;  // written only under the write lock
        std::vector<weft::Task<void>> ts;
        for (int f = 0; f < 12; ++f) {
          const bool writer = f % 4 == 0;
          ts.push_back(weft::spawn([&, writer, f] {
            for (int i = 0; i < kIters; ++i) {
              if (writer) {
                std::unique_lock lock(rw);
                EXPECT_EQ(writers.fetch_add(1), 0);
                EXPECT_EQ(readers.load(), 0);
                const std::int64_t v = value;
                if ((i + f) % 16 == 0) weft::this_fiber::yield();  // hold it across a switch
                value = v + 1;
                writers.fetch_sub(1);
              } else {
                std::shared_lock lock(rw);
                EXPECT_EQ(writers.load(), 0);
                const int r = readers.fetch_add(1) + 1;
                int seen = max_readers.load();
                while (r > seen && !max_readers.compare_exchange_weak(seen, r)) {
                }
                if ((i + f) % 8 == 0) weft::this_fiber::yield();
                readers.fetch_sub(1);
              }
            }
          }));
        }
        for (auto& t : ts) t.join();
        EXPECT_EQ(value, 3 * kIters);
      },
      opts());
  RecordProperty("max_readers_at_once", max_readers.load());
}

// Makes `rw` spread its reader count (more than one worker): kSpreadAfterOverlaps read sections
// taken while another fiber holds a read lock, so each one overlaps.
void spread_readers(weft::RWMutex& rw) {
  std::shared_lock held(rw);
  for (std::uint32_t i = 0; i < weft::RWMutex::kSpreadAfterOverlaps; ++i) {
    std::shared_lock again(rw);
  }
}

TEST_P(RWMutexTest, OverlappingReadersSpreadTheCountOnlyWithSeveralWorkers) {
  weft::run(
      [&] {
        weft::RWMutex rw;
        for (std::uint32_t i = 0; i + 1 < weft::RWMutex::kSpreadAfterOverlaps; ++i) {
          std::shared_lock a(rw);
          std::shared_lock b(rw);
        }
        EXPECT_FALSE(weft::detail::rw_mutex_readers_spread(rw));  // one overlap short
        spread_readers(rw);
        EXPECT_EQ(weft::detail::rw_mutex_readers_spread(rw), workers() > 1);
        // Either way the lock still works, and misuse still throws.
        EXPECT_TRUE(rw.try_lock());
        EXPECT_FALSE(rw.try_lock_shared());
        EXPECT_THROW(rw.unlock_shared(), std::logic_error);  // a writer holds it
        rw.unlock();
        EXPECT_TRUE(rw.try_lock_shared());
        EXPECT_FALSE(rw.try_lock());
        rw.unlock_shared();
        EXPECT_TRUE(rw.try_lock());
        rw.unlock();
      },
      opts());
}

// The read-mostly pattern the spread count exists for, with the invariants checked in every
// section: tight read sections on every worker (a few yield inside, so readers also unlock on
// another worker than they locked on), writers that wait for them. Readers leaving just as a
// writer is let in must not be taken for surplus unlocks (they were, before the check summed).
TEST_P(RWMutexTest, SpreadReadersAndWritersStayExclusive) {
  const int kReads = static_cast<int>(scaled(100000));
  const int kWrites = kReads / 10;
  weft::run(
      [&] {
        weft::RWMutex rw;
        spread_readers(rw);
        std::atomic<int> readers{0}, writers{0};
        std::int64_t value = 0;  // written only under the write lock
        std::vector<weft::Task<void>> ts;
        for (int f = 0; f < 8; ++f) {
          ts.push_back(weft::spawn([&, f] {
            for (int i = 0; i < kReads; ++i) {
              std::shared_lock lock(rw);
              readers.fetch_add(1, std::memory_order_relaxed);
              EXPECT_EQ(writers.load(std::memory_order_relaxed), 0);
              if ((i + f) % 1024 == 0) weft::this_fiber::yield();
              readers.fetch_sub(1, std::memory_order_relaxed);
            }
          }));
        }
        for (int f = 0; f < 2; ++f) {
          ts.push_back(weft::spawn([&] {
            for (int i = 0; i < kWrites / 2; ++i) {
              std::unique_lock lock(rw);
              EXPECT_EQ(writers.fetch_add(1, std::memory_order_relaxed), 0);
              EXPECT_EQ(readers.load(std::memory_order_relaxed), 0);
              ++value;
              writers.fetch_sub(1, std::memory_order_relaxed);
            }
          }));
        }
        for (auto& t : ts) t.join();
        EXPECT_EQ(value, kWrites / 2 * 2);
        EXPECT_TRUE(rw.try_lock());  // nothing left counted
        rw.unlock();
      },
      opts());
}

// The last user of an object frees it under its lock: a writer that got in deletes the mutex
// while the readers that let it in may still be inside unlock_shared (ASan reports any read of
// the freed mutex). Spread and not spread.
TEST_P(RWMutexTest, AWriterThatGotInMayDestroyTheMutexAtOnce) {
  const int kRounds = static_cast<int>(scaled(20000));
  weft::run(
      [&] {
        for (int round = 0; round < kRounds; ++round) {
          auto* rw = new weft::RWMutex;
          if (round % 2 == 0) spread_readers(*rw);
          constexpr int kReaders = 3;
          std::atomic<int> holding{0};
          weft::WaitGroup done;
          done.add(kReaders);
          for (int r = 0; r < kReaders; ++r) {
            weft::go([&] {
              {
                std::shared_lock lock(*rw);
                holding.fetch_add(1);
                weft::this_fiber::yield();
              }
              done.done();
            });
          }
          while (holding.load() < kReaders) weft::this_fiber::yield();
          rw->lock();  // in once the three have left; they may still be returning
          rw->unlock();
          delete rw;
          done.wait();
        }
      },
      opts());
}

TEST_P(RWMutexTest, ReadersShareTheLockAndAWriterWaitsForAllOfThem) {
  weft::run(
      [&] {
        weft::RWMutex rw;
        rw.lock_shared();
        ASSERT_TRUE(rw.try_lock_shared());  // a second reader gets in at once
        EXPECT_FALSE(rw.try_lock());
        std::atomic<bool> wrote{false};
        weft::Task<void> w = weft::spawn([&] {
          std::lock_guard lock(rw);
          wrote = true;
        });
        ASSERT_TRUE(eventually([&] { return parked_on("rwmutex", {w.id()}); }));
        rw.unlock_shared();
        EXPECT_FALSE(wrote.load());  // one reader still holds it
        rw.unlock_shared();          // the last reader hands over to the writer
        w.join();
        EXPECT_TRUE(wrote.load());
        EXPECT_TRUE(rw.try_lock());
        rw.unlock();
      },
      opts());
}

TEST_P(RWMutexTest, AQueuedWriterKeepsNewReadersOut) {
  weft::run(
      [&] {
        weft::RWMutex rw;
        rw.lock_shared();
        OrderLog order;
        weft::Task<void> w = weft::spawn([&] {
          std::lock_guard lock(rw);
          order.note("w");
        });
        ASSERT_TRUE(eventually([&] { return parked_on("rwmutex", {w.id()}); }));
        EXPECT_FALSE(rw.try_lock_shared()) << "a reader got past a waiting writer";
        // A reader that blocks now gets in only after the writer.
        weft::Task<void> r = weft::spawn([&] {
          std::shared_lock lock(rw);
          order.note("r");
        });
        ASSERT_TRUE(eventually([&] { return parked_on("rwmutex", {r.id()}); }));
        rw.unlock_shared();
        w.join();
        r.join();
        EXPECT_EQ(order.entries(), (std::vector<std::string>{"w", "r"}));
      },
      opts());
}

TEST_P(RWMutexTest, AWritersUnlockLetsInEveryQueuedReaderBeforeTheNextWriter) {
  weft::run(
      [&] {
        weft::RWMutex rw;
        rw.lock();
        OrderLog order;
        weft::Task<void> r1 = weft::spawn([&] {
          std::shared_lock lock(rw);
          order.note("r");
        });
        ASSERT_TRUE(eventually([&] { return parked_on("rwmutex", {r1.id()}); }));
        weft::Task<void> w2 = weft::spawn([&] {
          std::lock_guard lock(rw);
          order.note("w");
        });
        ASSERT_TRUE(eventually([&] { return parked_on("rwmutex", {w2.id()}); }));
        // Queued behind a waiting writer, yet released with the first reader: both came while
        // the lock was held by a writer.
        weft::Task<void> r2 = weft::spawn([&] {
          std::shared_lock lock(rw);
          order.note("r");
        });
        ASSERT_TRUE(eventually([&] { return parked_on("rwmutex", {r2.id()}); }));
        rw.unlock();
        r1.join();
        r2.join();
        w2.join();
        EXPECT_EQ(order.entries(), (std::vector<std::string>{"r", "r", "w"}));
      },
      opts());
}

TEST_P(RWMutexTest, WorksWithStandardLockTypes) {
  weft::run(
      [&] {
        weft::RWMutex rw;
        {
          std::unique_lock w(rw);
          EXPECT_TRUE(w.owns_lock());
          EXPECT_FALSE(rw.try_lock_shared());
        }
        {
          std::shared_lock r1(rw);
          std::shared_lock r2(rw, std::try_to_lock);
          EXPECT_TRUE(r2.owns_lock());
          std::unique_lock w(rw, std::try_to_lock);
          EXPECT_FALSE(w.owns_lock());
        }
        std::scoped_lock both(rw);
      },
      opts());
}

TEST_P(RWMutexTest, UnlockingWhatIsNotHeldThrows) {
  weft::run(
      [&] {
        weft::RWMutex rw;
        EXPECT_THROW(rw.unlock(), std::logic_error);
        EXPECT_THROW(rw.unlock_shared(), std::logic_error);
        rw.lock_shared();
        EXPECT_THROW(rw.unlock(), std::logic_error);  // a read lock is not a write lock
        rw.unlock_shared();
        rw.lock();
        EXPECT_THROW(rw.unlock_shared(), std::logic_error);
        rw.unlock();
        EXPECT_TRUE(rw.try_lock());  // still consistent
        rw.unlock();
      },
      opts());
}

// ---- Once ---------------------------------------------------------------------------------------

TEST_P(OnceTest, ManyCallersRunTheFunctionOnceAndAllSeeItsResult) {
  weft::run(
      [&] {
        weft::Once once;
        std::atomic<int> runs{0};
        int value = 0;  // written by the one run, read by every caller after call() returns
        std::vector<weft::Task<int>> ts;
        for (int i = 0; i < 32; ++i) {
          ts.push_back(weft::spawn([&] {
            once.call([&] {
              runs.fetch_add(1);
              weft::this_fiber::yield();  // others arrive while it runs
              value = 42;
            });
            return value;
          }));
        }
        for (auto& t : ts) EXPECT_EQ(t.join(), 42);
        EXPECT_EQ(runs.load(), 1);
        EXPECT_TRUE(once.done());
      },
      opts());
}

TEST_P(OnceTest, CallersArrivingDuringTheRunWaitForIt) {
  weft::run(
      [&] {
        weft::Once once;
        weft::Chan<int> release;
        std::atomic<bool> finished{false};
        weft::Task<void> runner = weft::spawn([&] {
          once.call([&] {
            release.recv();
            finished = true;
          });
        });
        ASSERT_TRUE(
            eventually([&] { return !once.done() && parked_on("chan recv", {runner.id()}); }));
        weft::Task<bool> waiter = weft::spawn([&] {
          once.call([] { throw std::logic_error("a second run"); });
          return finished.load();
        });
        ASSERT_TRUE(eventually([&] { return parked_on("once", {waiter.id()}); }));
        release.send(1);
        runner.join();
        EXPECT_TRUE(waiter.join());
      },
      opts());
}

TEST_P(OnceTest, AThrowingRunIsRetriedByTheNextCaller) {
  weft::run(
      [&] {
        weft::Once once;
        int runs = 0;
        EXPECT_THROW(once.call([&] {
          ++runs;
          throw std::runtime_error("first attempt fails");
        }),
                     std::runtime_error);
        EXPECT_FALSE(once.done());
        // A caller parked during a failing run runs it next.
        weft::Chan<int> release;
        weft::Task<void> failing = weft::spawn([&] {
          EXPECT_THROW(once.call([&] {
            ++runs;
            release.recv();
            throw std::runtime_error("second attempt fails");
          }),
                       std::runtime_error);
        });
        ASSERT_TRUE(eventually([&] { return parked_on("chan recv", {failing.id()}); }));
        weft::Task<void> retry = weft::spawn([&] { once.call([&] { ++runs; }); });
        ASSERT_TRUE(eventually([&] { return parked_on("once", {retry.id()}); }));
        release.send(1);
        failing.join();
        retry.join();
        EXPECT_EQ(runs, 3);
        EXPECT_TRUE(once.done());
        once.call([&] { ++runs; });
        EXPECT_EQ(runs, 3);
      },
      opts());
}

TEST_P(OnceTest, RecursionIntoTheSameOnceThrowsInsteadOfDeadlocking) {
  weft::run(
      [&] {
        weft::Once once;
        bool inner_threw = false;
        once.call([&] {
          try {
            once.call([] {});
          } catch (const std::logic_error&) {
            inner_threw = true;
          }
        });
        EXPECT_TRUE(inner_threw);
        EXPECT_TRUE(once.done());
      },
      opts());
}

}  // namespace
