// Proves weft::select of docs/api.md, with Go's test/chan/select*.go as the reference, under
// workers = 1, 2, 4 and 8: which selects block and which do not (select3.go: nil channels, empty
// select, default, ready and closed cases, a select that sees itself), send cases on closed
// channels throw ChannelClosed (at once or while parked) and a parked receive case gets nullopt,
// the returned index counts case_default and case_timeout positions, handlers are optional and only
// the chosen one runs, `ch = nullptr` disables a case (select.go's send cases and nil), select6.go;
// case_timeout fires no earlier than its duration and never after another case won, select() with
// no cases blocks forever and is unwound at shutdown; values in select cases at shutdown; plain
// threads selecting (with and without a runtime).
// Fairness is in select_fairness_test.cpp, Go's runtime tests and stress in select_stress_test.cpp,
// the deadlock reports of selects that can never proceed in chan_death_test.cpp.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "chan_test_util.hpp"
#include "test_util.hpp"
#include "weft/select.hpp"
#include "weft/weft.hpp"
namespace {

using namespace weft_test;
using weft::case_default;
using weft::case_recv;
using weft::case_send;
using weft::case_timeout;
using weft::Chan;
using weft::select;

class SelectTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(SelectTest);
// ---- select3.go: which selects block
// -------------------------------------------------------------

TEST_P(SelectTest, GoSelect3WhichSelectsBlock) {
  auto st = std::make_shared<Bodies::State>(0);
  std::size_t always = 0;
  weft::run(
      [&] {
        Chan<int> nilch = nullptr;
        Chan<int> closedch;
        closedch.close();
        Chan<int> unready;  // nobody ever sends: closed below to release its waiters
        Chan<int> self;     // a select that sees itself
        Chan<int> full(1);
        full.send(0);
        std::atomic<int> unreachable{0};
        auto bad = [&] { ++unreachable; };

        // These always block.
        std::vector<std::function<void()>> blocking = {
            [=] { nilch.send(7); },
            [=] { (void)nilch.recv(); },
            [=] { (void)unready.recv(); },
            [=] { full.send(7); },
            [] { select(); },
            [=] { select(case_recv(nilch, bad)); },
            [=] { select(case_send(nilch, 7, bad)); },
            [=] { select(case_recv(nilch, bad), case_send(nilch, 7, bad)); },
            [=] { select(case_recv(unready)); },
            [=] { select(case_send(self, 1), case_recv(self)); },
            [=] { select(case_recv(nilch, bad), case_timeout(std::chrono::hours(1), bad)); },
        };
        always = blocking.size();
        Bodies blocked(std::move(blocking));
        st = blocked.state();

        // These never block.
        std::vector<std::function<void()>> non_blocking = {
            [] {
              Chan<int> ch(1);
              ch.send(7);
            },
            [=, &unreachable] {
              for (int i = 0; i < 10; ++i) {
                if (closedch.recv().has_value()) ++unreachable;
                if (closedch.try_recv().has_value()) ++unreachable;
              }
            },
            [=] { EXPECT_EQ(select(case_default()), 0u); },
            [=] { EXPECT_EQ(select(case_recv(nilch, bad), case_default()), 1u); },
            [=] { EXPECT_EQ(select(case_send(nilch, 7, bad), case_default()), 1u); },
            [=] {
              Chan<int> ch(1);
              EXPECT_EQ(select(case_send(ch, 7), case_default(bad)), 0u);
              EXPECT_EQ(ch.try_recv(), 7);
            },
            [=] {
              Chan<int> ch(1);
              ch.send(7);
              std::optional<int> got;
              EXPECT_EQ(
                  select(case_recv(ch, [&](std::optional<int> v) { got = v; }), case_default(bad)),
                  0u);
              EXPECT_EQ(got, 7);
            },
            [=] { EXPECT_EQ(select(case_recv(closedch)), 0u); },
            [=] {
              bool called = false;
              EXPECT_EQ(select(case_recv(closedch,
                                         [&](std::optional<int> v) {
                                           called = true;
                                           EXPECT_FALSE(v.has_value());
                                         })),
                        0u);
              EXPECT_TRUE(called);
            },
            [=] { EXPECT_EQ(select(case_recv(closedch, [] {}), case_recv(nilch, bad)), 0u); },
            [=] { EXPECT_EQ(select(case_recv(nilch, bad), case_timeout(0ms)), 1u); },
            [=] { EXPECT_EQ(select(case_timeout(-5ms)), 0u); },
        };
        Bodies quick(std::move(non_blocking));
        EXPECT_TRUE(quick.all_returned_within(5s)) << "a select that must not block blocked";
        for (std::size_t i = 0; i < quick.size(); ++i) {
          EXPECT_TRUE(quick.returned(i)) << "non-blocking body " << i << " blocked";
        }

        weft::this_fiber::sleep_for(20ms);
        for (std::size_t i = 0; i < blocked.size(); ++i) {
          EXPECT_FALSE(blocked.returned(i)) << "blocking body " << i << " returned";
        }
        // Release what can be released; the rest blocks for good and is unwound at shutdown.
        unready.close();
        self.close();
        (void)full.recv();
        for (std::size_t i : {2, 3, 8, 9}) {
          EXPECT_TRUE(eventually([&] { return blocked.returned(i); }, 5s))
              << "body " << i << " was not released by close/recv";
        }
        EXPECT_EQ(unreachable.load(), 0);
      },
      opts());
  EXPECT_EQ(st->unwound.load(), static_cast<int>(always))
      << "a fiber blocked in a select was not unwound at shutdown";
}

// Go's select3.go "sending to a closed channel panics", in a select.
TEST_P(SelectTest, SendCaseOnClosedChannelThrows) {
  weft::run(
      [] {
        Chan<int> closedch;
        closedch.close();
        Chan<int> nilch = nullptr;
        int handler_ran = 0;
        for (int i = 0; i < 50; ++i) {
          EXPECT_THROW(select(case_send(closedch, 7, [&] { ++handler_ran; })), weft::ChannelClosed);
          // A closed channel is "ready", so default never hides the panic.
          EXPECT_THROW(select(case_send(closedch, 7), case_default([&] { ++handler_ran; })),
                       weft::ChannelClosed);
          EXPECT_THROW(select(case_send(closedch, 7), case_recv(nilch)), weft::ChannelClosed);
        }
        EXPECT_EQ(handler_ran, 0);

        // Among other ready cases it is chosen some of the time, like any ready case.
        Chan<int> ready(1);
        int threw = 0, received = 0;
        for (int i = 0; i < 400; ++i) {
          (void)ready.try_send(1);
          try {
            if (select(case_send(closedch, 7), case_recv(ready)) == 1) ++received;
          } catch (const weft::ChannelClosed&) {
            ++threw;
          }
        }
        EXPECT_GT(threw, 100);
        EXPECT_GT(received, 100);
      },
      opts());
}

TEST_P(SelectTest, ParkedSendCaseThrowsWhenTheChannelCloses) {
  weft::run(
      [] {
        for (int cap : {0, 1}) {
          Chan<std::unique_ptr<int>> ch(cap);
          if (cap) ch.send(std::make_unique<int>(0));
          Chan<int> other;
          auto t = weft::spawn([&] {
            try {
              select(case_send(ch, std::make_unique<int>(1)), case_recv(other));
              return 0;
            } catch (const weft::ChannelClosed&) {
              return 1;
            }
          });
          weft::this_fiber::sleep_for(5ms);
          ch.close();
          EXPECT_EQ(t.join(), 1) << "cap " << cap;
          if (cap) {
            EXPECT_EQ(**ch.recv(), 0);
          }
          EXPECT_FALSE(ch.recv().has_value()) << "the parked send case's value was delivered";
          // The losing case's waiter is gone from `other`.
          EXPECT_FALSE(other.try_send(3));
        }
      },
      opts());
}

TEST_P(SelectTest, ParkedRecvCaseGetsNulloptWhenTheChannelCloses) {
  weft::run(
      [] {
        Chan<int> a;
        Chan<int> b(2);
        auto t = weft::spawn([&] {
          std::optional<int> got = 99;
          bool b_ran = false;
          const std::size_t i = select(case_recv(a, [&](std::optional<int> v) { got = v; }),
                                       case_recv(b, [&] { b_ran = true; }));
          EXPECT_FALSE(b_ran);
          EXPECT_FALSE(got.has_value());
          return i;
        });
        weft::this_fiber::sleep_for(5ms);
        a.close();
        EXPECT_EQ(t.join(), 0u);
        // Its waiter on b was removed: a value sent to b now stays in b.
        EXPECT_TRUE(b.try_send(1));
        EXPECT_EQ(b.size(), 1u);
      },
      opts());
}

// ---- index, handlers, nil cases
// ------------------------------------------------------------------

TEST_P(SelectTest, ReturnedIndexIsThePositionIncludingDefaultAndTimeout) {
  weft::run(
      [] {
        Chan<int> nil = nullptr;
        Chan<int> ready(1);
        Chan<int> never;
        EXPECT_EQ(select(case_default()), 0u);
        EXPECT_EQ(select(case_default(), case_recv(nil)), 0u);
        EXPECT_EQ(select(case_recv(nil), case_recv(never), case_default()), 2u);
        EXPECT_EQ(select(case_recv(never), case_timeout(1ms)), 1u);
        EXPECT_EQ(select(case_timeout(1ms), case_recv(never)), 0u);
        // The earliest of several timeouts wins.
        EXPECT_EQ(select(case_timeout(1h), case_recv(never), case_timeout(2ms), case_timeout(1s)),
                  2u);
        ready.send(1);
        EXPECT_EQ(select(case_default(), case_recv(nil), case_recv(ready)), 2u);
        EXPECT_EQ(select(case_timeout(1h), case_send(ready, 5), case_recv(never)), 1u);
        EXPECT_EQ(select(case_recv(never), case_send(nil, 1), case_timeout(0ms), case_recv(ready)),
                  3u)
            << "a ready channel case must win over an already expired timeout";
        EXPECT_EQ(ready.size(), 0u);
      },
      opts());
}

TEST_P(SelectTest, OnlyTheChosenHandlerRunsAndHandlersAreOptional) {
  weft::run(
      [] {
        Chan<std::unique_ptr<int>> ready(1);
        Chan<std::unique_ptr<int>> never;
        Chan<int> out(1);
        int ran_recv = 0, ran_never = 0, ran_send = 0, ran_default = 0, ran_timeout = 0;
        ready.send(std::make_unique<int>(5));
        std::unique_ptr<int> got;
        EXPECT_EQ(
            select(case_recv(never, [&](std::optional<std::unique_ptr<int>>) { ++ran_never; }),
                   case_recv(ready,
                             [&](std::optional<std::unique_ptr<int>> v) {
                               ++ran_recv;
                               got = std::move(*v);
                             }),
                   case_default([&] { ++ran_default; })),
            1u);
        ASSERT_NE(got, nullptr);
        EXPECT_EQ(*got, 5);
        EXPECT_EQ(select(case_send(out, 3, [&] { ++ran_send; }), case_recv(never),
                         case_timeout(1h, [&] { ++ran_timeout; })),
                  0u);
        EXPECT_EQ(select(case_send(out, 4, [&] { ++ran_send; }),
                         case_timeout(1ms, [&] { ++ran_timeout; })),
                  1u);
        EXPECT_EQ(ran_recv, 1);
        EXPECT_EQ(ran_send, 1);
        EXPECT_EQ(ran_timeout, 1);
        EXPECT_EQ(ran_never, 0);
        EXPECT_EQ(ran_default, 0);
        // Handlers omitted everywhere; a recv handler may ignore the value.
        EXPECT_EQ(select(case_recv(out)), 0u);
        EXPECT_EQ(select(case_send(out, 6), case_recv(never)), 0u);
        int plain = 0;
        EXPECT_EQ(select(case_recv(out, [&] { ++plain; })), 0u);
        EXPECT_EQ(plain, 1);
        // A mutable handler runs on its own copy.
        ready.send(std::make_unique<int>(1));
        int calls = 0;
        select(case_recv(
            ready, [n = 0, &calls](std::optional<std::unique_ptr<int>>) mutable { calls = ++n; }));
        EXPECT_EQ(calls, 1);
        // A send case's value is not consumed when another case wins.
        auto big = std::make_shared<int>(9);
        Chan<std::shared_ptr<int>> full(1);
        full.send(nullptr);
        EXPECT_EQ(select(case_send(full, big), case_default()), 1u);
        EXPECT_EQ(big.use_count(), 1) << "a losing send case kept (or leaked) its value";
      },
      opts());
}

TEST_P(SelectTest, NilCaseIsDisabledByAssigningNullptr) {
  // Go's idiom: merge two channels until both are closed, disabling each one as it closes.
  const int kN = static_cast<int>(scaled(2000));
  weft::run(
      [&] {
        Chan<int> a(3), b;
        weft::go([a, kN] {
          for (int i = 0; i < kN; ++i) a.send(2 * i);
          a.close();
        });
        weft::go([b, kN] {
          for (int i = 0; i < kN; ++i) b.send(2 * i + 1);
          b.close();
        });
        std::vector<int> seen(2 * kN, 0);
        int closes = 0;
        Chan<int> ra = a, rb = b;
        while (ra || rb) {
          select(case_recv(ra,
                           [&](std::optional<int> v) {
                             if (v) {
                               ++seen[*v];
                             } else {
                               ++closes;
                               ra = nullptr;
                             }
                           }),
                 case_recv(rb, [&](std::optional<int> v) {
                   if (v) {
                     ++seen[*v];
                   } else {
                     ++closes;
                     rb = nullptr;
                   }
                 }));
        }
        EXPECT_EQ(closes, 2) << "a disabled (nil) case fired again";
        EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 2 * kN);
      },
      opts());
}

// Go's select.go: every send case's value is evaluated once; nil cases never fire.
TEST_P(SelectTest, GoSelectSendCasesAndNil) {
  weft::run(
      [] {
        unsigned counter = 0, shift = 0;
        auto value = [&] {
          ++counter;
          return 1u << shift;
        };
        auto send_all = [&](Chan<unsigned> a, Chan<unsigned> b) {
          shift = 0;
          int i = 0;
          for (;;) {
            bool stop = false;
            select(case_send(a, value(),
                             [&] {
                               ++i;
                               a = nullptr;
                             }),
                   case_send(b, value(),
                             [&] {
                               ++i;
                               b = nullptr;
                             }),
                   case_default([&] { stop = true; }));
            if (stop) break;
            ++shift;
          }
          return i;
        };
        Chan<unsigned> a(1), b(1);
        EXPECT_EQ(send_all(a, b), 2);
        EXPECT_EQ(*a.recv() | *b.recv(), 3u);
        EXPECT_EQ(send_all(a, nullptr), 1);
        EXPECT_EQ(counter, 10u);
      },
      opts());
}

// Go's select6.go (issue 2075): a failed select case must not corrupt the queue of a channel that
// has other waiters.
TEST_P(SelectTest, GoSelect6LosingCaseKeepsQueueIntact) {
  weft::run(
      [] {
        for (int round = 0; round < 20; ++round) {
          Chan<bool> c1, c2, c3;
          std::atomic<int> bad{0};
          weft::go([c1] { (void)c1.recv(); });
          weft::go([c1, c2, c3, &bad] {
            select(case_recv(c1, [&] { ++bad; }), case_recv(c2, [&] { c3.send(true); }));
            (void)c1.recv();
          });
          weft::go([c2] { c2.send(true); });
          if (select(case_recv(c3), case_timeout(5s)) != 0) {
            ADD_FAILURE() << "the select's c2 case never completed";
            return;
          }
          c1.send(true);
          c1.send(true);  // both receivers of c1 must be reachable
          EXPECT_EQ(bad.load(), 0);
        }
      },
      opts());
}

// ---- timeouts
// ------------------------------------------------------------------------------------

TEST_P(SelectTest, TimeoutFiresNoEarlierThanItsDuration) {
  weft::run(
      [] {
        Chan<int> never;
        Chan<int> nil = nullptr;
        for (auto d : {1ms, 5ms, 20ms}) {
          const auto t0 = Clock::now();
          EXPECT_EQ(select(case_recv(never), case_timeout(d)), 1u);
          const auto took = Clock::now() - t0;
          EXPECT_GE(took, d);
          EXPECT_LT(took, d + 2s);
          const auto t1 = Clock::now();
          EXPECT_EQ(select(case_timeout(d)), 0u);  // a timeout alone
          EXPECT_GE(Clock::now() - t1, d);
          const auto t2 = Clock::now();
          EXPECT_EQ(select(case_recv(nil), case_timeout(d)), 1u);  // only nil channels besides
          EXPECT_GE(Clock::now() - t2, d);
        }
      },
      opts());
}

TEST_P(SelectTest, ValueBeforeTimeoutWinsAndTheTimeoutNeverFiresLater) {
  // Races a value against a timeout of about the same length many times. Whichever wins, the
  // loser must leave no trace: a stale timeout wake-up would end the fiber's next park early, and
  // a stale waiter would swallow a value meant for the next select.
  const int kRounds = static_cast<int>(scaled(150));
  weft::run(
      [&] {
        Chan<int> ch;
        Chan<int> ack;
        auto sender = weft::spawn([&] {
          for (int i = 0; i < kRounds; ++i) {
            if (i % 3 == 0) weft::this_fiber::sleep_for(std::chrono::microseconds(50 * (i % 7)));
            // A value this select took, or one the timeout made it give up on: then try again.
            select(case_send(ch, i), case_timeout(1ms));
            (void)ack.recv();
          }
        });
        int values = 0, timeouts = 0, early_wakeups = 0;
        for (int i = 0; i < kRounds; ++i) {
          const std::size_t k =
              select(case_recv(ch, [&](std::optional<int> v) { EXPECT_TRUE(v.has_value()); }),
                     case_timeout(std::chrono::microseconds(100 + 50 * (i % 5))));
          (k == 0 ? values : timeouts)++;
          // A park right after: it must last its full duration.
          const auto t0 = Clock::now();
          weft::this_fiber::sleep_for(200us);
          if (Clock::now() - t0 < 200us) ++early_wakeups;
          ack.send(0);
        }
        sender.join();
        EXPECT_EQ(values + timeouts, kRounds);
        EXPECT_EQ(early_wakeups, 0) << "a timeout that lost woke the fiber later";
        EXPECT_EQ(ch.size(), 0u);
        EXPECT_FALSE(ch.try_send(1)) << "a stale select waiter is still queued";
      },
      opts());
}

// select() with no cases blocks forever, and shutdown unwinds it.
TEST_P(SelectTest, EmptySelectBlocksForeverAndIsUnwound) {
  std::atomic<int> unwound{0}, started{0}, returned{0};
  const auto t0 = Clock::now();
  weft::run(
      [&] {
        for (int i = 0; i < 3; ++i) {
          weft::go([&] {
            Unwound u{&unwound};
            ++started;
            select();
            ++returned;
          });
        }
        EXPECT_TRUE(eventually([&] { return started.load() == 3; }));
        weft::this_fiber::sleep_for(20ms);
        EXPECT_EQ(returned.load(), 0);
      },
      opts());
  EXPECT_EQ(unwound.load(), 3);
  EXPECT_EQ(returned.load(), 0);
  EXPECT_LT(ms_since(t0), 5000.0);
}
// ---- shutdown with values in select cases
// --------------------------------------------------------

TEST_P(SelectTest, ParkedSelectsAreUnwoundWithoutLeakingCaseValues) {
  Tracked::reset();
  std::atomic<int> unwound{0}, started{0};
  // They outlive run(): the unwound selects must leave no waiter in them.
  Chan<Tracked> nobody_receives;
  Chan<Tracked> nobody_sends;
  Chan<Tracked> full(1);
  ASSERT_TRUE(full.try_send(Tracked(0)));
  weft::run(
      [&] {
        for (int i = 0; i < 6; ++i) {
          weft::go([&, i] {
            Unwound u{&unwound};
            ++started;
            if (i % 2) {
              select(case_send(nobody_receives, Tracked(10 + i)), case_send(full, Tracked(20 + i)),
                     case_timeout(1h));
            } else {
              select(case_recv(nobody_sends), case_send(full, Tracked(30 + i)));
            }
          });
        }
        EXPECT_TRUE(eventually([&] { return started.load() == 6; }));
        weft::this_fiber::sleep_for(5ms);
      },
      opts());
  EXPECT_EQ(unwound.load(), 6);
  EXPECT_FALSE(nobody_sends.try_send(Tracked(1)))
      << "an unwound select left a receive waiter behind";
  EXPECT_FALSE(nobody_receives.try_recv().has_value())
      << "an unwound select left a send waiter behind";
  EXPECT_EQ(full.size(), 1u);
  EXPECT_EQ(full.try_recv()->id, 0);
  EXPECT_FALSE(full.try_recv().has_value()) << "an unwound select's send case got in";
  EXPECT_EQ(Tracked::live.load(), 0);
  EXPECT_EQ(Tracked::double_destroyed.load(), 0);
}

// ---- plain threads
// -------------------------------------------------------------------------------

TEST(SelectThreads, SelectWithTimeoutBetweenPlainThreadsWithoutARuntime) {
  Chan<int> ch;
  // Nobody sends: the timeout fires, no earlier than asked.
  auto t0 = Clock::now();
  EXPECT_EQ(select(case_recv(ch), case_timeout(20ms)), 1u);
  EXPECT_GE(Clock::now() - t0, 20ms);
  // Another thread sends before the timeout: the value wins.
  std::thread sender([&] {
    std::this_thread::sleep_for(10ms);
    ch.send(5);
  });
  std::optional<int> got;
  t0 = Clock::now();
  EXPECT_EQ(select(case_recv(ch, [&](std::optional<int> v) { got = v; }), case_timeout(10s)), 0u);
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_EQ(got, 5);
  sender.join();
  // A send case from a plain thread, received by another one.
  std::thread receiver([&] { EXPECT_EQ(ch.recv(), 6); });
  EXPECT_EQ(select(case_send(ch, 6), case_timeout(10s)), 0u);
  receiver.join();
  // A timeout alone, and default.
  t0 = Clock::now();
  EXPECT_EQ(select(case_timeout(5ms)), 0u);
  EXPECT_GE(Clock::now() - t0, 5ms);
  EXPECT_EQ(select(case_recv(ch), case_default()), 1u);
}

TEST(SelectThreads, PlainThreadsSelectAgainstEachOtherWithoutARuntime) {
  // Thread A: send on x or receive from y; thread B the mirror image; both with timeouts.
  const int kN = static_cast<int>(scaled(3000));
  Chan<int> x, y;
  std::vector<int> got_a, got_b;
  std::atomic<int> a_sent{0}, b_sent{0};
  auto side = [&](const Chan<int>& out, const Chan<int>& in, std::vector<int>& got,
                  std::atomic<int>& sent, int base) {
    int next = 0;
    while (next < kN || static_cast<int>(got.size()) < kN) {
      if (next < kN) {
        select(case_send(out, base + next, [&] { ++next; }),
               case_recv(in, [&](std::optional<int> v) { got.push_back(*v); }), case_timeout(1ms));
      } else {
        select(case_recv(in, [&](std::optional<int> v) { got.push_back(*v); }), case_timeout(1ms));
      }
    }
    sent = next;
  };
  std::thread a([&] { side(x, y, got_a, a_sent, 0); });
  std::thread b([&] { side(y, x, got_b, b_sent, 1000000); });
  a.join();
  b.join();
  ASSERT_EQ(got_a.size(), static_cast<std::size_t>(kN));
  ASSERT_EQ(got_b.size(), static_cast<std::size_t>(kN));
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(got_b[i], i) << "thread B received out of order";
    EXPECT_EQ(got_a[i], 1000000 + i) << "thread A received out of order";
    if (::testing::Test::HasFailure()) break;
  }
}

TEST_P(SelectTest, PlainThreadSelectsWhileRunRuns) {
  const int kN = static_cast<int>(scaled(2000));
  Chan<int> from_fibers(1);
  Chan<int> to_fibers;
  std::atomic<int> thread_got{0}, thread_timeouts{0};
  weft::run(
      [&] {
        std::thread t([&] {
          int sent = 0, received = 0;
          while (received < kN || sent < kN) {
            select(case_recv(from_fibers,
                             [&](std::optional<int> v) {
                               EXPECT_EQ(*v, received);
                               ++received;
                             }),
                   case_send(sent < kN ? to_fibers : Chan<int>(nullptr), sent, [&] { ++sent; }),
                   case_timeout(2ms, [&] { ++thread_timeouts; }));
          }
          thread_got = received;
        });
        auto producer = weft::spawn([&] {
          for (int i = 0; i < kN; ++i) from_fibers.send(i);
        });
        int expect = 0;
        for (int i = 0; i < kN; ++i) {
          select(case_recv(to_fibers, [&](std::optional<int> v) { EXPECT_EQ(*v, expect++); }));
        }
        producer.join();
        weft::blocking([&] { t.join(); });
      },
      opts());
  EXPECT_EQ(thread_got.load(), kN);
}
}  // namespace
