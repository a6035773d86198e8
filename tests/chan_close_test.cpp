// Proves Chan<T>'s close, delivery and shutdown guarantees, under workers = 1, 2, 4 and 8: close
// waking parked receivers (nullopt) and parked senders (ChannelClosed, value not delivered),
// range-for stopping at close across fibers; exactly-once delivery of unique_ptr and
// instance-counted values (also under close, through selects, and to a receiver unwound at
// shutdown); shutdown unwinding fibers parked on channels and leaving the channels consistent.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <variant>
#include <vector>

#include "chan_test_util.hpp"
#include "test_util.hpp"
#include "weft/chan.hpp"
#include "weft/weft.hpp"
namespace {

using namespace weft_test;
using weft::Chan;

class ChanTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(ChanTest);
// ---- close
// ---------------------------------------------------------------------------------------

TEST_P(ChanTest, CloseWakesParkedReceiversWithNullopt) {
  weft::run(
      [&] {
        for (int cap : {0, 4}) {
          Chan<std::unique_ptr<int>> ch(cap);
          std::atomic<int> parked{0};
          std::vector<weft::Task<bool>> rs;
          for (int i = 0; i < 6; ++i) {
            rs.push_back(weft::spawn([&] {
              ++parked;
              return ch.recv().has_value();
            }));
          }
          EXPECT_TRUE(eventually([&] { return parked.load() == 6; }));
          weft::this_fiber::sleep_for(3ms);
          ch.close();
          for (auto& r : rs) EXPECT_FALSE(r.join()) << "a parked receiver got a value";
        }
      },
      opts());
}

TEST_P(ChanTest, CloseMakesParkedSendersThrowAndDropsTheirValues) {
  Tracked::reset();
  weft::run(
      [&] {
        for (int cap : {0, 2}) {
          FailureContext note("cap " + std::to_string(cap));
          Chan<Tracked> ch(cap);
          for (int i = 0; i < cap; ++i) ch.send(Tracked(100 + i));
          std::atomic<int> parked{0};
          std::vector<weft::Task<int>> ss;  // 1: threw ChannelClosed, 0: returned
          for (int i = 0; i < 5; ++i) {
            ss.push_back(weft::spawn([&, i] {
              ++parked;
              try {
                ch.send(Tracked(i));
                return 0;
              } catch (const weft::ChannelClosed&) {
                return 1;
              }
            }));
          }
          EXPECT_TRUE(eventually([&] { return parked.load() == 5; }));
          weft::this_fiber::sleep_for(3ms);
          EXPECT_EQ(ch.size(), static_cast<std::size_t>(cap));
          ch.close();
          for (auto& s : ss) EXPECT_EQ(s.join(), 1) << "a parked sender did not throw";
          // What was buffered before close still comes out; the parked senders' values do not.
          for (int i = 0; i < cap; ++i) {
            auto v = ch.recv();
            ASSERT_TRUE(v.has_value());
            EXPECT_EQ(v->id, 100 + i);
          }
          EXPECT_FALSE(ch.recv().has_value());
          EXPECT_THROW(ch.close(), weft::ChannelClosed);
        }
      },
      opts());
  EXPECT_EQ(Tracked::live.load(), 0);
  EXPECT_EQ(Tracked::double_destroyed.load(), 0);
}

TEST_P(ChanTest, RangeForStopsAtCloseAcrossFibers) {
  const int kN = static_cast<int>(scaled(5000));
  weft::run(
      [&] {
        for (int cap : {0, 3}) {
          Chan<int> ch(cap);
          weft::go([ch, kN] {
            for (int i = 0; i < kN; ++i) ch.send(i);
            ch.close();
          });
          int expect = 0;
          for (int v : ch) EXPECT_EQ(v, expect++);
          EXPECT_EQ(expect, kN);
        }
      },
      opts());
}
// ---- exactly once: unique_ptr and instance-counted values ---------------------------------------

TEST_P(ChanTest, NoValueDeliveredTwiceUniquePtr) {
  const int kSenders = 6, kReceivers = 6;
  const int kPerSender = static_cast<int>(scaled(3000));
  weft::run(
      [&] {
        for (int cap : {0, 1, 5}) {
          Chan<std::unique_ptr<int>> ch(cap);
          std::vector<std::atomic<int>> seen(kSenders * kPerSender);
          std::vector<weft::Task<void>> ts;
          for (int s = 0; s < kSenders; ++s) {
            ts.push_back(weft::spawn([&, s] {
              for (int i = 0; i < kPerSender; ++i) {
                auto p = std::make_unique<int>(s * kPerSender + i);
                if (i % 3 == 0) {
                  while (!ch.try_send(std::move(p))) {
                    ASSERT_NE(p, nullptr);
                    weft::this_fiber::yield();
                  }
                } else {
                  ch.send(std::move(p));
                }
              }
            }));
          }
          weft::WaitGroup wg;
          for (int r = 0; r < kReceivers; ++r) {
            wg.add(1);
            weft::go([&, r] {
              if (r % 2) {
                for (auto& p : ch) ++seen[*p];
              } else {
                for (;;) {
                  auto p = ch.try_recv();
                  if (p) {
                    ++seen[**p];
                  } else if (auto q = ch.recv()) {
                    ++seen[**q];
                  } else {
                    break;
                  }
                }
              }
              wg.done();
            });
          }
          for (auto& t : ts) t.join();
          ch.close();
          wg.wait();
          int missing = 0, dup = 0;
          for (auto& s : seen) {
            if (s.load() == 0) ++missing;
            if (s.load() > 1) ++dup;
          }
          EXPECT_EQ(missing, 0) << "cap " << cap;
          EXPECT_EQ(dup, 0) << "cap " << cap;
        }
      },
      opts());
}

TEST_P(ChanTest, InstanceCountedValuesNeitherLeakNorDieTwice) {
  // Values pass through channels that are closed in the middle of traffic, and some fibers are
  // still parked with values (in send, in a buffer, in a select's send case) when main returns:
  // every instance is destroyed exactly once, and none is delivered twice.
  const int kRounds = static_cast<int>(scaled(40, 10));
  Tracked::reset();
  std::atomic<int> dup{0};
  for (int round = 0; round < kRounds; ++round) {
    weft::run(
        [&] {
          Chan<Tracked> a(round % 3);
          Chan<Tracked> b;
          auto seen = std::make_shared<std::vector<std::atomic<int>>>(4 * 200);
          for (int s = 0; s < 4; ++s) {
            weft::go([a, b, s] {
              for (int i = 0; i < 200; ++i) {
                try {
                  if (i % 2) {
                    a.send(Tracked(s * 200 + i));
                  } else {
                    weft::select(weft::case_send(a, Tracked(s * 200 + i)),
                                 weft::case_send(b, Tracked(s * 200 + i)));
                  }
                } catch (const weft::ChannelClosed&) {
                }
              }
            });
          }
          for (int r = 0; r < 2; ++r) {
            weft::go([a, b, seen, &dup] {
              for (int i = 0; i < 150; ++i) {
                std::optional<Tracked> v;
                weft::select(
                    weft::case_recv(a, [&](std::optional<Tracked> x) { v = std::move(x); }),
                    weft::case_recv(b, [&](std::optional<Tracked> x) { v = std::move(x); }));
                if (v && (*seen)[v->id].fetch_add(1) != 0) ++dup;
              }
            });
          }
          weft::this_fiber::sleep_for(std::chrono::microseconds(200 * (round % 5)));
          if (round % 2) a.close();
          // Return with fibers parked in send, recv and select, and values in a's buffer.
        },
        opts());
    ASSERT_EQ(Tracked::live.load(), 0)
        << "round " << round << ": values leaked (or destroyed twice)";
  }
  EXPECT_EQ(Tracked::double_destroyed.load(), 0);
  EXPECT_EQ(dup.load(), 0);
}

// A value handed to a parked receiver that is unwound before it runs must be destroyed once.
TEST_P(ChanTest, ValueHandedToAReceiverUnwoundAtShutdownIsDestroyedOnce) {
  const int kRounds = static_cast<int>(scaled(40, 10));
  Tracked::reset();
  for (int round = 0; round < kRounds; ++round) {
    weft::run(
        [&] {
          Chan<Tracked> ch;
          std::atomic<int> parked{0};
          for (int i = 0; i < 8; ++i) {
            weft::go([ch, &parked] {
              ++parked;
              (void)ch.recv();
              weft::Semaphore(0).acquire();  // park again: only shutdown ends this fiber
            });
          }
          eventually([&] { return parked.load() == 8; });
          weft::this_fiber::sleep_for(100us);
          // Wake them with values and return at once: most are unwound before they run.
          for (int i = 0; i < 8; ++i) {
            if (!ch.try_send(Tracked(i))) break;
          }
        },
        opts());
    ASSERT_EQ(Tracked::live.load(), 0) << "round " << round;
  }
  EXPECT_EQ(Tracked::double_destroyed.load(), 0);
}

// ---- shutdown
// ------------------------------------------------------------------------------------

TEST_P(ChanTest, FibersParkedOnChannelsAreUnwoundAndChannelsStayConsistent) {
  Chan<int> unbuffered_recv;  // a fiber parks receiving
  Chan<int> unbuffered_send;  // a fiber parks sending
  Chan<int> full(1);          // a fiber parks sending to a full buffer
  ASSERT_TRUE(full.try_send(1));
  Chan<int> nil = nullptr;
  std::atomic<int> unwound{0}, parked{0}, returned{0};
  const int kFibers = 5;
  const auto t0 = Clock::now();
  weft::run(
      [&] {
        auto body = [&](auto f) {
          weft::go([&, f] {
            Unwound u{&unwound};
            ++parked;
            f();
            ++returned;
          });
        };
        body([&] { (void)unbuffered_recv.recv(); });
        body([&] { unbuffered_send.send(2); });
        body([&] { full.send(3); });
        body([&] { (void)nil.recv(); });
        body([&] { nil.send(4); });
        EXPECT_TRUE(eventually([&] { return parked.load() == kFibers; }));
        weft::this_fiber::sleep_for(5ms);
      },
      opts());
  EXPECT_EQ(unwound.load(), kFibers);
  EXPECT_EQ(returned.load(), 0);
  EXPECT_LT(ms_since(t0), 5000.0);
  // No stale waiter is left behind: a try op on each channel sees nobody on the other side.
  EXPECT_FALSE(unbuffered_recv.try_send(9)) << "a send met an unwound receiver";
  EXPECT_FALSE(unbuffered_send.try_recv().has_value()) << "a receive met an unwound sender";
  EXPECT_EQ(full.size(), 1u);
  EXPECT_EQ(full.try_recv(), 1);
  EXPECT_FALSE(full.try_recv().has_value()) << "an unwound sender's value got into the buffer";
  // And they still work.
  std::thread t([&] { unbuffered_recv.send(10); });
  EXPECT_EQ(unbuffered_recv.recv(), 10);
  t.join();
  full.close();
  unbuffered_send.close();
}
}  // namespace
