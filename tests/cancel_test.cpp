// Bounded waits (weft/cancel.hpp) under workers = 1, 2, 4 and 8: Mutex, Semaphore, WaitGroup,
// CondVar, Barrier, Task::wait, sleep and blocking() give up with kCancelled / kDeadlineExceeded
// when a Context is cancelled, its deadline passes, a token's deadline passes, or the fiber's
// Task::request_stop() is called -- and leave the primitive as if they had never waited. Also
// after_func, timed try_lock_for / try_acquire_for, and cancellation racing completion from many
// fibers (no permit, lock or wake-up lost or duplicated).
// Waiters are cancelled only once they are seen parked (parked_on), so each test exercises the
// withdrawal of a parked waiter; the race tests assert conservation, never an order.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "weft/weft.hpp"

namespace {

using namespace weft_test;

class CancelTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(CancelTest);

constexpr auto kLong = std::chrono::hours(1);

TEST_P(CancelTest, MutexLockGivesUpOnCancelAndTheMutexStaysUsable) {
  weft::run(
      [&] {
        weft::Mutex mu;
        mu.lock();
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        auto waiter = weft::spawn([&, c = ctx] { return mu.lock(c); });
        ASSERT_TRUE(eventually([&] { return parked_on("mutex", {waiter.id()}); }));
        cancel();
        absl::Status s = waiter.join();
        EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
        EXPECT_NE(s.message().find("weft::Mutex::lock"), std::string::npos) << s;
        mu.unlock();
        // Nobody holds it and nobody is queued: it is free.
        EXPECT_TRUE(mu.try_lock());
        mu.unlock();
        // A cancelled context does not stop an uncontended lock (as Go's semaphore.Acquire).
        EXPECT_TRUE(mu.lock(ctx).ok());
        // ... but does stop a contended one at once.
        auto again = weft::spawn([&, c = ctx] { return mu.lock(c); });
        EXPECT_EQ(again.join().code(), absl::StatusCode::kCancelled);
        mu.unlock();
      },
      opts());
}

TEST_P(CancelTest, TryLockForTimesOutThenSucceedsOnceFree) {
  weft::run(
      [&] {
        weft::Mutex mu;
        mu.lock();
        auto t = weft::spawn([&] { return mu.try_lock_for(5ms); });
        EXPECT_FALSE(t.join());
        auto t2 = weft::spawn([&] {
          const bool got = mu.try_lock_for(kLong);
          if (got) mu.unlock();
          return got;
        });
        ASSERT_TRUE(eventually([&] { return parked_on("mutex", {t2.id()}); }));
        mu.unlock();
        EXPECT_TRUE(t2.join());
        EXPECT_TRUE(mu.try_lock());
        mu.unlock();
      },
      opts());
}

TEST_P(CancelTest, SemaphoreWithdrawnWaiterTakesNoPermit) {
  weft::run(
      [&] {
        weft::Semaphore sem(0);
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        auto a = weft::spawn([&, c = ctx] { return sem.acquire(c); });
        auto b = weft::spawn([&] { return sem.acquire(weft::CancelToken()); });
        ASSERT_TRUE(eventually([&] { return parked_on("semaphore", {a.id(), b.id()}); }));
        cancel();
        EXPECT_EQ(a.join().code(), absl::StatusCode::kCancelled);
        sem.release(1);  // goes to b, the one still waiting
        EXPECT_TRUE(b.join().ok());
        EXPECT_EQ(sem.available(), 0);
        EXPECT_FALSE(sem.try_acquire_for(2ms));
        sem.release(1);
        EXPECT_TRUE(sem.try_acquire_for(kLong));
      },
      opts());
}

TEST_P(CancelTest, DeadlineOfAContextEndsTheWaitWithDeadlineExceeded) {
  weft::run(
      [&] {
        weft::Semaphore sem(0);
        auto [ctx, cancel] = weft::with_timeout(weft::background(), 5ms);
        absl::Status s = sem.acquire(ctx);
        EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
        EXPECT_EQ(sem.acquire(weft::CancelToken::after(1ms)).code(),
                  absl::StatusCode::kDeadlineExceeded);
        EXPECT_EQ(sem.available(), 0);
      },
      opts());
}

TEST_P(CancelTest, WaitGroupWaitGivesUpAndTheGroupStillWorks) {
  weft::run(
      [&] {
        weft::WaitGroup wg;
        wg.add(1);
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        auto waiter = weft::spawn([&, c = ctx] { return wg.wait(c); });
        auto plain = weft::spawn([&] { wg.wait(); });
        ASSERT_TRUE(eventually([&] { return parked_on("waitgroup", {waiter.id(), plain.id()}); }));
        cancel();
        EXPECT_EQ(waiter.join().code(), absl::StatusCode::kCancelled);
        wg.done();
        plain.join();
        // Counter and waiter count are consistent: a new round works.
        wg.add(2);
        auto w2 = weft::spawn([&] { return wg.wait(weft::CancelToken::after(kLong)); });
        wg.done();
        wg.done();
        EXPECT_TRUE(w2.join().ok());
        EXPECT_TRUE(wg.wait(ctx).ok());  // counter zero: returns at once, even cancelled
      },
      opts());
}

TEST_P(CancelTest, CondVarBoundedWaitReturnsWithTheLockHeld) {
  weft::run(
      [&] {
        weft::Mutex mu;
        weft::CondVar cv;
        bool ready = false;
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        auto waiter = weft::spawn([&, c = ctx] {
          std::unique_lock lock(mu);
          absl::Status s = cv.wait(lock, c, [&] { return ready; });
          EXPECT_TRUE(lock.owns_lock());
          return s;
        });
        ASSERT_TRUE(eventually([&] { return parked_on("condvar", {waiter.id()}); }));
        cancel();
        EXPECT_EQ(waiter.join().code(), absl::StatusCode::kCancelled);
        EXPECT_TRUE(mu.try_lock());  // the waiter released it when it returned
        mu.unlock();
        // Notified before the bound fires: OK.
        auto w2 = weft::spawn([&] {
          std::unique_lock lock(mu);
          return cv.wait(lock, weft::CancelToken::after(kLong), [&] { return ready; });
        });
        ASSERT_TRUE(eventually([&] { return parked_on("condvar", {w2.id()}); }));
        {
          std::lock_guard g(mu);
          ready = true;
        }
        cv.notify_all();
        EXPECT_TRUE(w2.join().ok());
        // wait_for still reports a timeout.
        std::unique_lock lock(mu);
        EXPECT_EQ(cv.wait_for(lock, 1ms), std::cv_status::timeout);
      },
      opts());
}

TEST_P(CancelTest, TaskWaitGivesUpAndJoinStillWorks) {
  weft::run(
      [&] {
        weft::Semaphore go(0);
        auto task = weft::spawn([&] {
          go.acquire();
          return 42;
        });
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        auto waiter = weft::spawn([&, c = ctx] { return task.wait(c); });
        ASSERT_TRUE(eventually([&] { return parked_on("join", {waiter.id()}); }));
        cancel();
        EXPECT_EQ(waiter.join().code(), absl::StatusCode::kCancelled);
        EXPECT_TRUE(task.joinable());
        go.release();
        EXPECT_TRUE(task.wait(weft::CancelToken::after(kLong)).ok());
        EXPECT_EQ(task.join(), 42);
      },
      opts());
}

TEST_P(CancelTest, RequestStopInterruptsBoundedWaitsAndSleeps) {
  weft::run(
      [&] {
        weft::Semaphore sem(0);
        weft::Mutex mu;
        auto sleeper = weft::spawn([] {
          weft::this_fiber::sleep_for(kLong);  // ends early, no error
          return weft::this_fiber::stop_requested();
        });
        auto waiter = weft::spawn([&] {
          absl::Status first = sem.acquire(weft::CancelToken());
          // Later bounded waits fail at once; unbounded ones still work.
          absl::Status second = weft::this_fiber::sleep_for(kLong, weft::CancelToken());
          mu.lock();
          mu.unlock();
          return std::pair(first, second);
        });
        ASSERT_TRUE(eventually([&] {
          return parked_on("sleep", {sleeper.id()}) && parked_on("semaphore", {waiter.id()});
        }));
        sleeper.request_stop();
        waiter.request_stop();
        waiter.request_stop();  // idempotent
        EXPECT_TRUE(sleeper.join());
        auto [first, second] = waiter.join();
        EXPECT_EQ(first.code(), absl::StatusCode::kCancelled) << first;
        EXPECT_NE(first.message().find("request_stop"), std::string::npos) << first;
        EXPECT_EQ(second.code(), absl::StatusCode::kCancelled) << second;
        EXPECT_EQ(sem.available(), 0);
        EXPECT_FALSE(weft::this_fiber::stop_requested());
        // request_stop after the fiber ended is harmless.
        auto done = weft::spawn([] { return 1; });
        EXPECT_TRUE(done.wait(weft::CancelToken()).ok());
        done.request_stop();
        EXPECT_EQ(done.join(), 1);
      },
      opts());
}

TEST_P(CancelTest, BoundedSleepSaysWhetherItSleptTheWholeTime) {
  weft::run(
      [&] {
        EXPECT_TRUE(weft::this_fiber::sleep_for(1ms, weft::CancelToken()).ok());
        auto [ctx, cancel] = weft::with_timeout(weft::background(), 2ms);
        EXPECT_EQ(weft::this_fiber::sleep_for(kLong, ctx).code(),
                  absl::StatusCode::kDeadlineExceeded);
        EXPECT_EQ(weft::this_fiber::sleep_for(kLong, weft::CancelToken::after(1ms)).code(),
                  absl::StatusCode::kDeadlineExceeded);
        auto [c2, cancel2] = weft::with_cancel(weft::background());
        cancel2();
        EXPECT_EQ(weft::this_fiber::sleep_for(1ms, c2).code(), absl::StatusCode::kCancelled);
      },
      opts());
}

TEST_P(CancelTest, BoundedBlockingStopsWaitingWhileTheJobRunsOn) {
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  std::atomic<bool> finished{false};
  weft::run(
      [&] {
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        auto caller = weft::spawn([&, c = ctx] {
          return weft::blocking(c, [&] {
            started.store(true);
            while (!release.load()) std::this_thread::sleep_for(100us);
            finished.store(true);
            return std::string("late");
          });
        });
        // The job runs (a dump that shows the caller parked is not enough: a fiber is shown
        // parked before its park's commit submits the job, and a cancel in between means the job
        // never starts).
        ASSERT_TRUE(eventually([&] { return started.load(); }));
        ASSERT_TRUE(eventually([&] { return parked_on("blocking call", {caller.id()}); }));
        cancel();
        absl::StatusOr<std::string> r = caller.join();
        EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
        EXPECT_FALSE(finished.load());
        release.store(true);
        // Not cancelled: the value, and an exception reaches the caller.
        absl::StatusOr<int> v = weft::blocking(weft::CancelToken(), [] { return 7; });
        ASSERT_TRUE(v.ok());
        EXPECT_EQ(*v, 7);
        EXPECT_THROW((void)weft::blocking(weft::CancelToken(),
                                          []() -> int { throw std::runtime_error("x"); }),
                     std::runtime_error);
        EXPECT_TRUE(weft::blocking(weft::CancelToken(), [] {}).ok());
        // Already cancelled: the job never starts.
        std::atomic<bool> ran{false};
        EXPECT_EQ(weft::blocking(ctx, [&] { ran = true; }).code(), absl::StatusCode::kCancelled);
        EXPECT_FALSE(ran.load());
      },
      opts());
  // run() returned only after the pool finished the abandoned job (it drains on shutdown). No
  // eventually() here: it sleeps as a fiber, and this is a plain thread.
  EXPECT_TRUE(finished.load());
}

TEST_P(CancelTest, BarrierPhasesDropAndBoundedWithdrawal) {
  weft::run(
      [&] {
        constexpr int kParty = 4;
        weft::Barrier barrier(kParty);
        std::atomic<int> phase_sum{0};
        std::vector<weft::Task<void>> tasks;
        for (int i = 0; i < kParty; ++i) {
          tasks.push_back(weft::spawn([&] {
            for (int p = 0; p < 5; ++p) {
              phase_sum.fetch_add(1);
              barrier.arrive_and_wait();
              // Everyone arrived in this phase before anyone passed it.
              EXPECT_GE(phase_sum.load(), kParty * (p + 1));
            }
          }));
        }
        for (auto& t : tasks) t.join();
        EXPECT_EQ(phase_sum.load(), kParty * 5);

        // A withdrawn arrival is taken back: the phase still needs everyone.
        weft::Barrier two(2);
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        auto quitter = weft::spawn([&, c = ctx] { return two.arrive_and_wait(c); });
        ASSERT_TRUE(eventually([&] { return parked_on("barrier", {quitter.id()}); }));
        cancel();
        EXPECT_EQ(quitter.join().code(), absl::StatusCode::kCancelled);
        auto first = weft::spawn([&] { return two.arrive_and_wait(weft::CancelToken()); });
        ASSERT_TRUE(eventually([&] { return parked_on("barrier", {first.id()}); }));
        two.arrive_and_drop();  // completes the phase; the party is one from now on
        EXPECT_TRUE(first.join().ok());
        two.arrive_and_wait();  // alone: passes at once
        EXPECT_THROW(weft::Barrier(0), std::invalid_argument);
      },
      opts());
}

TEST_P(CancelTest, AfterFuncRunsOnCancelUnlessStopped) {
  weft::run(
      [&] {
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        weft::Semaphore ran(0);
        std::atomic<int> runs{0};
        weft::AfterFuncStop stop_a = weft::after_func(ctx, [&] {
          runs.fetch_add(1);
          ran.release();
        });
        weft::AfterFuncStop stop_b = weft::after_func(ctx, [&] { runs.fetch_add(100); });
        EXPECT_TRUE(stop_b());   // unregistered before the cancel
        EXPECT_FALSE(stop_b());  // only once
        cancel();
        ran.acquire();
        EXPECT_FALSE(stop_a());  // it started already
        // Registered on a done context: runs at once (in its own fiber).
        weft::after_func(ctx, [&] {
          runs.fetch_add(1);
          ran.release();
        });
        ran.acquire();
        EXPECT_EQ(runs.load(), 2);
        // Background never fires; a deadline does.
        EXPECT_FALSE(weft::after_func(weft::background(), [] {})());
        auto [dctx, dcancel] = weft::with_timeout(weft::background(), 1ms);
        weft::after_func(dctx, [&] { ran.release(); });
        ran.acquire();
      },
      opts());
}

// Cancellation racing completion, many fibers at once: every permit is accounted for.
TEST_P(CancelTest, CancelRacingReleaseLosesAndDuplicatesNoPermit) {
  weft::run(
      [&] {
        constexpr int kFibers = 32;
        constexpr int kRounds = kSanitized ? 30 : 200;  // the sanitizers run ~10x slower
        constexpr int kPermits = 4;
        weft::Semaphore sem(kPermits);
        std::atomic<int> held{0};
        std::atomic<int> max_held{0};
        std::atomic<long> got{0}, gave_up{0};
        std::vector<weft::Task<void>> tasks;
        for (int i = 0; i < kFibers; ++i) {
          tasks.push_back(weft::spawn([&, i] {
            for (int r = 0; r < kRounds; ++r) {
              auto [ctx, cancel] = weft::with_cancel(weft::background());
              // Someone else cancels it, maybe while we wait, maybe before, maybe after.
              weft::go([c = cancel, r] {
                if (r % 3 == 0) weft::this_fiber::yield();
                c();
              });
              if (sem.acquire(ctx).ok()) {
                const int h = held.fetch_add(1) + 1;
                int m = max_held.load();
                while (h > m && !max_held.compare_exchange_weak(m, h)) {
                }
                if ((r + i) % 4 == 0) weft::this_fiber::yield();
                held.fetch_sub(1);
                sem.release();
                got.fetch_add(1);
              } else {
                gave_up.fetch_add(1);
              }
            }
          }));
        }
        for (auto& t : tasks) t.join();
        EXPECT_EQ(got.load() + gave_up.load(), long{kFibers} * kRounds);
        EXPECT_LE(max_held.load(), kPermits);
        EXPECT_EQ(sem.available(), kPermits);
      },
      opts());
}

// The same for a Mutex (handoff vs withdrawal) and for join vs cancel.
TEST_P(CancelTest, CancelRacingUnlockAndFinishLeavesEverythingConsistent) {
  weft::run(
      [&] {
        constexpr int kFibers = 16;
        constexpr int kRounds = kSanitized ? 30 : 200;
        weft::Mutex mu;
        long counter = 0;
        std::atomic<long> locked{0};
        std::vector<weft::Task<void>> tasks;
        for (int i = 0; i < kFibers; ++i) {
          tasks.push_back(weft::spawn([&] {
            for (int r = 0; r < kRounds; ++r) {
              auto [ctx, cancel] = weft::with_cancel(weft::background());
              weft::go([c = cancel] { c(); });
              if (mu.lock(ctx).ok()) {
                ++counter;  // guarded by mu: TSan checks the exclusion
                if (r % 5 == 0) weft::this_fiber::yield();
                mu.unlock();
                locked.fetch_add(1);
              }
              auto t = weft::spawn([] { weft::this_fiber::yield(); });
              auto [jctx, jcancel] = weft::with_cancel(weft::background());
              weft::go([c = jcancel] { c(); });
              (void)t.wait(jctx);
              t.join();  // finished or not, join completes it
            }
          }));
        }
        for (auto& t : tasks) t.join();
        std::lock_guard g(mu);
        EXPECT_EQ(counter, locked.load());
      },
      opts());
}

// Issue figure: cancelling a parent with 100,000 live children reaches every one (the time is
// printed for the record, not asserted).
TEST(ContextScale, CancellingAParentWithAHundredThousandChildrenReachesEveryOne) {
  constexpr int kChildren = 100000;
  auto [parent, cancel] = weft::with_cancel(weft::background());
  std::vector<weft::Context> children;
  std::vector<weft::CancelFunc> cancels;
  children.reserve(kChildren);
  cancels.reserve(kChildren);
  for (int i = 0; i < kChildren; ++i) {
    auto [c, f] = weft::with_cancel(parent);
    children.push_back(std::move(c));
    cancels.push_back(std::move(f));
  }
  const auto t0 = Clock::now();
  cancel();
  const double ms = ms_since(t0);
  int cancelled = 0;
  for (const auto& c : children) cancelled += c.err().code() == absl::StatusCode::kCancelled;
  EXPECT_EQ(cancelled, kChildren);
  std::printf("cancelling a parent with %d children took %.1f ms\n", kChildren, ms);
}

}  // namespace
