// Proves weft::net beyond TCP streams against docs/api.md's Networking contract, under workers = 1,
// 2, 4 and 8: UDP (sender address, datagram boundaries, truncation), Unix streams (echo, the socket
// file unlinked by the listener's destruction or move-assignment, dial errors), IPv6 loopback (TCP
// and UDP), and wait_readable / wait_writable on pipes and socketpairs (parking, deadlines, many
// fds at once and repeatedly, both directions on one fd, weft sockets refused).
// Tests marked `// Regression:` pin bugs these tests found and netpoll fixed.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>
#include <weft/weft.hpp>

#include "net_test_util.hpp"
#include "test_util.hpp"
namespace {

using namespace weft_test;
using namespace weft_net_test;
using absl::StatusCode;
WEFT_INSTANTIATE_WORKERS(NetTest);
// ---- UDP ----------------------------------------------------------------------------------------

TEST_P(NetTest, UdpRoundTripReportsTheSender) {
  weft::run(
      [] {
        net::UdpSocket a = must(net::listen_udp("127.0.0.1:0"), "listen_udp a");
        net::UdpSocket b = must(net::listen_udp("127.0.0.1:0"), "listen_udp b");
        a.set_deadline(in(kIoBound));
        b.set_deadline(in(kIoBound));
        EXPECT_EQ(a.local_addr().rfind("127.0.0.1:", 0), 0u) << a.local_addr();
        EXPECT_NE(port_of(a.local_addr()), 0);
        auto responder = weft::spawn([&] {
          std::byte buf[64];
          std::string from;
          absl::StatusOr<std::size_t> n = b.recv_from(buf, &from);  // parks: nothing sent yet
          if (!n.ok()) return n.status();
          if (from != a.local_addr()) return absl::InternalError("b saw sender " + from);
          std::string reply = "pong:" + std::string(reinterpret_cast<char*>(buf), *n);
          return b.send_to(reply, from);
        });
        weft::this_fiber::sleep_for(10ms);
        ASSERT_TRUE(a.send_to("ping", b.local_addr()).ok());
        std::byte buf[64];
        std::string from;
        absl::StatusOr<std::size_t> n = a.recv_from(buf, &from);
        ASSERT_TRUE(n.ok()) << n.status();
        EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), *n), "pong:ping");
        EXPECT_EQ(from, b.local_addr());
        absl::Status rs = responder.join();
        EXPECT_TRUE(rs.ok()) << rs;
      },
      opts());
}

TEST_P(NetTest, UdpKeepsDatagramBoundariesAndTruncates) {
  weft::run(
      [] {
        net::UdpSocket a = must(net::listen_udp("127.0.0.1:0"), "listen_udp a");
        net::UdpSocket b = must(net::listen_udp("127.0.0.1:0"), "listen_udp b");
        b.set_deadline(in(kIoBound));
        const std::string big(100, 'B');
        for (const std::string& d :
             {std::string("one"), std::string("two!"), big, std::string("three")}) {
          ASSERT_TRUE(a.send_to(d, b.local_addr()).ok());
        }
        std::byte buf[16];
        std::vector<std::string> got;
        for (int i = 0; i < 4; ++i) {
          absl::StatusOr<std::size_t> n = b.recv_from(buf);  // `from` may be omitted
          ASSERT_TRUE(n.ok()) << n.status();
          got.emplace_back(reinterpret_cast<char*>(buf), *n);
        }
        EXPECT_EQ(got, (std::vector<std::string>{"one", "two!", std::string(16, 'B'), "three"}));
        // A deadline ends a recv_from with nothing to receive.
        b.set_read_deadline(in(30ms));
        EXPECT_EQ(b.recv_from(buf).status().code(), StatusCode::kDeadlineExceeded);
        EXPECT_EQ(a.send_to("x", "no-port").code(), StatusCode::kInvalidArgument);
      },
      opts());
}

// ---- Unix streams -------------------------------------------------------------------------------

bool path_exists(const std::string& p) {
  struct stat st {};
  return lstat(p.c_str(), &st) == 0;
}

bool is_socket_file(const std::string& p) {
  struct stat st {};
  return lstat(p.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/weft-net-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    for (const char* name : {"/a", "/b", "/s"}) unlink((path_ + name).c_str());
    rmdir(path_.c_str());
  }
  std::string file(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

TEST_P(NetTest, UnixStreamEchoAndTheListenerUnlinksItsPath) {
  TempDir dir;
  const std::string path = dir.file("s");
  weft::run(
      [&] {
        {
          net::UnixListener l = must(net::listen_unix(path), "listen_unix");
          EXPECT_TRUE(is_socket_file(path));
          EXPECT_EQ(l.path(), path);
          EXPECT_EQ(l.local_addr(), path);
          l.set_deadline(in(kIoBound));
          auto server = weft::spawn([&] {
            net::UnixStream s = must(l.accept(), "accept");
            s.set_deadline(in(kIoBound));
            absl::StatusOr<std::string> all = read_to_eof(s);
            if (!all.ok()) return all.status();
            return s.write_all(*all);
          });
          net::UnixStream c = must(net::dial_unix(path), "dial_unix");
          c.set_deadline(in(kIoBound));
          const std::string data = pattern(7, 300000);  // more than one socket buffer
          auto writer = weft::spawn([&] {
            absl::Status st = c.write_all(data);
            return st.ok() ? c.shutdown_write() : st;
          });
          absl::StatusOr<std::string> back = read_to_eof(c);
          ASSERT_TRUE(back.ok()) << back.status();
          EXPECT_TRUE(*back == data) << "echo differs (" << back->size() << " bytes)";
          EXPECT_TRUE(writer.join().ok());
          EXPECT_TRUE(server.join().ok());
          // A second listener on a live path fails and leaves the first one's file alone.
          absl::StatusOr<net::UnixListener> dup = net::listen_unix(path);
          EXPECT_FALSE(dup.ok());
          EXPECT_TRUE(is_socket_file(path));
          // Moving the listener moves the duty to unlink.
          net::UnixListener moved = std::move(l);
          EXPECT_TRUE(is_socket_file(path));
          { net::UnixListener sink = std::move(moved); }
          EXPECT_FALSE(path_exists(path)) << "destroying the listener should unlink " << path;
        }
        EXPECT_FALSE(path_exists(path));
        // The path is free again.
        absl::StatusOr<net::UnixListener> again = net::listen_unix(path);
        EXPECT_TRUE(again.ok()) << again.status();
      },
      opts());
  EXPECT_FALSE(path_exists(path));
}

// Regression: UnixListener's defaulted move assignment closed the replaced listener's fd but
// overwrote its path without unlinking it.
TEST_P(NetTest, UnixListenerReplacedByMoveAssignmentUnlinksItsPath) {
  // Move-assigning over a listener closes it; its socket file must go too, as on destruction
  // (nothing could unlink it afterwards, and listen_unix on that path would fail forever).
  TempDir dir;
  const std::string a = dir.file("a"), b = dir.file("b");
  weft::run(
      [&] {
        net::UnixListener l = must(net::listen_unix(a), "listen_unix a");
        l = must(net::listen_unix(b), "listen_unix b");
        EXPECT_FALSE(path_exists(a)) << "the replaced listener's socket file " << a << " leaked";
        EXPECT_EQ(l.path(), b);
        EXPECT_TRUE(is_socket_file(b));
        absl::StatusOr<net::UnixListener> again = net::listen_unix(a);
        EXPECT_TRUE(again.ok()) << again.status();
      },
      opts());
  EXPECT_FALSE(path_exists(b));
}

TEST_P(NetTest, UnixDialErrors) {
  TempDir dir;
  weft::run(
      [&] {
        absl::StatusOr<net::UnixStream> c = net::dial_unix(dir.file("a"));
        ASSERT_FALSE(c.ok());
        EXPECT_EQ(c.status().code(), StatusCode::kNotFound) << c.status();
        EXPECT_TRUE(contains_ci(text(c.status()), dir.file("a"))) << c.status();
        EXPECT_EQ(net::dial_unix(std::string(200, 'x')).status().code(),
                  StatusCode::kInvalidArgument);
        EXPECT_EQ(net::listen_unix("").status().code(), StatusCode::kInvalidArgument);
      },
      opts());
}

// ---- IPv6 ---------------------------------------------------------------------------------------

bool have_ipv6_loopback() {
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

TEST_P(NetTest, Ipv6LoopbackTcpAndUdp) {
  if (!have_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback in this sandbox";
  weft::run(
      [] {
        net::TcpListener l = must(net::listen_tcp("[::1]:0"), "listen_tcp [::1]:0");
        EXPECT_EQ(l.local_addr().rfind("[::1]:", 0), 0u) << l.local_addr();
        l.set_deadline(in(kIoBound));
        net::TcpStream c = must(net::dial_tcp(l.local_addr(), kIoBound), "dial [::1]");
        net::TcpStream s = must(l.accept(), "accept");
        EXPECT_EQ(s.peer_addr(), c.local_addr());
        EXPECT_EQ(c.peer_addr(), l.local_addr());
        c.set_deadline(in(kIoBound));
        s.set_deadline(in(kIoBound));
        ASSERT_TRUE(c.write_all("v6").ok());
        absl::StatusOr<std::string> got = read_exactly(s, 2);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(*got, "v6");

        net::UdpSocket a = must(net::listen_udp("[::1]:0"), "listen_udp a");
        net::UdpSocket b = must(net::listen_udp("[::1]:0"), "listen_udp b");
        b.set_deadline(in(kIoBound));
        ASSERT_TRUE(a.send_to("dgram6", b.local_addr()).ok());
        std::byte buf[16];
        std::string from;
        absl::StatusOr<std::size_t> n = b.recv_from(buf, &from);
        ASSERT_TRUE(n.ok()) << n.status();
        EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), *n), "dgram6");
        EXPECT_EQ(from, a.local_addr());
      },
      opts());
}

// ---- wait_readable / wait_writable --------------------------------------------------------------

TEST_P(NetTest, WaitReadableParksUntilAnotherFiberWrites) {
  weft::run(
      [] {
        Pipe p;
        const auto t0 = Clock::now();  // before the writer exists: it writes 30 ms after t0
        auto writer = weft::spawn([&] {
          weft::this_fiber::sleep_for(30ms);
          return write(p.w, "!", 1);
        });
        absl::Status st = net::wait_readable(p.r, in(kIoBound));
        const double ms = ms_since(t0);
        ASSERT_TRUE(st.ok()) << st;
        EXPECT_GE(ms, 25.0);
        char c = 0;
        EXPECT_EQ(read(p.r, &c, 1), 1);
        EXPECT_EQ(c, '!');
        EXPECT_EQ(writer.join(), 1);
        // Already readable: returns without waiting for another edge.
        ASSERT_EQ(write(p.w, "?", 1), 1);
        const auto t1 = Clock::now();
        st = net::wait_readable(p.r, in(kIoBound));
        EXPECT_TRUE(st.ok()) << st;
        EXPECT_LT(ms_since(t1), 2000.0);
      },
      opts());
}

TEST_P(NetTest, WaitReadableDeadline) {
  weft::run(
      [] {
        Pipe p;
        const auto t0 = Clock::now();
        absl::Status st = net::wait_readable(p.r, t0 + 50ms);
        const double ms = ms_since(t0);
        EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st;
        EXPECT_GE(ms, 49.0);
        EXPECT_LT(ms, 5000.0);
        // The fd was only registered for that call: it can be waited on again.
        ASSERT_EQ(write(p.w, "x", 1), 1);
        st = net::wait_readable(p.r, in(kIoBound));
        EXPECT_TRUE(st.ok()) << st;
      },
      opts());
}

TEST_P(NetTest, WaitWritableOnAPipe) {
  weft::run(
      [] {
        Pipe p;
        // An empty pipe is writable.
        absl::Status st = net::wait_writable(p.w, in(kIoBound));
        EXPECT_TRUE(st.ok()) << st;
        // A full one is not, until somebody drains it.
        std::vector<char> junk(65536, 'j');
        while (write(p.w, junk.data(), junk.size()) > 0) {
        }
        ASSERT_EQ(errno, EAGAIN);
        st = net::wait_writable(p.w, in(30ms));
        EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st;
        const auto t0 = Clock::now();  // before the drainer exists: it drains 30 ms after t0
        auto drainer = weft::spawn([&] {
          weft::this_fiber::sleep_for(30ms);
          std::size_t total = 0;
          ssize_t n;
          while ((n = read(p.r, junk.data(), junk.size())) > 0)
            total += static_cast<std::size_t>(n);
          return total;
        });
        st = net::wait_writable(p.w, in(kIoBound));
        EXPECT_TRUE(st.ok()) << st;
        EXPECT_GE(ms_since(t0), 20.0);
        EXPECT_GT(drainer.join(), 0u);
      },
      opts());
}

TEST_P(NetTest, WaitOnManyPipesAtOnceAndRepeatedly) {
  const int kFibers = 32;
  const int kRounds = static_cast<int>(scaled(200));
  weft::run(
      [&] {
        std::vector<std::unique_ptr<Pipe>> pipes;
        for (int i = 0; i < kFibers; ++i) pipes.push_back(std::make_unique<Pipe>());
        std::atomic<int> received{0};
        std::vector<weft::Task<void>> readers, writers;
        for (int i = 0; i < kFibers; ++i) {
          Pipe& p = *pipes[static_cast<std::size_t>(i)];
          readers.push_back(weft::spawn([&p, &received, kRounds] {
            for (int r = 0; r < kRounds; ++r) {
              absl::Status st = net::wait_readable(p.r, in(kIoBound));
              if (!st.ok()) {
                ADD_FAILURE() << st;
                return;
              }
              // Several bytes may be queued behind one readiness report: take them all.
              char buf[256];
              const ssize_t n = read(p.r, buf, sizeof buf);
              if (n <= 0) {
                ADD_FAILURE() << "wait_readable returned but the pipe was empty";
                return;
              }
              received += static_cast<int>(n);
              r += static_cast<int>(n) - 1;
            }
          }));
          writers.push_back(weft::spawn([&p, i, kRounds] {
            for (int r = 0; r < kRounds; ++r) {
              char c = 'x';
              while (write(p.w, &c, 1) != 1) weft::this_fiber::yield();
              if ((r + i) % 3 == 0) weft::this_fiber::yield();
              if ((r + i) % 17 == 0) weft::this_fiber::sleep_for(std::chrono::microseconds(100));
            }
          }));
        }
        for (auto& t : writers) t.join();
        for (auto& t : readers) t.join();
        EXPECT_EQ(received.load(), kFibers * kRounds);
      },
      opts());
}

// Regression: wait_readable/wait_writable registered the fd per call (EPOLL_CTL_ADD), so a second
// wait on the same fd, in the other direction, failed with EEXIST (kFailedPrecondition).
TEST_P(NetTest, WaitReadableAndWaitWritableOnOneFdAtOnce) {
  // A third-party client library's socket, read by one fiber while another writes: both
  // directions can be waited for at the same time.
  weft::run(
      [] {
        int sv[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        auto reader = weft::spawn([&] { return net::wait_readable(sv[0], in(kIoBound)); });
        EXPECT_TRUE(eventually([&] { return parked_on_io({reader.id()}); }, 30s))
            << "the reader never parked";
        absl::Status w = net::wait_writable(sv[0], in(kIoBound));
        EXPECT_TRUE(w.ok()) << "wait_writable while another fiber waits readable: " << w;
        ASSERT_EQ(write(sv[1], "r", 1), 1);
        absl::Status r = reader.join();
        EXPECT_TRUE(r.ok()) << r;
        close(sv[0]);
        close(sv[1]);
      },
      opts());
}

TEST_P(NetTest, WaitReadableRefusesAWeftSocket) {
  weft::run(
      [] {
        TcpPair p = tcp_pair();
        absl::Status st = net::wait_readable(p.client.fd(), in(1s));
        EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st;
        // The socket's own registration is intact.
        ASSERT_TRUE(p.server.write_all("still here").ok());
        absl::StatusOr<std::string> got = read_exactly(p.client, 10);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(*got, "still here");
      },
      opts());
}
}  // namespace
