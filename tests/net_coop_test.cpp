// The cooperative I/O budget (coop_tick, weft/detail/park.hpp) on ONE worker.
//
// ReadyReadsYieldWithinTheBudget (the deterministic one): a fiber reads 16-byte pieces from a
// socket whose peer wrote 1 MiB before the reads began, so none of its 65,536 reads can park.
// After its first read it wakes another fiber, which records how many reads the first had done
// when it got to run. With the budget that is at most kCoopBudget + 1; without it, all of them.
//
// AnAlwaysReadyConnectionDoesNotStarveOthersOnItsWorker: a pipelining client
// (two plain threads, one writing and one reading without pause) keeps its server fiber's socket
// always readable and writable, so that fiber's reads and writes never park; 100 light
// connections do round trips meanwhile. With the budget the flooder yields every kCoopBudget
// calls and every light round trip completes while the flood goes on -- the flood stops only
// after the light client finished, so the assertion is an order, not a duration. Without the
// budget the flooder would hold the only worker until the flood ends, and the light reads would
// fail at their 60 s receive timeout. The light round trips' p50/p99 are printed for the record.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <span>
#include <thread>
#include <vector>
#include <weft/weft.hpp>

#include "net_test_util.hpp"
#include "test_util.hpp"

namespace {

using namespace weft_test;
using namespace weft_net_test;

int connect_blocking(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{60, 0};  // a starved reply fails the test instead of hanging it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

bool round_trip(int fd) {
  char msg[16] = "ping-pong-light";
  if (::send(fd, msg, sizeof msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof msg)) return false;
  std::size_t got = 0;
  char buf[16];
  while (got < sizeof buf) {
    const ssize_t r = ::recv(fd, buf + got, sizeof buf - got, 0);
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

TEST(NetCoopTest, ReadyReadsYieldWithinTheBudget) {
  constexpr std::size_t kPrefill = 1 << 20;
  constexpr std::size_t kPiece = 16;
  weft::run(
      [&] {
        net::TcpListener l = must(net::listen_tcp("127.0.0.1:0"), "listen");
        const int port = port_of(l.local_addr());
        // The peer: a plain thread with a blocking socket and buffers big enough to hold it all.
        std::atomic<int> peer_fd{-1};
        std::atomic<bool> written{false};
        std::thread peer([&] {
          const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
          const int big = 8 << 20;
          setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
          sockaddr_in a{};
          a.sin_family = AF_INET;
          a.sin_port = htons(static_cast<std::uint16_t>(port));
          a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
          if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
          peer_fd.store(fd);
          std::vector<char> data(kPrefill, 'x');
          std::size_t off = 0;
          while (off < data.size()) {
            const ssize_t r = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
            if (r <= 0) return;
            off += static_cast<std::size_t>(r);
          }
          written.store(true);
        });
        net::TcpStream s = must(l.accept(), "accept");
        const int big = 8 << 20;
        setsockopt(s.fd(), SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        s.set_deadline(in(kIoBound));
        // Everything is in the server's receive queue before the reads begin.
        ASSERT_TRUE(eventually([&] {
          int queued = 0;
          return written.load() && ioctl(s.fd(), FIONREAD, &queued) == 0 &&
                 static_cast<std::size_t>(queued) >= kPrefill;
        }));
        std::atomic<std::size_t> reads{0};
        std::atomic<std::size_t> seen{0};
        weft::Semaphore started(0);
        weft::WaitGroup wg;
        wg.add(2);
        weft::go([&] {
          started.acquire();
          seen.store(reads.load());  // runs only when the reader lets the worker go
          wg.done();
        });
        weft::go([&] {
          char buf[kPiece];
          for (std::size_t i = 0; i < kPrefill / kPiece; ++i) {
            absl::Status st = s.read_full(std::as_writable_bytes(std::span(buf)));
            if (!st.ok()) {
              ADD_FAILURE() << st;
              break;
            }
            reads.fetch_add(1);
            if (i == 0) started.release();
          }
          wg.done();
        });
        wg.wait();
        EXPECT_EQ(reads.load(), kPrefill / kPiece);
        EXPECT_LE(seen.load(), weft::detail::kCoopBudget + 1)
            << "the reader did not yield within its budget of ready reads";
        ::shutdown(peer_fd.load(), SHUT_RDWR);
        peer.join();
        ::close(peer_fd.load());
      },
      weft::Options{.workers = 1, .watchdog_threshold = std::chrono::milliseconds(0)});
}

TEST(NetCoopTest, AnAlwaysReadyConnectionDoesNotStarveOthersOnItsWorker) {
  constexpr int kLight = 100;
  constexpr int kRounds = 10;
  std::atomic<int> port{0};
  std::atomic<bool> stop_server{false};
  std::thread server([&] {
    weft::run(
        [&] {
          net::TcpListener l = must(net::listen_tcp("127.0.0.1:0"), "listen");
          port.store(port_of(l.local_addr()));
          weft::go([&] {
            while (!stop_server.load()) weft::this_fiber::sleep_for(5ms);
            l.close();
          });
          for (;;) {
            absl::StatusOr<net::TcpStream> c = l.accept();
            if (!c.ok()) return;
            weft::go([s = std::move(*c)]() mutable {
              char buf[4096];
              for (;;) {
                absl::StatusOr<std::size_t> n = s.read(buf, sizeof buf);
                if (!n.ok() || *n == 0) return;
                if (!s.write_all(buf, *n).ok()) return;
              }
            });
          }
        },
        weft::Options{.workers = 1, .watchdog_threshold = std::chrono::milliseconds(0)});
  });
  while (port.load() == 0) std::this_thread::sleep_for(1ms);

  // Light connections, each served once before the flood starts.
  std::vector<int> light;
  for (int i = 0; i < kLight; ++i) {
    const int fd = connect_blocking(port.load());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(round_trip(fd));
    light.push_back(fd);
  }

  // The flood: writes and reads 4 KiB chunks without pause until told to stop.
  const int flood = connect_blocking(port.load());
  ASSERT_GE(flood, 0);
  std::atomic<bool> stop_flood{false};
  std::atomic<long> echoed{0};
  std::thread writer([&] {
    std::vector<char> chunk(4096, 'f');
    while (!stop_flood.load()) {
      if (::send(flood, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;
    }
    ::shutdown(flood, SHUT_WR);
  });
  std::thread reader([&] {
    std::vector<char> buf(65536);
    for (;;) {
      const ssize_t r = ::recv(flood, buf.data(), buf.size(), 0);
      if (r <= 0) break;
      echoed.fetch_add(r);
    }
  });
  while (echoed.load() < (1 << 20)) std::this_thread::sleep_for(1ms);  // flooding for real

  std::vector<double> ms;
  bool all_ok = true;
  for (int r = 0; r < kRounds && all_ok; ++r) {
    for (int fd : light) {
      const auto t0 = Clock::now();
      if (!round_trip(fd)) {
        all_ok = false;
        break;
      }
      ms.push_back(ms_since(t0));
    }
  }
  const long during = echoed.load();
  stop_flood.store(true);
  writer.join();
  reader.join();
  for (int fd : light) ::close(fd);
  ::close(flood);
  stop_server.store(true);
  server.join();

  EXPECT_TRUE(all_ok) << "a light connection got no reply while the flood ran (starved)";
  EXPECT_GT(during, 1 << 20);
  if (!ms.empty()) {
    std::sort(ms.begin(), ms.end());
    std::printf(
        "light round trips under a flood, 1 worker: n=%zu p50=%.3f ms p99=%.3f ms "
        "max=%.3f ms; flood echoed %.1f MiB\n",
        ms.size(), ms[ms.size() / 2], ms[ms.size() * 99 / 100], ms.back(), during / 1048576.0);
  }
}

}  // namespace
