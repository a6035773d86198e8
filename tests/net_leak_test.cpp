// No fd and no memory stays behind per connection: examples/echo_server, http_server and
// resp_server, each in a process of its own, serve 50,000 short connections (connect, one echo /
// GET / PING, half-close, close), 100 at a time; the open-fd count must come back to exactly the
// baseline and the RSS to within 4 MiB of it. (http_server and resp_server arm a read deadline on
// every connection, their header / idle timeouts: the churn also shows that a connection closed
// with its deadline armed leaves no timer behind.)
// After a burst of 10,000 idle connections to echo_server and to chat_server has gone, RSS comes
// back to within 20% of where the fresh server started (the monitor's HeapReturn; chat_server
// used to keep hundreds of MB). Also its SIGTERM drain (weft::net::Server): with nothing connected
// it reports OK; with idle connections past --drain_grace it cancels them (each client reads end of
// stream), reports how many, and exits 0.
//
// The baseline is taken after a warm-up round of the same shape (2,000 connections at the same
// concurrency), so that what a first burst legitimately keeps -- pooled stacks for 100 fibers,
// malloc's arenas, the poller's tables -- is in it. A leak of even 100 bytes per connection
// would add 5 MB. (Under ASan the server runs without its free-memory quarantine, which would
// look like growth.) The server is waited for, not timed: "eventually" (bounded at 10-20 s) covers
// the last connections' fibers finishing after the client saw their replies.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
#include <weft/weft.hpp>

#include "child_server.hpp"
#include "net_test_util.hpp"
#include "test_util.hpp"

namespace {

using namespace weft_test;
using namespace weft_net_test;

constexpr int kConcurrency = 100;
constexpr int kWarmup = 2000;
constexpr int kConns = kTsan ? 10000 : 50000;  // TSan runs ~10x slower; the same check at 10k
constexpr long kRssSlack = 4L << 20;
// TSan's runtime keeps state for every thread and fiber that ever existed (each fiber gets a TSan
// fiber context), so a TSan server's RSS grows with the fibers it ran whatever weft does: there
// the fds are checked, not the RSS.
constexpr bool kCheckRss = !kTsan;

// From the main fiber: body(i) for every i in [0, total), on kConcurrency fibers. A body that
// throws counts as a failure. Returns "N failed, the first: ...", or "" if none failed.
std::string fan_out(int total, const std::function<void(int)>& body) {
  std::atomic<int> next{0}, failures{0};
  std::string first_failure;
  weft::WaitGroup wg;
  wg.add(kConcurrency);
  for (int w = 0; w < kConcurrency; ++w) {
    weft::go([&] {
      for (int i; (i = next.fetch_add(1)) < total;) {
        try {
          body(i);
        } catch (const std::exception& e) {
          if (failures.fetch_add(1) == 0) first_failure = e.what();
        }
      }
      wg.done();
    });
  }
  wg.wait();
  return failures.load() == 0
             ? ""
             : std::to_string(failures.load()) + " failed, the first: " + first_failure;
}

// One request and its whole answer on a fresh connection: `request`, then exactly `answer`.
struct Exchange {
  std::string request, answer;
};
const Exchange kEcho{"0123456789abcdef", "0123456789abcdef"};
const Exchange kHttpGet{"GET / HTTP/1.1\r\nHost: t\r\n\r\n",
                        "HTTP/1.1 200 OK\r\nServer: weft\r\nContent-Type: text/plain\r\n"
                        "Content-Length: 13\r\n\r\nHello, World!"};
const Exchange kRespPing{"PING\r\n", "+PONG\r\n"};

// `total` short connections. Each sends the request, reads the answer, half-closes, reads the
// server's end of stream (so the server closes first), and closes.
std::string short_connections(const std::string& addr, int total, const Exchange& x) {
  return fan_out(total, [&](int) {
    net::TcpStream c = must(net::dial_tcp(addr, kIoBound), "dial");
    c.set_deadline(in(kIoBound));
    must_ok(c.write_all(x.request), "write");
    const std::string got = must(read_exactly(c, x.answer.size()), "read the answer");
    if (got != x.answer) throw std::runtime_error("answered '" + got + "'");
    must_ok(c.shutdown_write(), "half-close");
    char buf[16];
    if (must(c.read(buf, sizeof buf), "read end of stream") != 0) {
      throw std::runtime_error("bytes after the answer");
    }
  });
}

void check_no_leak(const ChildServer& server, const Exchange& x) {
  ASSERT_EQ(short_connections(server.addr(), kWarmup, x), "");
  // The server closes its side when it reads our half-close; wait until the fd count settles.
  long base_fds = -1;
  ASSERT_TRUE(eventually([&] {
    const long a = server.open_fds();
    weft::this_fiber::sleep_for(std::chrono::milliseconds(50));
    base_fds = server.open_fds();
    return a == base_fds && a > 0;
  }));
  const long base_rss = server.rss_bytes();
  ASSERT_GT(base_rss, 0);

  ASSERT_EQ(short_connections(server.addr(), kConns, x), "");
  long fds = -1, rss = -1;
  const bool settled = eventually(
      [&] {
        fds = server.open_fds();
        rss = server.rss_bytes();
        return fds == base_fds && (!kCheckRss || rss <= base_rss + kRssSlack);
      },
      kSanitized ? std::chrono::seconds(20) : std::chrono::seconds(10));
  ::testing::Test::RecordProperty("rss_growth_bytes", std::to_string(rss - base_rss));
  EXPECT_TRUE(settled) << "after " << kConns << " short connections the server holds " << fds
                       << " fds (baseline " << base_fds << ") and " << rss
                       << " bytes RSS (baseline " << base_rss << ", allowed +" << kRssSlack << ")";
}

TEST(NetLeak, FiftyThousandShortConnectionsLeaveNoFdAndNoMemoryBehind) {
  ChildServer server(WEFT_ECHO_SERVER);
  const std::string err = server.start();
  ASSERT_EQ(err, "");
  weft::run([&] { check_no_leak(server, kEcho); }, with_workers(1));
}

TEST(NetLeak, HttpServerFiftyThousandShortConnectionsLeaveNoFdAndNoMemoryBehind) {
  ChildServer server(WEFT_HTTP_SERVER);
  ASSERT_EQ(server.start(), "");
  weft::run([&] { check_no_leak(server, kHttpGet); }, with_workers(1));
}

TEST(NetLeak, RespServerFiftyThousandShortConnectionsLeaveNoFdAndNoMemoryBehind) {
  ChildServer server(WEFT_RESP_SERVER);
  ASSERT_EQ(server.start(), "");
  weft::run([&] { check_no_leak(server, kRespPing); }, with_workers(1));
}

// `total` connections held open at once, then all closed.
std::string idle_burst(const std::string& addr, int total) {
  std::vector<net::TcpStream> held(static_cast<std::size_t>(total));
  std::string err = fan_out(total, [&](int i) {
    held[static_cast<std::size_t>(i)] = must(net::dial_tcp(addr, kIoBound), "dial");
  });
  held.clear();  // every connection closes
  return err;
}

// Fresh server: RSS now; a burst of kBurst idle connections; once the server has closed them all
// (its fd count is back: how long that takes depends on the machine, chat_server tells every
// client about every leaver), RSS must come back to within `slack_fraction` of the fresh figure
// within 10 s. What a fresh process does not have and a burst legitimately leaves: a few cached
// stacks and fiber headers per worker, the descriptor table's first pages, libc code pages the
// burst touched, and heap pages that still hold a live chunk or two.
void check_rss_returns(const std::string& bin, double slack_fraction) {
  constexpr int kBurst = 10000;
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < kBurst + 1000) {
    GTEST_SKIP() << "needs " << kBurst + 1000 << " fds, RLIMIT_NOFILE is " << rl.rlim_cur;
  }
  ChildServer server(bin);
  ASSERT_EQ(server.start(), "");
  weft::run([&] {
    weft::this_fiber::sleep_for(std::chrono::milliseconds(200));  // past its start-up
    const long fresh = server.rss_bytes();
    const long fresh_fds = server.open_fds();
    ASSERT_GT(fresh, 0);
    ASSERT_GT(fresh_fds, 0);
    const auto slack = static_cast<long>(static_cast<double>(fresh) * slack_fraction);
    ASSERT_EQ(idle_burst(server.addr(), kBurst), "");
    ASSERT_TRUE(eventually([&] { return server.open_fds() <= fresh_fds; }, std::chrono::minutes(2)))
        << bin << " still holds " << server.open_fds() << " fds (fresh: " << fresh_fds << ")";
    long rss = -1;
    const bool back = eventually(
        [&] {
          rss = server.rss_bytes();
          return rss <= fresh + slack;
        },
        std::chrono::seconds(10));
    ::testing::Test::RecordProperty("rss_fresh_bytes", std::to_string(fresh));
    ::testing::Test::RecordProperty("rss_after_burst_bytes", std::to_string(rss));
    EXPECT_TRUE(back) << bin << ": " << rss << " bytes RSS 10 s after it closed " << kBurst
                      << " idle connections (fresh: " << fresh << ", allowed +" << slack << ")";
  });
}

// The allowance: the 20% for an optimized server. An unoptimized (Debug) chat_server
// leaves more behind and varies more: 1.10-1.19x measured with two CPU hogs beside it (release:
// 1.09-1.13x), and a CI run went past 1.2x once. The extra is glibc's per-thread cached chunks
// and partly used arena pages, whose number depends on how the slower code interleaves the
// burst's broadcasts. It levels off rather than leaking: four bursts in a row against one Debug
// chat_server left 7.10, 7.17, 7.20 and 7.22 MB (fresh: 6.19 MB).
#if defined(__OPTIMIZE__)
constexpr double kBurstRssSlack = 0.2;
#else
constexpr double kBurstRssSlack = 0.3;
#endif

// Sanitizers keep their own heaps (ASan's quarantine, TSan's shadow and per-fiber state): the
// figures would say nothing about weft's.
TEST(NetLeak, EchoServerRssReturnsAfterABurstOfIdleConnections) {
  if (kSanitized) GTEST_SKIP() << "RSS under a sanitizer says nothing about weft's";
  // Measured (2 workers): +0.4-0.45 MB on a 5.8 MB fresh process (1.07-1.08x); +3.1 MB before
  // the descriptor table gave its pages back, +7.2 MB before the heap return.
  check_rss_returns(WEFT_ECHO_SERVER, kBurstRssSlack);
}

TEST(NetLeak, ChatServerRssReturnsAfterABurstOfIdleConnections) {
  if (kSanitized) GTEST_SKIP() << "RSS under a sanitizer says nothing about weft's";
  // Measured (2 workers): +0.75-0.95 MB on a 5.9 MB fresh process (1.13-1.16x); +1.3-2.5 MB
  // before the hibernator's images left malloc and the arenas' tops were trimmed, +550 MB before
  // the heap return.
  check_rss_returns(WEFT_CHAT_SERVER, kBurstRssSlack);
}

TEST(NetDrain, EchoServerDrainsOnSigterm) {
  {
    ChildServer quiet(WEFT_ECHO_SERVER);
    ASSERT_EQ(quiet.start("--drain_grace=10s"), "");
    int status = 0;
    const std::string out = quiet.terminate(&status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("drained: OK"), std::string::npos) << out;
  }
  ChildServer server(WEFT_ECHO_SERVER);
  ASSERT_EQ(server.start("--drain_grace=50ms"), "");
  weft::run([&] {
    std::vector<net::TcpStream> idle;
    for (int i = 0; i < 3; ++i) {
      idle.push_back(must(net::dial_tcp(server.addr(), kIoBound), "dial"));
      idle.back().set_deadline(in(kIoBound));
      // One echo each: the connection is being served (its handler waits in read) when the
      // signal comes.
      must_ok(idle.back().write_all("x"), "write");
      char b;
      must_ok(idle.back().read_full(std::as_writable_bytes(std::span(&b, 1))), "echo");
    }
    int status = 0;
    const std::string out = weft::blocking([&] { return server.terminate(&status); });
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("drained: DEADLINE_EXCEEDED"), std::string::npos) << out;
    EXPECT_NE(out.find("3 connection(s) were cancelled"), std::string::npos) << out;
    for (auto& c : idle) {
      char b[4];
      absl::StatusOr<std::size_t> n = c.read(b, sizeof b);
      EXPECT_TRUE(!n.ok() || *n == 0) << "a cancelled connection is closed by the server";
    }
  });
}

}  // namespace
