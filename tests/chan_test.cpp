// Proves Chan<T> of docs/api.md, with Go's test/chan/*.go and runtime/chan_test.go as the reference
// for semantics. Without a runtime: the API (unbuffered/buffered/nil construction, negative
// capacity, size/capacity, equality and operator bool, a copy keeping the channel alive, move-only
// and non-default-constructible T, over-aligned and zero-size T, ring wrap-around), try_send /
// try_recv on full, empty and peerless channels (a failed try_send(T&&) leaves its argument
// untouched), close semantics (drain first, then nullopt; send/try_send/close on closed throw
// ChannelClosed; close of nil is a std::logic_error), range-for, and plain threads talking over
// channels with no runtime at all. Under workers = 1, 2, 4 and 8: Go's TestChan (blocking,
// non-blocking, close unblocking receivers, FIFO, len/cap), FIFO per sender with many senders,
// Go's fifo.go (AsynchFifo, SynchFifo), close waking parked receivers (nullopt) and parked senders
// (ChannelClosed, value not delivered), nonblock.go (try ops meet parked peers),
// TestNonblockRecvRace, TestMultiConsumer, TestChanSendInterface, sending from deep stacks
// (TestShrinkStackDuringBlockingSend / TestNoShrinkStackWhileParking-like), sieve1.go, a sieve
// over buffered channels, goroutines.go (a chain of fibers), zerosize.go, exactly-once delivery
// of unique_ptr and instance-counted values (also under close and at shutdown), shutdown
// unwinding fibers parked on channels (and leaving the channels consistent), and plain threads
// feeding fibers (and being fed) while run() runs, also as their last act before main returns.
#include "weft/chan.hpp"

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
#include "weft/weft.hpp"

namespace {

using namespace weft_test;
using weft::Chan;

class ChanTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(ChanTest);

// A value type without a default constructor.
struct NoDefault {
  explicit NoDefault(int x) noexcept : v(x) {}
  int v;
};
static_assert(!std::is_default_constructible_v<NoDefault>);

struct alignas(64) Aligned {
  std::uint64_t v;
};

struct Empty {};

// ---- API, no runtime
// -----------------------------------------------------------------------------

TEST(ChanApi, ConstructionCapacityAndSize) {
  Chan<int> unbuffered;
  EXPECT_TRUE(unbuffered);
  EXPECT_EQ(unbuffered.capacity(), 0u);
  EXPECT_EQ(unbuffered.size(), 0u);

  Chan<int> zero(0);  // not ambiguous with nullptr: unbuffered
  EXPECT_TRUE(zero);
  EXPECT_EQ(zero.capacity(), 0u);
  EXPECT_FALSE(zero.try_send(1)) << "an unbuffered channel with no receiver must not take a value";

  Chan<int> buffered(3);
  EXPECT_EQ(buffered.capacity(), 3u);
  EXPECT_EQ(buffered.size(), 0u);
  EXPECT_TRUE(buffered.try_send(1));
  EXPECT_TRUE(buffered.try_send(2));
  EXPECT_EQ(buffered.size(), 2u);
  EXPECT_TRUE(buffered.try_send(3));
  EXPECT_EQ(buffered.size(), 3u);
  EXPECT_FALSE(buffered.try_send(4));
  EXPECT_EQ(buffered.size(), 3u);
  EXPECT_EQ(buffered.try_recv(), 1);
  EXPECT_EQ(buffered.size(), 2u);
  EXPECT_EQ(buffered.capacity(), 3u);

  // Other integral types for the capacity.
  EXPECT_EQ(Chan<int>(std::size_t{5}).capacity(), 5u);
  EXPECT_EQ(Chan<int>(7u).capacity(), 7u);
  EXPECT_EQ(Chan<int>(static_cast<short>(2)).capacity(), 2u);
  EXPECT_EQ(Chan<int>(9L).capacity(), 9u);
}

TEST(ChanApi, NegativeCapacityThrowsInvalidArgument) {
  EXPECT_THROW(Chan<int>(-1), std::invalid_argument);
  EXPECT_THROW(Chan<int>(-1000L), std::invalid_argument);
  EXPECT_THROW(Chan<std::string>(static_cast<signed char>(-3)), std::invalid_argument);
}

TEST(ChanApi, ImpossibleCapacityThrowsBadAlloc) {
  EXPECT_THROW(Chan<int>(std::numeric_limits<std::size_t>::max()), std::bad_alloc);
  EXPECT_THROW(Chan<Empty>(std::numeric_limits<std::size_t>::max()), std::bad_alloc);
  EXPECT_THROW(Chan<std::string>(std::numeric_limits<std::size_t>::max() / 16), std::bad_alloc);
}

TEST(ChanApi, EqualityAndBool) {
  Chan<int> a(1);
  Chan<int> b(1);
  Chan<int> a2 = a;
  EXPECT_TRUE(a == a2);
  EXPECT_FALSE(a != a2);
  EXPECT_FALSE(a == b);
  EXPECT_TRUE(a != b);

  Chan<int> nil1 = nullptr;
  Chan<int> nil2(nullptr);
  EXPECT_FALSE(nil1);
  EXPECT_TRUE(nil1 == nil2);
  EXPECT_TRUE(nil1 == nullptr);
  EXPECT_FALSE(a == nullptr);
  EXPECT_FALSE(a == nil1);

  // A copy shares the channel: what goes in one comes out of the other.
  ASSERT_TRUE(a.try_send(5));
  EXPECT_EQ(a2.size(), 1u);
  EXPECT_EQ(a2.try_recv(), 5);

  // Assigning nullptr makes a handle nil without touching the channel.
  a2 = nullptr;
  EXPECT_FALSE(a2);
  EXPECT_TRUE(a);
  ASSERT_TRUE(a.try_send(6));
  EXPECT_EQ(a.try_recv(), 6);

  // Moving leaves the source nil.
  Chan<int> moved = std::move(a);
  EXPECT_TRUE(moved);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): the contract of a moved-from handle
  a = moved;
  EXPECT_TRUE(a == moved);
  a = std::move(a);  // self-move keeps it
  EXPECT_TRUE(a == moved);
}

TEST(ChanApi, HandleCopyKeepsTheChannelAlive) {
  Tracked::reset();
  {
    Chan<Tracked> keep = nullptr;
    {
      Chan<Tracked> original(4);
      ASSERT_TRUE(original.try_send(Tracked(1)));
      ASSERT_TRUE(original.try_send(Tracked(2)));
      keep = original;
    }  // the original handle is gone; the channel and its buffered values are not
    EXPECT_EQ(keep.size(), 2u);
    EXPECT_EQ(Tracked::live.load(), 2);
    auto v = keep.try_recv();
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->id, 1);
  }  // the last handle goes: the value still buffered is destroyed with the channel
  EXPECT_EQ(Tracked::live.load(), 0) << "buffered values leaked or were destroyed twice";
  EXPECT_EQ(Tracked::double_destroyed.load(), 0);
}

TEST(ChanApi, MoveOnlyValuesAndFailedTrySendLeavesTheValue) {
  Chan<std::unique_ptr<int>> ch(1);
  auto p = std::make_unique<int>(7);
  int* raw = p.get();
  EXPECT_TRUE(ch.try_send(std::move(p)));
  EXPECT_EQ(p, nullptr) << "a successful try_send moves the value in";

  auto q = std::make_unique<int>(8);
  EXPECT_FALSE(ch.try_send(std::move(q)));  // full
  ASSERT_NE(q, nullptr) << "a try_send that would block must leave its argument untouched";
  EXPECT_EQ(*q, 8);

  auto got = ch.try_recv();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->get(), raw);
  EXPECT_EQ(**got, 7);

  Chan<std::unique_ptr<int>> unbuffered;
  EXPECT_FALSE(unbuffered.try_send(std::move(q)));  // no receiver
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(*q, 8);

  Chan<std::unique_ptr<int>> nil = nullptr;
  EXPECT_FALSE(nil.try_send(std::move(q)));
  ASSERT_NE(q, nullptr);

  // try_send on a closed channel throws; the value stays with the caller (chan_core.hpp: kClosed
  // leaves the send slot untouched).
  ch.close();
  EXPECT_THROW(ch.try_send(std::move(q)), weft::ChannelClosed);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(*q, 8);
}

TEST(ChanApi, TrySendConstRefCopies) {
  Chan<std::string> ch(2);
  const std::string s(100, 'x');  // not SSO
  EXPECT_TRUE(ch.try_send(s));
  EXPECT_EQ(s, std::string(100, 'x'));
  EXPECT_EQ(ch.try_recv(), s);
  std::string m = "kept";
  EXPECT_TRUE(ch.try_send(m));  // lvalue: copied
  EXPECT_EQ(m, "kept");
}

TEST(ChanApi, NotDefaultConstructibleAndOverAlignedValues) {
  Chan<NoDefault> ch(2);
  ASSERT_TRUE(ch.try_send(NoDefault(4)));
  ASSERT_TRUE(ch.try_send(NoDefault(5)));
  auto a = ch.try_recv();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->v, 4);
  ch.close();
  EXPECT_EQ(ch.recv()->v, 5);
  EXPECT_FALSE(ch.recv().has_value());

  Chan<Aligned> al(5);
  for (std::uint64_t i = 0; i < 20; ++i) {
    ASSERT_TRUE(al.try_send(Aligned{i * 3}));
    auto v = al.try_recv();
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->v, i * 3);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(&*v) % 64, 0u);
  }
}

TEST(ChanApi, ZeroSizeElements) {
  // Go's zerosize.go: channels of empty values work like any other.
  Chan<Empty> big(1 << 16);
  for (int i = 0; i < (1 << 16); ++i) ASSERT_TRUE(big.try_send(Empty{}));
  EXPECT_FALSE(big.try_send(Empty{}));
  EXPECT_EQ(big.size(), std::size_t{1} << 16);
  int n = 0;
  big.close();
  for (Empty e : big) {
    (void)e;
    ++n;
  }
  EXPECT_EQ(n, 1 << 16);

  Chan<std::monostate> mono(1);
  EXPECT_TRUE(mono.try_send(std::monostate{}));
  EXPECT_TRUE(mono.try_recv().has_value());
  EXPECT_FALSE(mono.try_recv().has_value());
}

TEST(ChanApi, RingWrapsAroundInFifoOrder) {
  // Interleaved sends and receives walk the ring round many times; a non-trivial T (heap strings)
  // checks that slots are moved into and destroyed correctly.
  Tracked::reset();
  {
    Chan<std::string> ch(3);
    Chan<Tracked> tr(3);
    int next_send = 0, next_recv = 0;
    auto take_one = [&] {
      auto s = ch.try_recv();
      ASSERT_TRUE(s.has_value());
      EXPECT_EQ(*s, std::string(40, 'a') + std::to_string(next_recv));
      auto t = tr.try_recv();
      ASSERT_TRUE(t.has_value());
      EXPECT_EQ(t->id, next_recv);
      ++next_recv;
    };
    for (int round = 0; round < 200; ++round) {
      const int burst = 1 + round % 3;
      while (ch.size() + burst > 3) take_one();
      for (int i = 0; i < burst; ++i) {
        ASSERT_TRUE(ch.try_send(std::string(40, 'a') + std::to_string(next_send)));
        ASSERT_TRUE(tr.try_send(Tracked(next_send)));
        ++next_send;
      }
      if (round % 2) take_one();
    }
    while (ch.size() > 0) take_one();
    EXPECT_FALSE(tr.try_recv().has_value());
    EXPECT_EQ(next_send, next_recv);
  }
  EXPECT_EQ(Tracked::live.load(), 0);
  EXPECT_EQ(Tracked::double_destroyed.load(), 0);
}

TEST(ChanApi, NonBlockingOpsOnEmptyFullAndNil) {
  Chan<int> unbuffered;
  EXPECT_FALSE(unbuffered.try_send(1));
  EXPECT_FALSE(unbuffered.try_recv().has_value());

  Chan<int> buffered(1);
  EXPECT_FALSE(buffered.try_recv().has_value());  // empty
  EXPECT_TRUE(buffered.try_send(1));
  EXPECT_FALSE(buffered.try_send(2));  // full
  EXPECT_EQ(buffered.try_recv(), 1);
  EXPECT_FALSE(buffered.try_recv().has_value());

  Chan<int> nil = nullptr;
  EXPECT_FALSE(nil.try_send(1));
  EXPECT_FALSE(nil.try_recv().has_value());
  EXPECT_EQ(nil.size(), 0u);
  EXPECT_EQ(nil.capacity(), 0u);
}

TEST(ChanApi, CloseSemantics) {
  Chan<int> ch(3);
  ASSERT_TRUE(ch.try_send(1));
  ASSERT_TRUE(ch.try_send(2));
  ch.close();
  EXPECT_EQ(ch.size(), 2u) << "close must keep buffered values";
  EXPECT_THROW(ch.send(3), weft::ChannelClosed);
  EXPECT_THROW(ch.try_send(3), weft::ChannelClosed);
  EXPECT_THROW(ch.close(), weft::ChannelClosed) << "closing twice";
  // Receiving drains the buffer first, in order, then reports closed, never blocking.
  EXPECT_EQ(ch.recv(), 1);
  EXPECT_EQ(ch.try_recv(), 2);
  EXPECT_EQ(ch.size(), 0u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(ch.recv().has_value());
    EXPECT_FALSE(ch.try_recv().has_value());
  }
  EXPECT_THROW(ch.close(), weft::ChannelClosed);

  Chan<int> unbuffered;
  unbuffered.close();
  EXPECT_FALSE(unbuffered.recv().has_value());
  EXPECT_THROW(unbuffered.send(1), weft::ChannelClosed);

  // ChannelClosed is a std::logic_error (Go's panic).
  static_assert(std::is_base_of_v<std::logic_error, weft::ChannelClosed>);

  // Closing nil is a std::logic_error, and not the "closed twice" one.
  Chan<int> nil = nullptr;
  try {
    nil.close();
    ADD_FAILURE() << "close of a nil channel did not throw";
  } catch (const weft::ChannelClosed& e) {
    ADD_FAILURE() << "close of nil threw ChannelClosed: " << e.what();
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("nil"), std::string::npos) << e.what();
  }
}

TEST(ChanApi, RangeForStopsAtClose) {
  Chan<std::unique_ptr<int>> ch(5);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(ch.try_send(std::make_unique<int>(i)));
  ch.close();
  std::vector<int> got;
  for (auto& p : ch) got.push_back(*p);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4}));
  // A second loop over the closed, drained channel does not run at all.
  int more = 0;
  for (auto& p : ch) {
    (void)p;
    ++more;
  }
  EXPECT_EQ(more, 0);
}

// ---- plain threads, no runtime
// -------------------------------------------------------------------

TEST(ChanThreads, BlockingSendRecvBetweenPlainThreadsWithoutARuntime) {
  const int kN = static_cast<int>(scaled(20000));
  for (int cap : {0, 1, 16}) {
    Chan<int> ch(cap);
    Chan<int> ack;  // unbuffered, the other way
    std::thread producer([&] {
      for (int i = 0; i < kN; ++i) ch.send(i);
      ch.close();
      // And receive on an unbuffered channel from the other thread.
      EXPECT_EQ(ack.recv(), 42);
    });
    std::int64_t sum = 0;
    int expect = 0;
    for (int v : ch) {
      EXPECT_EQ(v, expect) << "FIFO broken at cap " << cap;
      expect = v + 1;
      sum += v;
    }
    ack.send(42);
    producer.join();
    EXPECT_EQ(expect, kN);
    EXPECT_EQ(sum, static_cast<std::int64_t>(kN) * (kN - 1) / 2);
  }
}

TEST(ChanThreads, CloseWakesPlainThreadsWithoutARuntime) {
  Chan<int> ch;  // unbuffered
  std::atomic<int> receivers_done{0}, senders_threw{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; ++i) {
    ts.emplace_back([&] {
      if (!ch.recv().has_value()) ++receivers_done;
    });
  }
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(receivers_done.load(), 0) << "a receive on an empty channel returned";
  ch.close();
  for (auto& t : ts) t.join();
  EXPECT_EQ(receivers_done.load(), 3);

  Chan<int> full(1);
  ASSERT_TRUE(full.try_send(0));
  ts.clear();
  for (int i = 0; i < 3; ++i) {
    ts.emplace_back([&, i] {
      try {
        full.send(i + 1);
      } catch (const weft::ChannelClosed&) {
        ++senders_threw;
      }
    });
  }
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(senders_threw.load(), 0);
  full.close();
  for (auto& t : ts) t.join();
  EXPECT_EQ(senders_threw.load(), 3);
  EXPECT_EQ(full.recv(), 0);
  EXPECT_FALSE(full.recv().has_value()) << "a value of a sender that threw was delivered";
}

// ---- Go's TestChan
// -------------------------------------------------------------------------------

TEST_P(ChanTest, GoTestChan) {
  weft::run(
      [] {
        for (int cap : {0, 1, 2, 3, 10}) {
          FailureContext note("cap " + std::to_string(cap));
          {
            // Receive from an empty channel blocks; non-blocking receive does not.
            Chan<int> c(cap);
            std::atomic<bool> recv1{false}, recv2{false};
            auto t1 = weft::spawn([&] {
              (void)c.recv();
              recv1 = true;
            });
            auto t2 = weft::spawn([&] {
              for (int v : c) {
                (void)v;
                break;
              }
              recv2 = true;
            });
            weft::this_fiber::sleep_for(5ms);
            EXPECT_FALSE(recv1.load() || recv2.load()) << "receive from empty chan";
            EXPECT_FALSE(c.try_recv().has_value());
            c.send(0);
            c.send(0);
            t1.join();
            t2.join();
            EXPECT_TRUE(recv1.load() && recv2.load());
          }
          {
            // Send to a full channel blocks; non-blocking send does not.
            Chan<int> c(cap);
            for (int i = 0; i < cap; ++i) c.send(i);
            std::atomic<bool> sent{false};
            auto t = weft::spawn([&] {
              c.send(0);
              sent = true;
            });
            weft::this_fiber::sleep_for(5ms);
            EXPECT_FALSE(sent.load()) << "send to full chan";
            EXPECT_FALSE(c.try_send(0)) << "send to full chan";
            EXPECT_TRUE(c.recv().has_value());
            t.join();
            EXPECT_TRUE(sent.load());
          }
          {
            // Receive from a closed channel: the buffer first, then nullopt.
            Chan<int> c(cap);
            for (int i = 0; i < cap; ++i) c.send(i);
            c.close();
            for (int i = 0; i < cap; ++i) EXPECT_EQ(c.recv(), i);
            EXPECT_EQ(c.recv(), std::nullopt);
            EXPECT_EQ(c.try_recv(), std::nullopt);
          }
          {
            // Close unblocks a receive.
            Chan<int> c(cap);
            auto t = weft::spawn([&] { return c.recv(); });
            weft::this_fiber::sleep_for(2ms);
            c.close();
            EXPECT_EQ(t.join(), std::nullopt);
          }
          {
            // 100 integers arrive uncorrupted in FIFO order.
            Chan<int> c(cap);
            auto t = weft::spawn([&] {
              for (int i = 0; i < 100; ++i) c.send(i);
            });
            for (int i = 0; i < 100; ++i) EXPECT_EQ(c.recv(), i);
            t.join();
          }
          {
            // 4 senders x 1000 integers, 4 receivers: everything sent arrives once.
            const int P = 4, L = static_cast<int>(scaled(1000));
            Chan<int> c(cap);
            std::vector<weft::Task<void>> senders;
            std::vector<weft::Task<std::map<int, int>>> receivers;
            for (int p = 0; p < P; ++p) {
              senders.push_back(weft::spawn([&] {
                for (int i = 0; i < L; ++i) c.send(i);
              }));
              receivers.push_back(weft::spawn([&] {
                std::map<int, int> m;
                for (int i = 0; i < L; ++i) ++m[*c.recv()];
                return m;
              }));
            }
            std::map<int, int> all;
            for (auto& r : receivers) {
              for (auto [k, v] : r.join()) all[k] += v;
            }
            for (auto& s : senders) s.join();
            EXPECT_EQ(all.size(), static_cast<std::size_t>(L));
            for (auto [k, v] : all) EXPECT_EQ(v, P) << "value " << k;
          }
          {
            // len / cap.
            Chan<int> c(cap);
            EXPECT_EQ(c.size(), 0u);
            EXPECT_EQ(c.capacity(), static_cast<std::size_t>(cap));
            for (int i = 0; i < cap; ++i) c.send(i);
            EXPECT_EQ(c.size(), static_cast<std::size_t>(cap));
            EXPECT_EQ(c.capacity(), static_cast<std::size_t>(cap));
          }
        }
      },
      opts());
}

// ---- FIFO
// ----------------------------------------------------------------------------------------

TEST_P(ChanTest, GoAsynchAndSynchFifo) {
  const int kN = 10;
  weft::run(
      [&] {
        // AsynchFifo: a buffered channel gives values back in order.
        Chan<int> ch(kN);
        for (int i = 0; i < kN; ++i) ch.send(i);
        for (int i = 0; i < kN; ++i) EXPECT_EQ(ch.recv(), i);

        // SynchFifo: a daisy chain of fibers, each reading the next value of an unbuffered
        // channel once the previous one has.
        Chan<int> values;
        Chan<int> start;
        Chan<int> in = start;
        std::atomic<int> bad{0};
        for (int i = 0; i < kN; ++i) {
          Chan<int> out;
          weft::go([values, in, out, i, &bad] {
            (void)in.recv();
            if (values.recv() != i) ++bad;
            out.send(1);
          });
          in = out;
        }
        start.send(0);
        for (int i = 0; i < kN; ++i) values.send(i);
        EXPECT_EQ(in.recv(), 1);
        EXPECT_EQ(bad.load(), 0);
      },
      opts());
}

TEST_P(ChanTest, FifoPerSenderWithManySendersAndReceivers) {
  const int kSenders = 4, kReceivers = 3;
  const int kPerSender = static_cast<int>(scaled(4000));
  weft::run(
      [&] {
        for (int cap : {0, 1, 7}) {
          FailureContext note("cap " + std::to_string(cap));
          Chan<std::pair<int, int>> ch(cap);  // (sender, seq)
          std::vector<weft::Task<void>> senders;
          for (int s = 0; s < kSenders; ++s) {
            senders.push_back(weft::spawn([&, s] {
              for (int i = 0; i < kPerSender; ++i) {
                ch.send({s, i});
                if (i % 97 == 0) weft::this_fiber::yield();
              }
            }));
          }
          std::vector<weft::Task<std::vector<int>>> receivers;
          for (int r = 0; r < kReceivers; ++r) {
            receivers.push_back(weft::spawn([&] {
              std::vector<int> last(kSenders, -1), count(kSenders, 0);
              for (auto [s, i] : ch) {
                EXPECT_GT(i, last[s]) << "values of sender " << s << " overtook each other";
                last[s] = i;
                ++count[s];
              }
              return count;
            }));
          }
          for (auto& s : senders) s.join();
          ch.close();
          std::vector<int> total(kSenders, 0);
          for (auto& r : receivers) {
            auto c = r.join();
            for (int s = 0; s < kSenders; ++s) total[s] += c[s];
          }
          for (int s = 0; s < kSenders; ++s) EXPECT_EQ(total[s], kPerSender) << "sender " << s;
        }
      },
      opts());
}

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

// ---- nonblock.go: non-blocking ops meet parked peers --------------------------------------------

TEST_P(ChanTest, GoNonblockTryOpsMeetParkedPeers) {
  weft::run(
      [&] {
        for (int cap : {0, 1, 8}) {
          FailureContext note("cap " + std::to_string(cap));
          Chan<int> ch(cap);
          // A parked receiver makes try_send succeed (unbuffered) or the buffer takes it.
          auto r = weft::spawn([&] { return ch.recv(); });
          const bool sent = eventually([&] { return ch.try_send(42); });
          EXPECT_TRUE(sent) << "try_send never met the parked receiver";
          EXPECT_EQ(r.join(), 42);

          // A parked sender makes try_recv succeed.
          for (int i = 0; i < cap; ++i) ch.send(i);  // fill the buffer first
          auto s = weft::spawn([&] { ch.send(7); });
          auto try_recv_eventually = [&] {
            std::optional<int> v;
            eventually([&] { return (v = ch.try_recv()).has_value(); });
            return v;
          };
          for (int i = 0; i < cap; ++i) EXPECT_EQ(try_recv_eventually(), i);
          EXPECT_EQ(try_recv_eventually(), 7) << "try_recv never met the parked sender";
          s.join();
          EXPECT_FALSE(ch.try_recv().has_value());
        }
      },
      opts());
}

// Go's TestNonblockRecvRace: a non-blocking receive racing with close of a channel that holds a
// value must see either the value or the close, never "not ready".
TEST_P(ChanTest, GoNonblockRecvRace) {
  const int kN = static_cast<int>(scaled(2000, 40));
  weft::run(
      [&] {
        std::atomic<int> not_ready{0};
        for (int i = 0; i < kN; ++i) {
          Chan<int> c(1);
          c.send(1);
          weft::WaitGroup wg;
          wg.add(1);
          weft::go([&, c] {
            bool ready = false;
            weft::select(weft::case_recv(c, [&] { ready = true; }), weft::case_default());
            if (!ready) ++not_ready;
            wg.done();
          });
          c.close();
          (void)c.recv();
          wg.wait();
        }
        EXPECT_EQ(not_ready.load(), 0) << "a non-blocking receive found a closed channel not ready";
      },
      opts());
}

// Same race with try_recv, which has a lock-free fast path for an empty buffered channel.
TEST_P(ChanTest, NonblockTryRecvRaceWithClose) {
  const int kN = static_cast<int>(scaled(2000, 40));
  weft::run(
      [&] {
        std::atomic<int> wrong{0};
        for (int i = 0; i < kN; ++i) {
          Chan<int> c(1);
          c.send(1);
          weft::WaitGroup wg;
          wg.add(1);
          weft::go([&, c] {
            // Either the value (still buffered) or closed-and-drained: try_recv cannot tell the
            // latter from "would block", so probe again with a blocking recv, which must not park.
            auto v = c.try_recv();
            if (!v.has_value() && c.recv().has_value()) ++wrong;
            wg.done();
          });
          c.close();
          (void)c.recv();
          wg.wait();
        }
        EXPECT_EQ(wrong.load(), 0);
      },
      opts());
}

// ---- Go's TestMultiConsumer
// ----------------------------------------------------------------------

TEST_P(ChanTest, GoMultiConsumer) {
  const int kWorkers = 23;
  const int kIters = static_cast<int>(scaled(27183));
  const int pn[] = {2, 3, 7, 11, 13, 17, 19, 23, 27, 31};
  weft::run(
      [&] {
        Chan<int> q(kWorkers * 3);
        Chan<int> r(kWorkers * 3);
        weft::WaitGroup wg;
        for (int w = 0; w < kWorkers; ++w) {
          wg.add(1);
          weft::go([&, w] {
            for (int v : q) {
              if (pn[w % 10] == v) weft::this_fiber::yield();  // mess with range's fifo-ness
              r.send(v);
            }
            wg.done();
          });
        }
        std::int64_t expect = 0;
        weft::go([&] {
          for (int i = 0; i < kIters; ++i) {
            const int v = pn[i % 10];
            expect += v;
            q.send(v);
          }
          q.close();
          wg.wait();
          r.close();
        });
        std::int64_t n = 0, s = 0;
        for (int v : r) {
          ++n;
          s += v;
        }
        EXPECT_EQ(n, kIters);
        EXPECT_EQ(s, expect);
      },
      opts());
}

// ---- Go's TestChanSendInterface: polymorphic values --------------------------------------------

struct Shape {
  virtual ~Shape() = default;
  virtual int sides() const = 0;
};
struct Triangle : Shape {
  int sides() const override { return 3; }
};
struct Square : Shape {
  int sides() const override { return 4; }
};

TEST_P(ChanTest, GoChanSendInterface) {
  weft::run(
      [] {
        Chan<std::unique_ptr<Shape>> c(1);
        c.send(std::make_unique<Triangle>());
        EXPECT_EQ(c.recv().value()->sides(), 3);
        weft::select(weft::case_send(c, std::make_unique<Square>()), weft::case_default());
        EXPECT_EQ(c.recv().value()->sides(), 4);
        Chan<std::shared_ptr<const Shape>> sc(2);
        auto sq = std::make_shared<const Square>();
        sc.send(sq);
        EXPECT_TRUE(sc.try_send(std::make_shared<Triangle>()));
        EXPECT_EQ(sc.recv().value().get(), sq.get());
        EXPECT_EQ(sc.recv().value()->sides(), 3);
        EXPECT_EQ(sq.use_count(), 1) << "the channel kept a copy";
      },
      opts());
}

// ---- values living on parked stacks (TestShrinkStackDuringBlockingSend, -WhileParking) ----------

using Block = std::array<std::uint64_t, 24>;
Block make_block(std::uint64_t seed) {
  Block b;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = seed * 1000003u + i * 7919u;
  return b;
}

// Sends from `depth` frames down, so the value sits deep in a parked stack.
WEFT_TEST_OPAQUE void send_deep(const Chan<Block>& ch, int depth, std::uint64_t seed) {
  volatile char pad[512];
  pad[depth % 512] = static_cast<char>(depth);
  if (depth > 0) {
    send_deep(ch, depth - 1, seed);
  } else {
    ch.send(make_block(seed));
  }
  (void)pad[depth % 512];
}

WEFT_TEST_OPAQUE std::optional<Block> recv_deep(const Chan<Block>& ch, int depth) {
  volatile char pad[512];
  pad[depth % 512] = static_cast<char>(depth);
  std::optional<Block> v = depth > 0 ? recv_deep(ch, depth - 1) : ch.recv();
  (void)pad[depth % 512];
  return v;
}

TEST_P(ChanTest, ValuesOnDeepParkedStacksArriveIntact) {
  const int kN = static_cast<int>(scaled(3000));
  weft::run(
      [&] {
        for (int cap : {0, 2}) {
          Chan<Block> ch(cap);
          auto sender = weft::spawn([&] {
            for (int i = 0; i < kN; ++i) send_deep(ch, i % 30, static_cast<std::uint64_t>(i));
          });
          int bad = 0;
          for (int i = 0; i < kN; ++i) {
            auto b = recv_deep(ch, (i * 7) % 30);
            if (!b || *b != make_block(static_cast<std::uint64_t>(i))) ++bad;
          }
          sender.join();
          EXPECT_EQ(bad, 0) << "values corrupted while their sender or receiver was parked";
        }
      },
      opts());
}

// ---- Go's sieve1.go and a buffered variant
// -------------------------------------------------------

std::vector<int> first_primes(int n) {
  std::vector<int> out;
  for (int c = 2; static_cast<int>(out.size()) < n; ++c) {
    bool prime = true;
    for (int p : out) {
      if (p * p > c) break;
      if (c % p == 0) {
        prime = false;
        break;
      }
    }
    if (prime) out.push_back(c);
  }
  return out;
}

std::vector<int> sieve(int n, int cap) {
  Chan<int> ch(cap);
  weft::go([ch] {
    for (int i = 2;; ++i) ch.send(i);  // unwound at shutdown, like Go's leaked goroutines
  });
  std::vector<int> primes;
  for (int k = 0; k < n; ++k) {
    const int prime = *ch.recv();
    primes.push_back(prime);
    Chan<int> out(cap);
    weft::go([in = ch, out, prime] {
      for (;;) {
        const int i = *in.recv();
        if (i % prime != 0) out.send(i);
      }
    });
    ch = out;
  }
  return primes;
}

TEST_P(ChanTest, GoSieve1) {
  const int kPrimes = static_cast<int>(scaled(100, 4));
  const auto primes = weft::run([&] { return sieve(kPrimes, 0); }, opts());
  EXPECT_EQ(primes, first_primes(kPrimes));
}

TEST_P(ChanTest, SieveOverBufferedChannels) {
  const int kPrimes = static_cast<int>(scaled(100, 4));
  const auto primes = weft::run([&] { return sieve(kPrimes, 5); }, opts());
  EXPECT_EQ(primes, first_primes(kPrimes));
}

// ---- Go's goroutines.go: a long chain of fibers
// --------------------------------------------------

TEST_P(ChanTest, GoGoroutinesChain) {
  const int kFibers = static_cast<int>(scaled(2000, 20));
  const int v = weft::run(
      [&] {
        Chan<int> leftmost;
        Chan<int> left = leftmost;
        Chan<int> right = leftmost;
        for (int i = 0; i < kFibers; ++i) {
          right = Chan<int>();
          weft::go([left, right] { left.send(*right.recv() + 1); });
          left = right;
        }
        weft::go([right] { right.send(1); });
        return *leftmost.recv();
      },
      opts());
  EXPECT_EQ(v, kFibers + 1);
}

TEST_P(ChanTest, GoZerosize) {
  weft::run(
      [] {
        Chan<Empty> unbuffered;
        Chan<Empty> buffered(2);
        auto t = weft::spawn([&] {
          for (int i = 0; i < 100; ++i) unbuffered.send(Empty{});
          buffered.send(Empty{});
        });
        for (int i = 0; i < 100; ++i) EXPECT_TRUE(unbuffered.recv().has_value());
        EXPECT_TRUE(buffered.recv().has_value());
        t.join();
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

// ---- plain threads while run() runs
// --------------------------------------------------------------

TEST_P(ChanTest, PlainThreadsFeedFibers) {
  // Plain threads send to fibers, fibers forward to a plain thread that sums, and that thread
  // sends the total back to a fiber. Fibers never block their worker on a thread: they wait with
  // WaitGroup / channels, and join the threads through blocking().
  const int kThreads = 2;
  const int kPerThread = static_cast<int>(scaled(5000));
  for (int cap : {0, 4}) {
    Chan<int> in(cap);
    Chan<int> out(cap);
    Chan<std::int64_t> result;
    const std::int64_t sum = weft::run(
        [&] {
          weft::WaitGroup fed;
          fed.add(kThreads);
          std::vector<std::thread> threads;
          for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
              for (int i = 0; i < kPerThread; ++i) in.send(t * kPerThread + i);
              fed.done();
            });
          }
          threads.emplace_back([&] {
            std::int64_t s = 0;
            for (int v : out) s += v;
            result.send(s);
          });
          weft::WaitGroup forwarded;
          for (int f = 0; f < 3; ++f) {
            forwarded.add(1);
            weft::go([&] {
              for (int v : in) out.send(v);
              forwarded.done();
            });
          }
          fed.wait();
          in.close();
          forwarded.wait();
          out.close();
          const std::int64_t total = *result.recv();
          weft::blocking([&] {
            for (auto& t : threads) t.join();
          });
          return total;
        },
        opts());
    const std::int64_t n = static_cast<std::int64_t>(kThreads) * kPerThread;
    EXPECT_EQ(sum, n * (n - 1) / 2) << "cap " << cap;
  }
}

TEST_P(ChanTest, PlainThreadReceivesFromFibersAndFiberReceivesFromThread) {
  const int kN = static_cast<int>(scaled(5000));
  Chan<int> to_thread;    // unbuffered: fibers -> thread
  Chan<int> to_fiber(2);  // buffered: thread -> fibers
  std::vector<int> got;
  std::thread consumer([&] {
    for (int v : to_thread) {
      got.push_back(v);
      to_fiber.send(v * 2);
    }
    to_fiber.close();
  });
  weft::run(
      [&] {
        auto producer = weft::spawn([&] {
          for (int i = 0; i < kN; ++i) to_thread.send(i);
          to_thread.close();
        });
        int expect = 0;
        for (int v : to_fiber) {
          EXPECT_EQ(v, expect * 2);
          ++expect;
        }
        EXPECT_EQ(expect, kN);
        producer.join();
      },
      opts());
  consumer.join();
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kN));
  for (int i = 0; i < kN; ++i) ASSERT_EQ(got[i], i);
}

// A plain thread's last act is a channel operation that wakes main, which returns at once: run()
// then tears the runtime down while that thread may still be inside Waker::wake(). It must not
// touch the runtime after making the fiber runnable (TSan reports the race with the runtime's
// destruction: Runtime::wake_idle_worker, called by submit_ready from Waker::wake, reads
// nspinning_ / polling_ of a Runtime that run_runtime is deleting). The window is narrow: TSan
// reports it now and then, here or in PlainThreadReceivesFromFibersAndFiberReceivesFromThread.
TEST_P(ChanTest, PlainThreadWakingMainAsItsLastActIsSafe) {
  const int kRounds = static_cast<int>(scaled(150, 5));
  for (int round = 0; round < kRounds; ++round) {
    Chan<int> ch;
    std::thread t;
    const bool got = weft::run(
        [&] {
          t = std::thread([&] {
            if (round % 2) {
              ch.close();
            } else {
              ch.send(1);
            }
          });
          (void)ch.recv();
          return true;
        },
        opts());
    t.join();
    ASSERT_TRUE(got);
  }
}

TEST_P(ChanTest, PlainThreadCloseWakesParkedFibers) {
  weft::run(
      [&] {
        Chan<int> ch;
        std::atomic<int> parked{0};
        std::vector<weft::Task<bool>> rs;
        for (int i = 0; i < 4; ++i) {
          rs.push_back(weft::spawn([&] {
            ++parked;
            return ch.recv().has_value();
          }));
        }
        std::vector<weft::Task<bool>> ss;
        Chan<int> full(1);
        full.send(0);
        for (int i = 0; i < 4; ++i) {
          ss.push_back(weft::spawn([&] {
            ++parked;
            try {
              full.send(1);
              return false;
            } catch (const weft::ChannelClosed&) {
              return true;
            }
          }));
        }
        EXPECT_TRUE(eventually([&] { return parked.load() == 8; }));
        weft::this_fiber::sleep_for(2ms);
        std::thread closer([&] {
          ch.close();
          full.close();
        });
        for (auto& r : rs) EXPECT_FALSE(r.join());
        for (auto& s : ss) EXPECT_TRUE(s.join());
        closer.join();
      },
      opts());
}

// ---- SendChan / RecvChan: Go's `chan<- T` and `<-chan T`.

template <class C>
concept CanSend = requires(const C& c, int v) {
  c.send(v);
};
template <class C>
concept CanRecv = requires(const C& c) {
  c.recv();
};
template <class C>
concept CanClose = requires(const C& c) {
  c.close();
};
static_assert(CanSend<weft::SendChan<int>> && !CanRecv<weft::SendChan<int>> &&
              CanClose<weft::SendChan<int>>);
static_assert(CanRecv<weft::RecvChan<int>> && !CanSend<weft::RecvChan<int>> &&
              !CanClose<weft::RecvChan<int>>);
static_assert(std::is_convertible_v<Chan<int>, weft::SendChan<int>> &&
              std::is_convertible_v<Chan<int>, weft::RecvChan<int>>);
static_assert(!std::is_convertible_v<weft::SendChan<int>, weft::RecvChan<int>> &&
              !std::is_convertible_v<weft::RecvChan<int>, Chan<int>>);

void produce(weft::SendChan<std::unique_ptr<int>> out, int n) {
  for (int i = 0; i < n; ++i) out.send(std::make_unique<int>(i));
  out.close();
}

TEST_P(ChanTest, DirectionViewsShareTheChannel) {
  weft::run(
      [] {
        for (int cap : {0, 4}) {
          Chan<std::unique_ptr<int>> ch(cap);
          weft::RecvChan<std::unique_ptr<int>> in = ch;
          weft::SendChan<std::unique_ptr<int>> out = ch;
          EXPECT_TRUE(static_cast<bool>(in));
          EXPECT_EQ(in.capacity(), static_cast<std::size_t>(cap));
          EXPECT_EQ(out.capacity(), static_cast<std::size_t>(cap));
          weft::go(produce, out, 50);
          int expect = 0;
          for (auto& v : in) EXPECT_EQ(*v, expect++);  // range-for over a view
          EXPECT_EQ(expect, 50);
          EXPECT_FALSE(in.recv().has_value()) << "closed through the SendChan";
          EXPECT_FALSE(ch.try_recv().has_value());
          EXPECT_THROW(out.send(std::make_unique<int>(1)), weft::ChannelClosed);
        }
      },
      opts());
}

TEST_P(ChanTest, DirectionViewsTryOpsEqualityAndNil) {
  weft::run(
      [] {
        Chan<int> ch(1);
        weft::SendChan<int> out = ch;
        weft::RecvChan<int> in = ch;
        EXPECT_FALSE(in.try_recv().has_value());
        EXPECT_TRUE(out.try_send(7));
        EXPECT_EQ(out.size(), 1u);
        EXPECT_EQ(in.size(), 1u);
        const int eight = 8;
        EXPECT_FALSE(out.try_send(eight)) << "full";
        EXPECT_EQ(in.try_recv(), 7);
        EXPECT_TRUE(out == weft::SendChan<int>(ch));
        EXPECT_FALSE(in == weft::RecvChan<int>(Chan<int>(1)));
        weft::SendChan<int> nil_out;
        weft::RecvChan<int> nil_in = nullptr;
        EXPECT_FALSE(static_cast<bool>(nil_out));
        EXPECT_TRUE(nil_in == nullptr);
        EXPECT_FALSE(nil_out.try_send(1)) << "a nil channel is never ready";
        EXPECT_FALSE(nil_in.try_recv().has_value());
      },
      opts());
}

TEST_P(ChanTest, DirectionViewsWorkInSelect) {
  weft::run(
      [] {
        Chan<int> a, b(1);
        weft::RecvChan<int> in = a;
        weft::SendChan<int> out = b;
        weft::go([a] { a.send(5); });
        int got = 0;
        EXPECT_EQ(weft::select(weft::case_recv(in, [&](std::optional<int> v) { got = *v; }),
                               weft::case_timeout(std::chrono::seconds(5))),
                  0u);
        EXPECT_EQ(got, 5);
        EXPECT_EQ(weft::select(weft::case_send(out, 6), weft::case_default()), 0u);
        EXPECT_EQ(b.recv(), 6);
        weft::RecvChan<int> nil_in;
        EXPECT_EQ(weft::select(weft::case_recv(nil_in), weft::case_default()), 1u)
            << "a nil view's case must never fire";
      },
      opts());
}

}  // namespace
