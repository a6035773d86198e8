// Proves the timer channels of docs/api.md (<weft/time.hpp>), Go's time.After and time.Ticker,
// under workers = 1, 2, 4 and 8: after(d) delivers the time once, no earlier than d (at once for d
// <= 0) and works as a select case; a Ticker ticks repeatedly on its period, drops ticks nobody
// takes and does not burst to catch up; stop() (also the destructor and move-assignment) ends the
// ticks and releases the runtime timer (Stats::timers_fired stops counting it; chan_death_test
// checks that deadlock detection then sees an idle runtime); after() channels dropped before they
// fired leak nothing (ASan/LSan) and do not keep run() from returning, also when a handle outlives
// run(); a non-positive Ticker period throws std::invalid_argument; after() and Ticker outside
// run() throw std::logic_error; timer channels work from plain threads while run() runs; the
// timer heap leaves a fiber's timer record alone once its callback woke the fiber. In child
// processes: durations at the edge of the clock (after / case_timeout / Ticker with
// nanoseconds::max() must not fire at once), and tickers with periods far below a callback's
// duration stopping cleanly.
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "chan_test_util.hpp"
#include "test_util.hpp"
#include "weft/time.hpp"
#include "weft/weft.hpp"

namespace {

using namespace weft_test;
using weft::Chan;
using weft::TimePoint;

class TimeTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(TimeTest);

TEST_P(TimeTest, AfterFiresOnceNoEarlierThanItsDuration) {
  weft::run(
      [] {
        for (auto d : {1ms, 10ms, 30ms}) {
          const auto t0 = Clock::now();
          Chan<TimePoint> c = weft::after(d);
          EXPECT_EQ(c.capacity(), 1u);
          const std::optional<TimePoint> v = c.recv();
          const auto t1 = Clock::now();
          ASSERT_TRUE(v.has_value());
          EXPECT_GE(t1 - t0, d);
          EXPECT_GE(*v - t0, d) << "the time sent is before the deadline";
          EXPECT_LE(*v, t1);
          EXPECT_LT(t1 - t0, d + 2s);
          // Once only.
          EXPECT_EQ(weft::select(weft::case_recv(c), weft::case_timeout(2 * d + 10ms)), 1u)
              << "after() fired twice";
          EXPECT_EQ(c.size(), 0u);
        }
      },
      opts());
}

TEST_P(TimeTest, AfterWithNonPositiveDurationFiresAtOnce) {
  weft::run(
      [] {
        for (auto d : {std::chrono::nanoseconds(0), std::chrono::nanoseconds(-5000000)}) {
          const auto t0 = Clock::now();
          auto c = weft::after(d);
          EXPECT_EQ(weft::select(weft::case_recv(c), weft::case_timeout(5s)), 0u);
          EXPECT_LT(Clock::now() - t0, 1s);
        }
      },
      opts());
}

TEST_P(TimeTest, AfterAsASelectCase) {
  weft::run(
      [] {
        Chan<int> never;
        const auto t0 = Clock::now();
        EXPECT_EQ(weft::select(weft::case_recv(never), weft::case_recv(weft::after(10ms))), 1u);
        EXPECT_GE(Clock::now() - t0, 10ms);

        // Go's timeout loop: values keep arriving, then stop; the after() ends the loop.
        Chan<int> values(1);
        auto producer = weft::spawn([&] {
          for (int i = 0; i < 20; ++i) {
            values.send(i);
            weft::this_fiber::sleep_for(200us);
          }
        });
        int got = 0;
        bool timed_out = false;
        auto deadline = weft::after(std::chrono::hours(1));
        while (!timed_out) {
          weft::select(weft::case_recv(values, [&] { ++got; }),
                       weft::case_recv(deadline, [&] { timed_out = true; }));
          if (got == 20) deadline = weft::after(15ms);  // a fresh one once all arrived
        }
        EXPECT_EQ(got, 20);
        producer.join();
      },
      opts());
}

TEST_P(TimeTest, ManyAfterChannelsEachFireNoEarlierThanTheirDeadline) {
  weft::run(
      [] {
        const auto t0 = Clock::now();
        std::vector<Chan<TimePoint>> cs;
        for (int i = 0; i < 30; ++i) cs.push_back(weft::after(std::chrono::milliseconds(i % 10)));
        int early = 0;
        for (int i = 0; i < 30; ++i) {
          auto v = cs[i].recv();
          if (!v || *v - t0 < std::chrono::milliseconds(i % 10)) ++early;
        }
        EXPECT_EQ(early, 0);
      },
      opts());
}

TEST_P(TimeTest, TickerTicksRepeatedlyOnItsPeriod) {
  weft::run(
      [] {
        const auto period = 5ms;
        const auto t0 = Clock::now();
        weft::Ticker t(period);
        Chan<TimePoint> c = t.chan();
        EXPECT_EQ(c.capacity(), 1u);
        EXPECT_TRUE(c == t.chan()) << "chan() must return the same channel every time";
        TimePoint prev = t0;
        for (int k = 1; k <= 6; ++k) {
          auto v = c.recv();
          ASSERT_TRUE(v.has_value());
          EXPECT_GT(*v, prev);
          EXPECT_GE(*v - t0, k * period) << "tick " << k << " came early";
          prev = *v;
        }
        EXPECT_GE(Clock::now() - t0, 6 * period);
        EXPECT_LT(Clock::now() - t0, 6 * period + 3s);
      },
      opts());
}

TEST_P(TimeTest, TickerDropsUntakenTicksAndDoesNotBurst) {
  weft::run(
      [] {
        const auto period = 2ms;
        weft::Ticker t(period);
        auto c = t.chan();
        weft::this_fiber::sleep_for(30ms);  // ~15 ticks, nobody takes them
        EXPECT_LE(c.size(), 1u) << "ticks piled up";
        auto stale = c.recv();  // the one buffered tick
        ASSERT_TRUE(stale.has_value());
        EXPECT_LE(*stale, Clock::now());
        // Ten fresh ticks span at least eight periods: each tick carries the time it fired, and
        // after firing the ticker re-arms for the next period boundary after that time, so the
        // 2nd tick fires after the 1st and every later one at least a period after the one
        // before. A ticker that burst to catch up on the dropped ones would send them at once.
        // (Measured on the ticks' own times, not the receiver's clock: a receiver that the OS
        // delays between two statements must not shorten the span it measures.)
        std::optional<TimePoint> first, last;
        for (int i = 0; i < 10; ++i) {
          last = c.recv();
          ASSERT_TRUE(last.has_value());
          if (i == 0) first = last;
        }
        EXPECT_GE(*last - *first, 8 * period) << "the ticker burst to catch up";
      },
      opts());
}

TEST_P(TimeTest, TickerStopEndsTicksAndReleasesTheTimer) {
  weft::run(
      [] {
        weft::Ticker t(1ms);
        auto c = t.chan();
        ASSERT_TRUE(c.recv().has_value());
        ASSERT_TRUE(c.recv().has_value());
        t.stop();
        (void)c.try_recv();  // a tick sent before stop() may still be buffered
        const std::uint64_t fired0 = weft::stats().timers_fired;
        weft::this_fiber::sleep_for(30ms);  // fires exactly one timer: its own
        const std::uint64_t fired = weft::stats().timers_fired - fired0;
        EXPECT_FALSE(c.try_recv().has_value()) << "a tick arrived after stop()";
        EXPECT_EQ(c.size(), 0u);
        EXPECT_LE(fired, 2u) << "the stopped ticker's timer kept firing";
        t.stop();  // twice is fine
        EXPECT_EQ(weft::select(weft::case_recv(c), weft::case_timeout(10ms)), 1u);
      },
      opts());
}

TEST_P(TimeTest, TickerDestructorAndMoveAssignmentStopIt) {
  weft::run(
      [] {
        Chan<TimePoint> c = nullptr;
        {
          weft::Ticker t(1ms);
          c = t.chan();
          ASSERT_TRUE(c.recv().has_value());
        }  // destroyed: stopped
        (void)c.try_recv();
        weft::this_fiber::sleep_for(15ms);
        EXPECT_FALSE(c.try_recv().has_value()) << "a destroyed ticker still ticks";

        weft::Ticker a(1ms);
        weft::Ticker b(std::chrono::hours(1));
        auto ca = a.chan();
        auto cb = b.chan();
        b = std::move(a);  // b's old timer is stopped, b now drives ca
        EXPECT_TRUE(b.chan() == ca);
        ASSERT_TRUE(ca.recv().has_value());
        ASSERT_TRUE(ca.recv().has_value()) << "the moved ticker stopped ticking";
        weft::Ticker moved(std::move(b));
        ASSERT_TRUE(ca.recv().has_value()) << "a move-constructed ticker stopped ticking";
        moved.stop();
        (void)ca.try_recv();
        weft::this_fiber::sleep_for(10ms);
        EXPECT_FALSE(ca.try_recv().has_value());
        EXPECT_FALSE(cb.try_recv().has_value());
      },
      opts());
}

// The runtime timer behind sleep_for and a select's case_timeout lives in the fiber's frame; once
// its callback woke the fiber, the fiber may return and reuse that stack memory at once, so the
// timer heap must not touch the record after the callback. (TSan reports TimerHeap::run_due's
// `firing.store(false)` after `fire()`, timers.cpp, racing with the next Timer constructed at the
// same address by the woken fiber.) Short sleeps and timeouts in tight loops on several workers.
TEST_P(TimeTest, TimerRecordIsNotTouchedAfterItsFiberWokeUp) {
  const int kIters = static_cast<int>(scaled(2000, 10));
  weft::run(
      [&] {
        std::vector<weft::Task<int>> ts;
        for (int f = 0; f < 4; ++f) {
          ts.push_back(weft::spawn([&, f] {
            Chan<int> never;
            int timeouts = 0;
            for (int i = 0; i < kIters; ++i) {
              if ((i + f) % 2) {
                weft::this_fiber::sleep_for(std::chrono::microseconds(1 + i % 20));
              } else if (weft::select(weft::case_recv(never),
                                      weft::case_timeout(std::chrono::microseconds(1 + i % 20))) ==
                         1) {
                ++timeouts;
              }
            }
            return timeouts;
          }));
        }
        for (auto& t : ts) EXPECT_EQ(t.join(), kIters / 2);
      },
      opts());
}

TEST_P(TimeTest, NonPositiveTickerPeriodThrowsInvalidArgument) {
  weft::run(
      [] {
        EXPECT_THROW(weft::Ticker(std::chrono::nanoseconds(0)), std::invalid_argument);
        EXPECT_THROW(weft::Ticker(-1ms), std::invalid_argument);
      },
      opts());
  // Outside run() too: the period is checked first.
  EXPECT_THROW(weft::Ticker(std::chrono::nanoseconds(0)), std::invalid_argument);
}

// weft::Timer, Go's time.Timer with Go 1.23's Stop/Reset: once they return, no value from before
// the call is received.
TEST_P(TimeTest, TimerFiresOnceAfterItsDuration) {
  weft::run(
      [] {
        const auto t0 = Clock::now();
        weft::Timer t(10ms);
        auto c = t.chan();
        ASSERT_TRUE(c.recv().has_value());
        EXPECT_GE(Clock::now() - t0, 10ms);
        weft::this_fiber::sleep_for(15ms);
        EXPECT_FALSE(c.try_recv().has_value()) << "a one-shot timer fired twice";
        EXPECT_FALSE(t.stop()) << "stop() after the value was received reports a prevention";
      },
      opts());
}

TEST_P(TimeTest, TimerStopBeforeItFiresPreventsTheValue) {
  weft::run(
      [] {
        weft::Timer t(5ms);
        EXPECT_TRUE(t.stop());
        EXPECT_FALSE(t.stop()) << "a second stop() reports a prevention again";
        EXPECT_EQ(weft::select(weft::case_recv(t.chan()), weft::case_timeout(20ms)), 1u)
            << "a stopped timer fired";
      },
      opts());
}

TEST_P(TimeTest, TimerStopDiscardsAValueNobodyReceived) {
  weft::run(
      [] {
        weft::Timer t(1ms);
        // Wait until it has fired and its value waits in the channel. (Not a fixed sleep: the
        // worker that pops a due timer runs its callback outside the heap's lock, so a later
        // sleep's timer can wake this fiber while that callback is still on its way.)
        EXPECT_TRUE(eventually([&] { return t.chan().size() == 1u; }));
        EXPECT_TRUE(t.stop()) << "Go 1.23: an unreceived value counts as not yet delivered";
        EXPECT_FALSE(t.chan().try_recv().has_value()) << "a stale value survived stop()";
      },
      opts());
}

TEST_P(TimeTest, TimerResetRearmsPostponesAndDiscardsStaleValues) {
  weft::run(
      [] {
        weft::Timer t(1ms);
        auto c = t.chan();
        ASSERT_TRUE(c.recv().has_value());
        // Re-arming a fired and received timer: it fires again, once (t0 is read before the
        // reset, so the new deadline is at least 5 ms after it).
        const auto t0 = Clock::now();
        EXPECT_FALSE(t.reset(5ms));
        ASSERT_TRUE(c.recv().has_value());
        EXPECT_GE(Clock::now() - t0, 5ms);
        // Postponing a pending timer: nothing arrives at the old deadline. The one value that
        // comes carries the time it was sent, which must be the new deadline's (judged by the
        // value, not by when the receiver got to look: a delayed receiver may see it late).
        weft::Timer p(5ms);
        weft::this_fiber::sleep_for(1ms);
        const auto reset_at = Clock::now();
        EXPECT_TRUE(p.reset(40ms)) << "reset() of a pending timer reports it was active";
        const std::optional<TimePoint> postponed = p.chan().recv();
        ASSERT_TRUE(postponed.has_value());
        EXPECT_GE(*postponed - reset_at, 40ms) << "the old deadline still fired after reset()";
        EXPECT_FALSE(p.chan().try_recv().has_value()) << "a postponed timer fired twice";
        // A value sent before reset() and never received is discarded, not delivered late.
        weft::Timer s(1ms);
        weft::this_fiber::sleep_for(10ms);
        EXPECT_TRUE(s.reset(std::chrono::hours(1)));
        EXPECT_FALSE(s.chan().try_recv().has_value()) << "a stale value survived reset()";
        // After stop(), reset() arms it again.
        EXPECT_TRUE(s.stop());
        EXPECT_FALSE(s.reset(1ms));
        EXPECT_TRUE(s.chan().recv().has_value());
      },
      opts());
}

TEST_P(TimeTest, TimerStopAndResetRaceWithFiringAndEachOther) {
  const int kIters = static_cast<int>(scaled(2000, 20));
  weft::run(
      [&] {
        std::vector<weft::Task<int>> ts;
        for (int f = 0; f < 4; ++f) {
          ts.push_back(weft::spawn([&, f] {
            int delivered = 0;
            for (int i = 0; i < kIters; ++i) {
              weft::Timer t(std::chrono::microseconds((i + f) % 7));
              auto c = t.chan();
              // A second fiber resets/stops the same timer while it may be firing.
              auto other = weft::spawn([&t, i] {
                return (i % 2) ? t.reset(std::chrono::microseconds(i % 5)) : t.stop();
              });
              // Nobody has received from c yet, so Go 1.23 semantics make both calls report a
              // prevention whether or not the timer had fired (or was firing) by then.
              if (!other.join()) {
                ADD_FAILURE() << ((i % 2) ? "reset()" : "stop()")
                              << " of a timer whose value nobody received returned false";
                return -1;
              }
              if (i % 2) {
                if (c.recv()) ++delivered;  // reset: exactly one value comes
              } else {
                (void)t.stop();  // stopped: no value may be received after this
                if (c.try_recv()) {
                  ADD_FAILURE() << "a value was received after stop() returned";
                  return -1;
                }
              }
            }
            return delivered;
          }));
        }
        for (auto& t : ts) EXPECT_EQ(t.join(), kIters / 2);
      },
      opts());
}

TEST_P(TimeTest, TimerMoveAssignmentStopsTheReplacedTimer) {
  weft::run(
      [] {
        weft::Timer a(1ms);
        weft::Timer b(2ms);
        auto cb = b.chan();
        b = std::move(a);
        weft::this_fiber::sleep_for(10ms);
        EXPECT_FALSE(cb.try_recv().has_value()) << "the replaced timer still fired";
        EXPECT_TRUE(b.chan().recv().has_value());
        EXPECT_FALSE(a.stop()) << "a moved-from timer reports a prevention";
        EXPECT_THROW((void)a.reset(1ms), std::logic_error);
      },
      opts());
}

TEST(TimeNoRuntime, AfterAndTickerOutsideRunThrowLogicError) {
  EXPECT_THROW((void)weft::after(1ms), std::logic_error);
  EXPECT_THROW(weft::Timer(1ms), std::logic_error);
  EXPECT_THROW(weft::Ticker(1ms), std::logic_error);
  try {
    weft::Ticker t(1ms);
    ADD_FAILURE() << "Ticker outside run() did not throw";
  } catch (const std::invalid_argument&) {
    ADD_FAILURE() << "Ticker outside run() threw invalid_argument, not the missing runtime";
  } catch (const std::logic_error&) {
  }
}

TEST_P(TimeTest, DroppedAfterChannelsDoNotKeepRunFromReturning) {
  std::atomic<int> unwound{0}, started{0};
  const auto t0 = Clock::now();
  weft::run(
      [&] {
        for (int i = 0; i < 1000; ++i) (void)weft::after(std::chrono::hours(1));
        std::vector<Chan<TimePoint>> kept;
        for (int i = 0; i < 100; ++i) kept.push_back(weft::after(std::chrono::hours(1)));
        // A fiber parked on one that never fires holds the last handle: unwinding drops it.
        weft::go([&, c = weft::after(std::chrono::hours(1))] {
          Unwound u{&unwound};
          ++started;
          (void)c.recv();
        });
        EXPECT_TRUE(eventually([&] { return started.load() == 1; }));
      },
      opts());
  EXPECT_LT(ms_since(t0), 5000.0) << "pending after() timers kept run() from returning";
  EXPECT_EQ(unwound.load(), 1);
}

TEST_P(TimeTest, AfterHandlesMayOutliveRun) {
  Chan<TimePoint> pending = nullptr;
  Chan<TimePoint> fired = nullptr;
  Chan<TimePoint> ticks = nullptr;
  weft::run(
      [&] {
        pending = weft::after(std::chrono::hours(1));
        fired = weft::after(1ms);
        weft::Ticker t(1ms);
        ticks = t.chan();
        weft::this_fiber::sleep_for(10ms);
      },
      opts());
  EXPECT_FALSE(pending.try_recv().has_value());
  EXPECT_TRUE(fired.try_recv().has_value());
  (void)ticks.try_recv();
  // Dropped while another runtime runs, and after it.
  weft::run(
      [&] {
        pending = nullptr;
        weft::this_fiber::sleep_for(5ms);
        EXPECT_FALSE(ticks.try_recv().has_value()) << "a ticker of a finished run() ticked";
      },
      opts());
  fired = nullptr;
  ticks = nullptr;
}

TEST_P(TimeTest, PendingAfterIsNotADeadlock) {
  // Every fiber parked on a timer channel: the monitor must not call it a deadlock (it would
  // abort this process).
  weft::run(
      [] {
        auto t = weft::spawn([] { return weft::after(60ms).recv().has_value(); });
        EXPECT_TRUE(weft::after(80ms).recv().has_value());
        EXPECT_TRUE(t.join());
      },
      opts());
}

TEST_P(TimeTest, TimerChannelsFromPlainThreads) {
  weft::run(
      [&] {
        Chan<TimePoint> from_fiber = weft::after(5ms);
        std::atomic<int> ok{0};
        std::thread t([&] {
          // Created on a plain thread while run() runs, received there too.
          const auto t0 = Clock::now();
          auto c = weft::after(5ms);
          if (c.recv().has_value() && Clock::now() - t0 >= 5ms) ++ok;
          weft::Ticker tick(1ms);
          if (tick.chan().recv().has_value() && tick.chan().recv().has_value()) ++ok;
          // One a fiber made.
          if (from_fiber.recv().has_value()) ++ok;
          // And a select with a timer channel and a timeout on a plain thread.
          if (weft::select(weft::case_recv(weft::after(2ms)), weft::case_timeout(10s)) == 0) ++ok;
        });
        weft::blocking([&] { t.join(); });
        EXPECT_EQ(ok.load(), 4);
      },
      opts());
}

// Durations at the edge of the clock: "practically never" must not wrap around to "now" (Go's
// time package saturates such deadlines). Each check runs in a child process with an alarm,
// because the failure modes are a hang (a ticker re-arming in the past spins its worker) or, under
// UBSan, an abort on the signed overflow. (Regression: the deadlines once overflowed into the
// past, so all three fired at once, and the ticker also spun its worker.)
class TimeDeathTest : public WorkersTest {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};
WEFT_INSTANTIATE_WORKERS(TimeDeathTest);

void exit_42(int) { _exit(42); }
void arm_alarm_ms(int ms) {
  signal(SIGALRM, exit_42);
  itimerval it{};
  it.it_value.tv_sec = ms / 1000;
  it.it_value.tv_usec = (ms % 1000) * 1000;
  setitimer(ITIMER_REAL, &it, nullptr);
}

constexpr auto kHuge = std::chrono::nanoseconds::max();

// Exit codes: 0 passed, 1 fired at once, 42 hung (alarm). The alarm allows 10 s: the child
// starts and stops a runtime (slow under the sanitizers on a loaded machine) around a 20 ms
// select, and the failure it catches is a hang.
TEST_P(TimeDeathTest, AfterWithHugeDurationDoesNotFireAtOnce) {
  const weft::Options o = opts();
  EXPECT_EXIT(
      {
        arm_alarm_ms(10000);
        const bool fired = weft::run(
            [] {
              auto c = weft::after(kHuge);
              return weft::select(weft::case_recv(c), weft::case_timeout(20ms)) == 0;
            },
            o);
        std::_Exit(fired ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_P(TimeDeathTest, SelectTimeoutWithHugeDurationDoesNotFireAtOnce) {
  const weft::Options o = opts();
  EXPECT_EXIT(
      {
        arm_alarm_ms(10000);
        const bool fired = weft::run(
            [] {
              Chan<int> never;
              return weft::select(weft::case_recv(never), weft::case_timeout(kHuge),
                                  weft::case_timeout(20ms)) == 1;
            },
            o);
        std::_Exit(fired ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_P(TimeDeathTest, TickerWithHugePeriodDoesNotTickAtOnce) {
  const weft::Options o = opts();
  EXPECT_EXIT(
      {
        arm_alarm_ms(10000);
        const bool ticked = weft::run(
            [] {
              weft::Ticker t(kHuge);
              return weft::select(weft::case_recv(t.chan()), weft::case_timeout(20ms)) == 0;
            },
            o);
        std::_Exit(ticked ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

// A period far shorter than a timer callback: the re-armed timer is due again at once, so another
// worker pops and fires it while the callback that re-armed it is still returning. Stopping and
// destroying such tickers must still be clean. In a child process with an alarm, because the
// failure modes are a use-after-free (TSan/ASan report it), a crash, or a hang: a late callback
// spinning on the lock of a freed channel.
// (Regression: the heap once tracked a running callback in the Timer record itself, so the first
// of two concurrent callbacks to return cleared it and timer_cancel() returned under the second.)
TEST_P(TimeDeathTest, TickersWithTinyPeriodsStopCleanly) {
  const int kTickers = static_cast<int>(scaled(3000, 50));
  const weft::Options o = opts();
  EXPECT_EXIT(
      {
        arm_alarm_ms(20000);
        const bool ok = weft::run(
            [&] {
              std::vector<weft::Task<int>> ts;
              for (int f = 0; f < 3; ++f) {
                ts.push_back(weft::spawn([&, f] {
                  int ticks = 0;
                  for (int i = 0; i < kTickers; ++i) {
                    weft::Ticker t(std::chrono::nanoseconds(1 + (i + f) % 3 * 500));
                    for (int k = 0; k < 3; ++k) ticks += t.chan().recv().has_value() ? 1 : 0;
                    if (i % 2) t.stop();
                  }  // destroyed: stopped (again) and its timer freed
                  return ticks;
                }));
              }
              bool all = true;
              for (auto& t : ts) all = all && t.join() == 3 * kTickers;
              return all;
            },
            o);
        std::exit(ok ? 0 : 1);  // exit(), not _Exit(): TSan turns its reports into exit code 66
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
