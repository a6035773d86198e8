// Proves weft::select with Go's runtime/chan_test.go and doubleselect.go as the reference, under
// workers = 1, 2, 4 and 8: TestSelectDuplicateChannel, a send and a receive on one channel meeting
// a peer, TestSelfSelect, TestNonblockSelectRace(2), TestSelectStress (with timeouts, every value
// received exactly once), many fibers over many channels, doubleselect.go. Those Go tests are
// Copyright 2009 The Go Authors, BSD-3-Clause (LICENSES/BSD-3-Clause-Go.txt, NOTICE).
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
}  // namespace
