// Proves Chan<T>'s API of docs/api.md. Without a runtime: unbuffered/buffered/nil construction,
// negative and impossible capacity, size/capacity, equality and operator bool, a copy keeping the
// channel alive, move-only and non-default-constructible T, over-aligned and zero-size T, ring
// wrap-around, try_send / try_recv on full, empty and peerless channels (a failed try_send(T&&)
// leaves its argument untouched), close semantics (drain first, then nullopt; send/try_send/close
// on closed throw ChannelClosed; close of nil is a std::logic_error), range-for, and plain threads
// talking over channels with no runtime at all. Under workers = 1, 2, 4 and 8: plain threads
// feeding fibers (and being fed) while run() runs, also as their last act before main returns, and
// closing channels under parked fibers; the SendChan / RecvChan direction views (one shared
// channel, try ops, equality, nil, in select).
// A large buffered channel's ring is allocated as it fills: construction costs no ring, FIFO
// order, non-trivial and over-aligned values survive growth from a wrapped ring, and values left
// in a grown ring are destroyed with the channel.
// Split from chan_test.cpp, with chan_go_test.cpp (Go's test ports) and chan_close_test.cpp (close,
// exactly-once delivery, shutdown).
#include <malloc.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
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
// A value type without a default constructor.
struct NoDefault {
  explicit NoDefault(int x) noexcept : v(x) {}
  int v;
};
static_assert(!std::is_default_constructible_v<NoDefault>);

struct alignas(64) Aligned {
  std::uint64_t v;
};
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

// Bytes malloc has handed out and not taken back (0 under ASan, whose allocator keeps its own
// books: the comparisons below then hold trivially, and ASan checks the rest).
std::size_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;  // small chunks and mmap-ed ones
}

TEST(ChanApi, LargeBufferedChannelGrowsItsRingOnDemand) {
  constexpr std::size_t kCap = 100'000;  // an eager ring: 100k std::strings, 3.2 MB
  const std::size_t before = heap_in_use();
  Chan<std::string> ch(kCap);
  EXPECT_LT(heap_in_use() - before, 4096u) << "the channel allocated its ring up front";
  for (int i = 0; i < 3; ++i) ch.send(std::to_string(i));
  EXPECT_LT(heap_in_use() - before, 4096u) << "three values grew the ring past its first size";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ch.recv(), std::to_string(i));
  // Filling it grows the ring to the full capacity, and no further: one more does not fit.
  for (std::size_t i = 0; i < kCap; ++i) ASSERT_TRUE(ch.try_send(std::to_string(i)));
  EXPECT_FALSE(ch.try_send(std::string("over")));
  EXPECT_EQ(ch.size(), kCap);
  for (std::size_t i = 0; i < kCap; ++i) ASSERT_EQ(ch.recv(), std::to_string(i));
  EXPECT_EQ(ch.try_recv(), std::nullopt);
}

// Growth while the ring has wrapped (the oldest value is not in slot 0), against a model, with
// values that own memory and check where they are built.
TEST(ChanApi, RingGrowthFromAWrappedRingKeepsOrder) {
  struct alignas(64) Big {
    std::unique_ptr<std::string> s;
    explicit Big(std::string v) : s(std::make_unique<std::string>(std::move(v))) { check(); }
    Big(Big&& o) noexcept : s(std::move(o.s)) { check(); }
    Big& operator=(Big&&) = default;
    void check() const {
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(this) % 64, 0u) << "a misaligned slot";
    }
  };
  Chan<Big> ch(1000);
  std::deque<std::string> model;
  int next = 0;
  // Send 3, receive 2, over and over: recvx moves through the ring as it grows.
  while (model.size() < 1000) {
    for (int i = 0; i < 3 && model.size() < 1000; ++i) {
      const std::string v = "v" + std::to_string(next++);
      ASSERT_TRUE(ch.try_send(Big(v)));
      model.push_back(v);
    }
    for (int i = 0; i < 2 && model.size() < 1000; ++i) {
      std::optional<Big> got = ch.try_recv();
      ASSERT_TRUE(got.has_value());
      ASSERT_EQ(*got->s, model.front());
      model.pop_front();
    }
  }
  EXPECT_FALSE(ch.try_send(Big("over")));
  for (int i = 0; i < 500; ++i) {
    std::optional<Big> got = ch.try_recv();
    ASSERT_TRUE(got.has_value());
    ASSERT_EQ(*got->s, model.front());
    model.pop_front();
  }
  // The other 500 are destroyed with the channel (ASan reports them if not).
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
