// Proves weft::select of docs/api.md, with Go's test/chan/select*.go, doubleselect.go and
// runtime/chan_test.go as the reference, under workers = 1, 2, 4 and 8: which selects block and
// which do not (select3.go: nil channels, empty select, default, ready and closed cases, a select
// that sees itself), send cases on closed channels throw ChannelClosed (at once or while parked),
// the returned index counts case_default and case_timeout positions, handlers are optional and
// only the chosen one runs, `ch = nullptr` disables a case, case_timeout fires no earlier than its
// duration and never after another case won, select() with no cases blocks forever and is unwound
// at shutdown, fairness among ready cases (also the same channel twice) by a statistical test and
// Go's TestSelectFairness / TestPseudoRandomSend, Go's TestSelectDuplicateChannel,
// TestSelfSelect, TestNonblockSelectRace(2), TestSelectStress (with timeouts, every value received
// exactly once), doubleselect.go, select.go, select6.go; plain threads selecting (with and
// without a runtime) and values in select cases at shutdown. The deadlock reports of selects that
// can never proceed are in chan_death_test.cpp.
#include "weft/select.hpp"

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

// ---- fairness
// ------------------------------------------------------------------------------------

// Chi-square of `counts` against equal expectation; with the critical value for p = 1e-9 the
// test flakes about once in a billion runs, yet a real bias of a few percent fails it.
void expect_uniform(const std::vector<int>& counts, const char* what) {
  static const double kCritical[] = {0, 37.3, 41.5, 44.8, 47.9, 50.7, 53.3, 55.9};
  double total = 0;
  for (int c : counts) total += c;
  const double expect = total / static_cast<double>(counts.size());
  double chi2 = 0;
  for (int c : counts) {
    chi2 += (c - expect) * (c - expect) / expect;
    EXPECT_GT(c, expect * 0.75) << what;
    EXPECT_LT(c, expect * 1.25) << what;
  }
  std::string list;
  for (int c : counts) list += std::to_string(c) + " ";
  EXPECT_LT(chi2, kCritical[counts.size() - 1]) << what << ": counts " << list;
}

TEST_P(SelectTest, FairAmongReadyCasesIncludingADuplicateChannel) {
  const int kTrials = 12000;
  weft::run(
      [&] {
        // Run on a fiber that may migrate between workers meanwhile.
        auto t = weft::spawn([&] {
          Chan<int> c1(4), c2(4), c3(4), never;
          Chan<int> nil = nullptr;
          c1.send(1);
          c2.send(2);
          std::vector<int> counts(7, 0);
          for (int i = 0; i < kTrials; ++i) {
            const std::size_t k =
                select(case_recv(c1), case_recv(c1), case_recv(never), case_recv(c2),
                       case_send(c3, 3), case_recv(nil), case_send(nil, 0));
            ++counts[k];
            if (k <= 1) c1.send(1);
            if (k == 3) c2.send(2);
            if (k == 4) (void)c3.recv();
            if (i % 1000 == 0) weft::this_fiber::yield();
          }
          EXPECT_EQ(counts[2] + counts[5] + counts[6], 0) << "a case that was never ready fired";
          expect_uniform({counts[0], counts[1], counts[3], counts[4]}, "ready cases");
          // Two closed channels are both always ready.
          Chan<int> x, y;
          x.close();
          y.close();
          std::vector<int> closed(2, 0);
          for (int i = 0; i < kTrials / 2; ++i) ++closed[select(case_recv(x), case_recv(y))];
          expect_uniform(closed, "closed channels");
          // case_default is never chosen while another case is ready.
          int defaults = 0;
          for (int i = 0; i < 1000; ++i) {
            if (select(case_default(), case_recv(x)) == 0) ++defaults;
          }
          EXPECT_EQ(defaults, 0);
        });
        t.join();
      },
      opts());
}

// Go's TestSelectFairness: two always-ready buffered channels and two never-ready ones, with the
// choice going through a second select to the consumer.
TEST_P(SelectTest, GoSelectFairness) {
  const int kTrials = 10000;
  weft::run(
      [&] {
        Chan<char> c1(kTrials + 1), c2(kTrials + 1), c3, c4, out, done;
        for (int i = 0; i < kTrials + 1; ++i) {
          c1.send(1);
          c2.send(2);
        }
        weft::WaitGroup wg;
        wg.add(1);
        weft::go([&] {
          for (;;) {
            char b = 0;
            auto take = [&](std::optional<char> v) { b = *v; };
            select(case_recv(c3, take), case_recv(c4, take), case_recv(c1, take),
                   case_recv(c2, take));
            bool stop = false;
            select(case_send(out, b), case_recv(done, [&] { stop = true; }));
            if (stop) break;
          }
          wg.done();
        });
        int cnt1 = 0, cnt2 = 0, other = 0;
        for (int i = 0; i < kTrials; ++i) {
          switch (*out.recv()) {
            case 1:
              ++cnt1;
              break;
            case 2:
              ++cnt2;
              break;
            default:
              ++other;
          }
        }
        EXPECT_EQ(other, 0);
        // Go allows 10 sigma; we use chi-square too.
        const double sigma = std::sqrt(kTrials * 0.25);
        EXPECT_LT(std::abs(cnt1 - kTrials / 2), 10 * sigma) << cnt1 << " vs " << cnt2;
        expect_uniform({cnt1, cnt2}, "TestSelectFairness");
        done.close();
        wg.wait();
      },
      opts());
}

// Go's TestPseudoRandomSend: a select with two send cases on one channel sends each value about
// half of the time, also when it parks and the receiver comes later.
TEST_P(SelectTest, GoPseudoRandomSend) {
  const int kN = 100;
  weft::run(
      [&] {
        for (int cap : {0, kN}) {
          Chan<int> c(cap);
          auto r = weft::spawn([&] {
            std::vector<int> l(kN);
            for (int i = 0; i < kN; ++i) {
              weft::this_fiber::yield();
              l[i] = *c.recv();
            }
            return l;
          });
          for (int i = 0; i < kN; ++i) select(case_send(c, 1), case_send(c, 0));
          const auto l = r.join();
          const int n1 = static_cast<int>(std::count(l.begin(), l.end(), 1));
          const int n0 = kN - n1;
          EXPECT_GT(n0, kN / 10) << "want pseudorandom, got " << n0 << " zeros and " << n1
                                 << " ones (chan cap " << cap << ")";
          EXPECT_GT(n1, kN / 10) << "want pseudorandom, got " << n0 << " zeros and " << n1
                                 << " ones (chan cap " << cap << ")";
        }
      },
      opts());
}

// The same with the receiver always arriving after the select parked: a peer that completes a
// parked select must not always pick its lowest-index case on that channel.
TEST_P(SelectTest, ParkedSelectWithDuplicateCasesIsFairToLatePeers) {
  const int kN = 1000;
  weft::run(
      [&] {
        Chan<int> c;
        Chan<int> parked_signal(1);
        auto r = weft::spawn([&] {
          int ones = 0;
          for (int i = 0; i < kN; ++i) {
            (void)parked_signal.recv();
            weft::this_fiber::sleep_for(20us);  // let the select park first
            if (*c.recv() == 1) ++ones;
          }
          return ones;
        });
        for (int i = 0; i < kN; ++i) {
          parked_signal.send(0);
          select(case_send(c, 1), case_send(c, 0));
        }
        const int ones = r.join();
        expect_uniform({ones, kN - ones}, "parked duplicate send cases");

        // And receive cases: which of two parked cases on one channel a late sender completes.
        auto s = weft::spawn([&] {
          for (int i = 0; i < kN; ++i) {
            (void)parked_signal.recv();
            weft::this_fiber::sleep_for(20us);
            c.send(i);
          }
        });
        std::vector<int> counts(2, 0);
        for (int i = 0; i < kN; ++i) {
          parked_signal.send(0);
          ++counts[select(case_recv(c), case_recv(c))];
        }
        s.join();
        expect_uniform(counts, "parked duplicate receive cases");
      },
      opts());
}

// ---- Go's runtime tests
// --------------------------------------------------------------------------

// TestSelectDuplicateChannel: a fiber queued twice on one channel dequeues itself cleanly.
TEST_P(SelectTest, GoSelectDuplicateChannel) {
  weft::run(
      [] {
        for (int round = 0; round < 10; ++round) {
          Chan<int> c, d, e;
          weft::go([c, d, e] {  // A
            select(case_recv(c), case_recv(c), case_recv(d));
            e.send(9);
          });
          weft::this_fiber::sleep_for(1ms);  // A queues first on c (twice)
          auto b = weft::spawn([c] { return c.recv(); });
          weft::this_fiber::sleep_for(1ms);  // B queues on c behind A
          d.send(7);                         // wakes A, which dequeues itself from c
          EXPECT_EQ(e.recv(), 9);
          c.send(8);  // must reach B, not A's stale entries
          EXPECT_EQ(b.join(), 8);
        }
      },
      opts());
}

// A select with a send and a receive case on one unbuffered channel parks with a waiter in both
// of its queues (Go's select3.go: "select should not get confused if it sees itself"); the next
// operation on the channel pairs with one of them.
// (Regression: Debug builds once asserted that one of the two queues is always empty, and
// aborted on this legal program.)
TEST_P(SelectTest, SelectWithSendAndReceiveOnOneChannelMeetsAPeer) {
  weft::run(
      [] {
        for (int round = 0; round < 20; ++round) {
          Chan<int> c;
          auto t = weft::spawn([c] {
            std::optional<int> got;
            const std::size_t i =
                select(case_send(c, 1), case_recv(c, [&](std::optional<int> v) { got = v; }));
            return i == 0 ? -1 : got.value_or(-2);
          });
          weft::this_fiber::sleep_for(1ms);  // let it park with both waiters queued
          if (round % 2) {
            EXPECT_EQ(c.recv(), 1);  // pairs with the send case
            EXPECT_EQ(t.join(), -1);
          } else {
            c.send(2);  // pairs with the receive case
            EXPECT_EQ(t.join(), 2);
          }
          EXPECT_FALSE(c.try_recv().has_value()) << "a losing waiter was left queued";
          EXPECT_FALSE(c.try_send(3)) << "a losing waiter was left queued";
        }
      },
      opts());
}

// TestSelfSelect: sends and receives on one channel in one select never pair with themselves.
// (Regression: aborted in Debug builds, see SelectWithSendAndReceiveOnOneChannelMeetsAPeer.)
TEST_P(SelectTest, GoSelfSelect) {
  const int kIters = static_cast<int>(scaled(1000));
  weft::run(
      [&] {
        for (int cap : {0, 10}) {
          Chan<int> c(cap);
          std::atomic<int> self_receive{0};
          std::vector<weft::Task<void>> ts;
          for (int p = 0; p < 2; ++p) {
            ts.push_back(weft::spawn([&, p] {
              auto got = [&](std::optional<int> v) {
                if (cap == 0 && v == p) ++self_receive;
              };
              for (int i = 0; i < kIters; ++i) {
                if (p == 0 || i % 2 == 0) {
                  select(case_send(c, p), case_recv(c, got));
                } else {
                  select(case_recv(c, got), case_send(c, p));
                }
              }
            }));
          }
          for (auto& t : ts) t.join();
          EXPECT_EQ(self_receive.load(), 0) << "cap " << cap;
        }
      },
      opts());
}

// TestNonblockSelectRace: a non-blocking select over two channels, one of which is certainly
// ready, must not take the default.
TEST_P(SelectTest, GoNonblockSelectRace) {
  const int kN = static_cast<int>(scaled(3000, 40));
  weft::run(
      [&] {
        int failures = 0;
        for (int i = 0; i < kN; ++i) {
          Chan<int> c1(1), c2(1);
          Chan<bool> done(1);
          c1.send(1);
          weft::go([c1, c2, done] {
            bool ok = true;
            select(case_recv(c1), case_recv(c2), case_default([&] { ok = false; }));
            done.send(ok);
          });
          c2.send(1);
          select(case_recv(c1), case_default());
          if (!*done.recv()) ++failures;
        }
        EXPECT_EQ(failures, 0) << "no chan is ready";
      },
      opts());
}

// TestNonblockSelectRace2: the same with close.
TEST_P(SelectTest, GoNonblockSelectRace2) {
  const int kN = static_cast<int>(scaled(3000, 40));
  weft::run(
      [&] {
        int failures = 0;
        for (int i = 0; i < kN; ++i) {
          Chan<int> c1(1), c2;
          Chan<bool> done(1);
          c1.send(1);
          weft::go([c1, c2, done] {
            bool ok = true;
            select(case_recv(c1), case_recv(c2), case_default([&] { ok = false; }));
            done.send(ok);
          });
          c2.close();
          select(case_recv(c1), case_default());
          if (!*done.recv()) ++failures;
        }
        EXPECT_EQ(failures, 0) << "no chan is ready";
      },
      opts());
}

// TestSelectStress, with tagged values so that each is checked to arrive exactly once, and
// timeouts in the selects.
TEST_P(SelectTest, GoSelectStressEveryValueExactlyOnce) {
  const int N = static_cast<int>(scaled(30000, 20));
  weft::run(
      [&] {
        std::array<Chan<std::int64_t>, 4> c = {Chan<std::int64_t>(0), Chan<std::int64_t>(0),
                                               Chan<std::int64_t>(2), Chan<std::int64_t>(3)};
        // value = sender * N + i; senders 0-3 plain (one per channel), 4-7 the select sender
        // (4 + k for channel k).
        std::vector<std::atomic<int>> seen(8 * N);
        std::atomic<int> wrong_channel{0}, timeouts{0};
        weft::WaitGroup wg;
        auto record = [&](int k, std::int64_t v) {
          const std::int64_t sender = v / N;
          if (sender % 4 != k) ++wrong_channel;
          ++seen[v];
        };
        for (int k = 0; k < 4; ++k) {
          wg.add(2);
          weft::go([&, k] {
            for (int i = 0; i < N; ++i) c[k].send(static_cast<std::int64_t>(k) * N + i);
            wg.done();
          });
          weft::go([&, k] {
            for (int i = 0; i < N; ++i) record(k, *c[k].recv());
            wg.done();
          });
        }
        wg.add(2);
        weft::go([&] {  // one select sending N values on each channel
          std::array<int, 4> n{};
          auto c1 = c;
          for (int done = 0; done < 4;) {
            auto sent = [&](int k) {
              return [&, k] {
                if (++n[k] == N) {
                  c1[k] = nullptr;
                  ++done;
                }
              };
            };
            const std::size_t i =
                select(case_send(c1[3], static_cast<std::int64_t>(7) * N + n[3], sent(3)),
                       case_send(c1[2], static_cast<std::int64_t>(6) * N + n[2], sent(2)),
                       case_timeout(500us, [&] { ++timeouts; }),
                       case_send(c1[0], static_cast<std::int64_t>(4) * N + n[0], sent(0)),
                       case_send(c1[1], static_cast<std::int64_t>(5) * N + n[1], sent(1)));
            (void)i;
          }
          wg.done();
        });
        weft::go([&] {  // one select receiving N values from each channel
          std::array<int, 4> n{};
          auto c1 = c;
          for (int done = 0; done < 4;) {
            auto got = [&](int k) {
              return [&, k](std::optional<std::int64_t> v) {
                record(k, *v);
                if (++n[k] == N) {
                  c1[k] = nullptr;
                  ++done;
                }
              };
            };
            select(case_recv(c1[0], got(0)), case_recv(c1[1], got(1)),
                   case_timeout(500us, [&] { ++timeouts; }), case_recv(c1[2], got(2)),
                   case_recv(c1[3], got(3)));
          }
          wg.done();
        });
        wg.wait();
        int missing = 0, dup = 0;
        for (auto& s : seen) {
          if (s.load() == 0) ++missing;
          if (s.load() > 1) ++dup;
        }
        EXPECT_EQ(missing, 0);
        EXPECT_EQ(dup, 0);
        EXPECT_EQ(wrong_channel.load(), 0);
        for (auto& ch : c) EXPECT_EQ(ch.size(), 0u);
      },
      opts());
}

// Many fibers selecting over many channels, sends and receives mixed in each select, with
// timeouts: every value is received exactly once.
TEST_P(SelectTest, ManyFibersManyChannelsStress) {
  const int kChans = 6, kSenders = 6, kReceivers = 6;
  const int kPerSender = static_cast<int>(scaled(3000, 20));
  weft::run(
      [&] {
        std::vector<Chan<std::unique_ptr<int>>> ch;
        for (int i = 0; i < kChans; ++i) ch.emplace_back(i % 3);  // caps 0, 1, 2
        std::vector<std::atomic<int>> seen(kSenders * kPerSender);
        std::atomic<int> receivers_left{kReceivers};
        weft::WaitGroup senders_wg, receivers_wg;
        for (int s = 0; s < kSenders; ++s) {
          senders_wg.add(1);
          weft::go([&, s] {
            std::uint32_t rng = 12345u + static_cast<std::uint32_t>(s);
            auto next = [&] {
              rng = rng * 1664525u + 1013904223u;
              return rng >> 8;
            };
            for (int i = 0; i < kPerSender;) {
              const int v = s * kPerSender + i;
              const std::size_t ai = next() % kChans, bi = next() % kChans;
              std::size_t ri = next() % kChans;
              const auto& a = ch[ai];
              const auto& b = ch[bi];
              const auto& r = ch[ri];
              // Two send cases (maybe one channel twice), a receive (takes a value someone else
              // sent and puts it back out) and a timeout.
              std::optional<std::unique_ptr<int>> taken;
              const std::size_t k = select(
                  case_send(a, std::make_unique<int>(v)), case_send(b, std::make_unique<int>(v)),
                  case_recv(r,
                            [&](std::optional<std::unique_ptr<int>> x) { taken = std::move(x); }),
                  case_timeout(std::chrono::microseconds(200 + next() % 300)));
              if (k <= 1) ++i;
              if (taken && *taken) {
                // Forward it: a blocking send to a random channel.
                ch[next() % kChans].send(std::move(*taken));
              }
            }
            senders_wg.done();
          });
        }
        for (int r = 0; r < kReceivers; ++r) {
          receivers_wg.add(1);
          weft::go([&, r] {
            std::uint32_t rng = 777u + static_cast<std::uint32_t>(r);
            bool stop = false;
            while (!stop) {
              rng = rng * 1664525u + 1013904223u;
              const auto& a = ch[(rng >> 8) % kChans];
              const auto& b = ch[(rng >> 16) % kChans];
              auto take = [&](std::optional<std::unique_ptr<int>> x) {
                if (x) {
                  ++seen[**x];
                } else {
                  stop = true;  // closed: the senders are done
                }
              };
              select(case_recv(a, take), case_recv(b, take), case_timeout(1ms));
            }
            receivers_wg.done();
          });
        }
        senders_wg.wait();
        for (auto& c : ch) c.close();
        receivers_wg.wait();
        // Receivers stop at the first closed channel they see; what is left is still buffered.
        for (auto& c : ch) {
          while (auto x = c.try_recv()) ++seen[**x];
        }
        int missing = 0, dup = 0;
        for (auto& s : seen) {
          if (s.load() == 0) ++missing;
          if (s.load() > 1) ++dup;
        }
        EXPECT_EQ(missing, 0);
        EXPECT_EQ(dup, 0);
      },
      opts());
}

// doubleselect.go: a sender selects over four channels, four muxes forward to one channel, a
// receiver checks that no value arrives twice.
TEST_P(SelectTest, GoDoubleSelect) {
  const int kN = static_cast<int>(scaled(20000, 20));
  weft::run(
      [&] {
        Chan<int> c1, c2, c3, c4, cmux;
        Chan<bool> done;
        weft::go([=] {
          for (int i = 0; i < kN; ++i) {
            select(case_send(c1, i), case_send(c2, i), case_send(c3, i), case_send(c4, i));
          }
          c1.close();
          c2.close();
          c3.close();
          c4.close();
        });
        for (const auto& in : {c1, c2, c3, c4}) {
          weft::go([in, cmux, done] {
            for (int v : in) cmux.send(v);
            done.send(true);
          });
        }
        weft::go([=] {
          for (int i = 0; i < 4; ++i) (void)done.recv();
          cmux.close();
        });
        std::vector<int> seen(kN, 0);
        int dup = 0;
        for (int v : cmux) {
          if (seen[v]++) ++dup;
        }
        EXPECT_EQ(dup, 0);
        EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), kN);
      },
      opts());
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
