// The io_uring netpoller backend: its selection (Options::netpoll, $WEFT_NETPOLL, stats()), and
// the guarantees of a queued recv that the backend-neutral net suites (which CTest also runs
// under WEFT_NETPOLL=io_uring) cannot see: a cancelled recv never writes into the caller's
// buffer after read() returned, and no byte is lost or delivered twice when deadlines race
// completions; close, request_stop and shutdown end a queued recv; a tiny ring (full submission
// queue, completion overflow) completes every recv; a reader on a queued recv is never hibernated.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <random>
#include <vector>

#include "net_test_util.hpp"

namespace {

using namespace weft_net_test;

weft::Options uring_opts(unsigned workers) {
  weft::Options o = with_workers(workers, /*watchdog=*/false);
  o.netpoll = weft::NetPoll::kIoUring;
  return o;
}

// Sets an environment variable for one scope and restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

constexpr unsigned char kCanary = 0xff;  // never in the byte stream (values 0..250)

unsigned char stream_byte(std::uint64_t i) { return static_cast<unsigned char>(i % 251); }

TEST(NetPollBackend, StatsNameTheBackendThatRunsAndAReadParksOnItsRecv) {
  for (const weft::NetPoll b : {weft::NetPoll::kEpoll, weft::NetPoll::kIoUring}) {
    weft::Options o = with_workers(2);
    o.netpoll = b;
    const std::string name = weft::run(
        [] {
          TcpPair p = tcp_pair();
          auto reader = weft::spawn([&] {
            char buf[64];
            return must(p.server.read(buf, sizeof buf), "read");
          });
          EXPECT_TRUE(weft_test::eventually([&] { return parked_on_io({reader.id()}); }));
          must_ok(p.client.write_all("hello"), "write");
          EXPECT_EQ(reader.join(), 5u);
          return std::string(weft::stats().netpoll);
        },
        o);
    EXPECT_EQ(name, b == weft::NetPoll::kEpoll ? "epoll" : "io_uring");
  }
}

TEST(NetPollBackend, TheEnvironmentSelectsTheBackendAndNonsenseIsRefusedByName) {
  {
    ScopedEnv env("WEFT_NETPOLL", "epoll");
    EXPECT_EQ(std::string(weft::run([] {
                TcpPair p = tcp_pair();  // a net call, so the netpoller is the one asked for
                return weft::stats().netpoll;
              })),
              "epoll");
  }
  {
    ScopedEnv env("WEFT_NETPOLL", "io_uring");
    EXPECT_EQ(std::string(weft::run([] { return weft::stats().netpoll; })), "io_uring");
  }
  {
    ScopedEnv env("WEFT_NETPOLL", "kqueue");
    try {
      weft::run([] {});
      ADD_FAILURE() << "run() accepted WEFT_NETPOLL=kqueue";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("WEFT_NETPOLL"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("io_uring"), std::string::npos) << e.what();
    }
  }
  {
    // An explicit Options::netpoll wins over the environment.
    ScopedEnv env("WEFT_NETPOLL", "io_uring");
    weft::Options o;
    o.netpoll = weft::NetPoll::kEpoll;
    EXPECT_EQ(std::string(weft::run([] { return weft::stats().netpoll; }, o)), "epoll");
  }
}

class UringTest : public NetTest {};

// Each connection carries a counted byte stream, written in random pieces at random moments;
// its reader reads with random short deadlines into a canary-filled buffer. Whatever wins each
// race, the bytes read must continue the stream exactly, and the buffer past them must still
// hold the canary -- right after read() returned and again after the reader slept, so a recv
// cancelled too late (writing into a frame that moved on) is caught.
TEST_P(UringTest, DeadlinesRacingCompletionsNeverLoseBytesNorWriteLate) {
  constexpr int kConns = 24;
  static constexpr std::uint64_t kBytes = weft_test::kSanitized ? 12 << 10 : 48 << 10;
  std::atomic<int> deadlines{0};
  weft::run(
      [&] {
        weft::WaitGroup wg;
        for (int c = 0; c < kConns; ++c) {
          wg.add(2);
          auto pair = std::make_shared<TcpPair>(tcp_pair());
          weft::go([&wg, pair, c] {
            std::mt19937 rng(static_cast<unsigned>(c));
            std::uint64_t sent = 0;
            char piece[512];
            while (sent < kBytes) {
              const std::size_t n =
                  std::min<std::uint64_t>(1 + rng() % sizeof piece, kBytes - sent);
              for (std::size_t i = 0; i < n; ++i)
                piece[i] = static_cast<char>(stream_byte(sent + i));
              must_ok(pair->client.write_all(piece, n), "write");
              sent += n;
              if (rng() % 3 == 0)
                weft::this_fiber::sleep_for(std::chrono::microseconds(rng() % 300));
            }
            pair->client.close();
            wg.done();
          });
          weft::go([&wg, &deadlines, pair, c] {
            std::mt19937 rng(static_cast<unsigned>(1000 + c));
            std::uint64_t got = 0;
            for (;;) {
              unsigned char buf[1024];
              std::memset(buf, kCanary, sizeof buf);
              pair->server.set_read_deadline(in(std::chrono::microseconds(rng() % 400)));
              absl::StatusOr<std::size_t> r = pair->server.read(buf, sizeof buf);
              std::size_t n = 0;
              if (r.ok()) {
                n = *r;
              } else {
                ASSERT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
                deadlines.fetch_add(1, std::memory_order_relaxed);
              }
              for (std::size_t i = 0; i < n; ++i) {
                ASSERT_EQ(buf[i], stream_byte(got + i)) << "conn " << c << " byte " << got + i;
              }
              for (std::size_t i = n; i < sizeof buf; ++i) {
                ASSERT_EQ(buf[i], kCanary) << "conn " << c << ": a write past the " << n
                                           << " bytes read() returned, at " << i;
              }
              if (rng() % 4 == 0) {
                weft::this_fiber::sleep_for(std::chrono::microseconds(200));
                for (std::size_t i = n; i < sizeof buf; ++i) {
                  ASSERT_EQ(buf[i], kCanary) << "conn " << c << ": a late write at " << i;
                }
              }
              got += n;
              if (r.ok() && n == 0) break;  // end of stream
            }
            EXPECT_EQ(got, kBytes) << "conn " << c;
            wg.done();
          });
        }
        wg.wait();
      },
      uring_opts(workers()));
  std::printf("[ info ] %d reads ended by their deadline\n", deadlines.load());
}

// close() from another fiber ends a queued recv with "closed", and the buffer stays untouched
// by data the peer sends afterwards.
TEST_P(UringTest, CloseFromAnotherFiberEndsAQueuedRecv) {
  weft::run(
      [] {
        TcpPair p = tcp_pair();
        unsigned char buf[256];
        std::memset(buf, kCanary, sizeof buf);
        auto reader = weft::spawn([&] { return p.server.read(buf, sizeof buf).status(); });
        ASSERT_TRUE(weft_test::eventually([&] { return parked_on_io({reader.id()}); }));
        p.server.close();
        const absl::Status st = reader.join();
        EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
        EXPECT_TRUE(contains_ci(text(st), "closed")) << st;
        (void)p.client.write_all("late data");
        weft::this_fiber::sleep_for(5ms);
        for (unsigned char b : buf) ASSERT_EQ(b, kCanary);
      },
      uring_opts(workers()));
}

// request_stop() and a socket context's cancellation end a queued recv, and the stream still
// works afterwards (the cancelled recv took no data).
TEST_P(UringTest, StopAndContextCancellationEndAQueuedRecvAndLoseNoData) {
  weft::run(
      [] {
        TcpPair p = tcp_pair();
        auto reader = weft::spawn([&] {
          char buf[64];
          return p.server.read(buf, sizeof buf).status();
        });
        ASSERT_TRUE(weft_test::eventually([&] { return parked_on_io({reader.id()}); }));
        reader.request_stop();
        const absl::Status st = reader.join();
        EXPECT_TRUE(absl::IsCancelled(st)) << st;

        auto [ctx, cancel] = weft::with_cancel(weft::background());
        p.server.set_context(ctx);
        auto reader2 = weft::spawn([&] {
          char buf[64];
          return p.server.read(buf, sizeof buf).status();
        });
        ASSERT_TRUE(weft_test::eventually([&] { return parked_on_io({reader2.id()}); }));
        cancel();
        EXPECT_TRUE(absl::IsCancelled(reader2.join()));
        p.server.set_context(weft::Context());

        must_ok(p.client.write_all("after"), "write");
        EXPECT_EQ(must(read_exactly(p.server, 5), "read"), "after");
      },
      uring_opts(workers()));
}

// A ring of 4 submission entries (16 completion entries) under 200 connections doing round
// trips: the submission queue fills and completions overflow into the kernel's backlog; every
// recv still completes once, with its own data.
TEST_P(UringTest, ATinyRingStillCompletesEveryRecv) {
  ScopedEnv env("WEFT_URING_ENTRIES", "4");
  static constexpr int kConns = 200;
  static constexpr int kRounds = weft_test::kSanitized ? 5 : 20;
  weft::run(
      [] {
        net::TcpListener l = must(net::listen_tcp("127.0.0.1:0"), "listen");
        l.set_deadline(in(kIoBound));
        weft::go([&l] {
          for (int i = 0; i < kConns; ++i) {
            auto s = std::make_shared<net::TcpStream>(must(l.accept(), "accept"));
            weft::go([s] {
              s->set_deadline(in(kIoBound));
              char buf[256];
              for (;;) {
                const std::size_t n = must(s->read(buf, sizeof buf), "server read");
                if (n == 0) return;
                must_ok(s->write_all(buf, n), "server write");
              }
            });
          }
        });
        weft::WaitGroup wg;
        for (int c = 0; c < kConns; ++c) {
          wg.add(1);
          weft::go([&wg, &l, c] {
            net::TcpStream s = must(net::dial_tcp(l.local_addr(), kIoBound), "dial");
            s.set_deadline(in(kIoBound));
            for (int r = 0; r < kRounds; ++r) {
              const std::string msg = pattern(static_cast<std::uint64_t>(c), 64, 64u * r);
              must_ok(s.write_all(msg), "client write");
              EXPECT_EQ(must(read_exactly(s, msg.size()), "client read"), msg);
            }
            wg.done();
          });
        }
        wg.wait();
      },
      uring_opts(workers()));
}

// A reader parked on a queued recv is never hibernated, however long it waits: the kernel may
// copy into its stack buffer at any moment, as task work of the worker's next system call, and a
// fault there would wait for the hibernator (weft/detail/kernel_writes_stack.hpp). An idle fiber
// beside it, parked longer than hibernate_after in a channel receive, is hibernated (which shows
// hibernation works here); the reader then gets exactly the bytes sent.
TEST_P(UringTest, AReaderParkedOnAQueuedRecvKeepsItsStackAndGetsItsData) {
  weft::Options o = uring_opts(workers());
  o.hibernate_after = std::chrono::milliseconds(20);
  bool hibernated = false;
  weft::run(
      [&] {
        TcpPair p = tcp_pair();
        auto reader = weft::spawn([&] {
          char buf[3000];
          std::memset(buf, 0, sizeof buf);
          must_ok(p.server.read_full(std::as_writable_bytes(std::span(buf, sizeof buf))), "read");
          return std::string(buf, sizeof buf);
        });
        ASSERT_TRUE(
            weft_test::eventually([&] { return weft_test::parked_on("io read", {reader.id()}); }));
        weft::Chan<int> wake(0);
        auto idle = weft::spawn([&] {
          char pad[3000];
          std::memset(pad, 0, sizeof pad);
          const int v = wake.recv().value_or(-1);
          return v + pad[v > 0 ? 1 : 0];
        });
        // The idle fiber parked after the reader, so every scan that found it due found the
        // reader due too.
        hibernated = weft_test::eventually(
            [&] {
              return weft_test::dump_line(idle.id()).find(", hibernated") != std::string::npos;
            },
            std::chrono::duration_cast<std::chrono::milliseconds>(kIoBound));
        EXPECT_EQ(weft_test::dump_line(reader.id()).find("hibernated"), std::string::npos)
            << weft_test::dump_line(reader.id());
        weft::this_fiber::sleep_for(std::chrono::milliseconds(100));  // more scans: still not
        EXPECT_EQ(weft_test::dump_line(reader.id()).find("hibernated"), std::string::npos)
            << weft_test::dump_line(reader.id());
        const std::string msg = pattern(7, 3000);
        must_ok(p.client.write_all(msg), "write");
        EXPECT_EQ(reader.join(), msg);
        wake.send(1);
        EXPECT_EQ(idle.join(), 1);
      },
      o);
  if (!hibernated) GTEST_SKIP() << "no fiber hibernated (userfaultfd unavailable here?)";
}

// auto: io_uring only for one worker that does not hibernate stacks (an idle connection would
// keep its stack pages under io_uring); epoll for several workers or with hibernation on.
TEST(NetPollBackend, AutoPicksIoUringOnlyForOneWorkerWithoutHibernation) {
  ScopedEnv env("WEFT_NETPOLL", "auto");
  const auto backend = [](unsigned workers, std::chrono::milliseconds hibernate_after) {
    weft::Options o;
    o.workers = workers;
    o.hibernate_after = hibernate_after;
    return std::string(weft::run(
        [] {
          TcpPair p = tcp_pair();  // a net call, so the netpoller is the one chosen
          return weft::stats().netpoll;
        },
        o));
  };
  EXPECT_EQ(backend(1, std::chrono::milliseconds(0)), "io_uring");
  EXPECT_EQ(backend(1, std::chrono::milliseconds(2000)), "epoll");
  EXPECT_EQ(backend(2, std::chrono::milliseconds(0)), "epoll");
}

// run() ends while fibers are parked on queued recvs: their frames are unwound only after the
// kernel let go of their buffers (a synchronous cancel), and the next run starts clean.
TEST_P(UringTest, ShutdownWithRecvsInFlightUnwindsCleanly) {
  for (int round = 0; round < 3; ++round) {
    weft::run(
        [] {
          std::vector<std::shared_ptr<TcpPair>> pairs;
          std::vector<std::uint64_t> ids;
          for (int i = 0; i < 16; ++i) {
            auto pair = std::make_shared<TcpPair>(tcp_pair());
            pairs.push_back(pair);
            weft::go([pair] {
              char buf[512];
              (void)pair->server.read(buf, sizeof buf);
            });
          }
          ASSERT_TRUE(weft_test::eventually([] { return weft::stats().fibers_alive == 17; }));
          weft::this_fiber::sleep_for(5ms);  // let them park (not asserted: any state is fine)
        },
        uring_opts(workers()));
  }
}

WEFT_INSTANTIATE_WORKERS(UringTest);

}  // namespace
