// Proves Chan<T> with Go's test/chan/*.go and runtime/chan_test.go as the reference, under workers
// = 1, 2, 4 and 8: Go's TestChan (blocking, non-blocking, close unblocking receivers, FIFO,
// len/cap), fifo.go (AsynchFifo, SynchFifo) and FIFO per sender with many senders, nonblock.go (try
// ops meet parked peers), TestNonblockRecvRace (also against close), TestMultiConsumer,
// TestChanSendInterface, sending from deep stacks (TestShrinkStackDuringBlockingSend /
// TestNoShrinkStackWhileParking-like), sieve1.go, a sieve over buffered channels, goroutines.go (a
// chain of fibers), zerosize.go. Those Go tests are Copyright 2009 The Go Authors, BSD-3-Clause
// (LICENSES/BSD-3-Clause-Go.txt, NOTICE).
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
}  // namespace
