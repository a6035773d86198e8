// Network calls bounded by a Context or a stop request (weft/net.hpp "Cancellation"), under
// workers = 1, 2, 4 and 8: a socket bound with set_context fails blocked and later calls with
// kCancelled / kDeadlineExceeded and stays open and usable once rebound; accept, UDP and
// wait_readable likewise; Task::request_stop ends a blocked read; dial_tcp's context bounds the
// connect and a name lookup. Cancellation happens only once the caller is seen parked on I/O.
#include <sys/socket.h>
#include <unistd.h>

#include <weft/weft.hpp>

#include "net_test_util.hpp"
#include "test_util.hpp"

namespace {

using namespace weft_test;
using namespace weft_net_test;
using absl::StatusCode;

class NetContextTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(NetContextTest);

TEST_P(NetContextTest, CancelledContextFailsABlockedReadAndTheSocketStaysUsable) {
  weft::run(
      [] {
        TcpPair p = tcp_pair();
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        p.client.set_context(ctx);
        auto reader = weft::spawn([&] {
          char buf[16];
          return p.client.read(buf, sizeof buf).status();
        });
        ASSERT_TRUE(eventually([&] { return parked_on("io read", {reader.id()}); }));
        cancel();
        absl::Status s = reader.join();
        EXPECT_EQ(s.code(), StatusCode::kCancelled) << s;
        EXPECT_TRUE(contains_ci(text(s), "read fd")) << s;
        // Still bound to the cancelled context: later calls fail before their syscall, even
        // with data waiting.
        ASSERT_TRUE(p.server.write_all("hello").ok());
        char buf[16];
        EXPECT_EQ(p.client.read(buf, sizeof buf).status().code(), StatusCode::kCancelled);
        EXPECT_EQ(p.client.write_all("x").code(), StatusCode::kCancelled);
        EXPECT_TRUE(p.client.is_open());
        // Unbound: the data is all there.
        p.client.set_context(weft::background());
        EXPECT_EQ(must(read_exactly(p.client, 5), "read"), "hello");
      },
      opts());
}

TEST_P(NetContextTest, ContextDeadlineEndsAWriteToAPeerThatDoesNotRead) {
  weft::run(
      [] {
        TcpPair p = tcp_pair();
        int small = 4096;
        setsockopt(p.client.fd(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        setsockopt(p.server.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        auto [ctx, cancel] = weft::with_timeout(weft::background(), 20ms);
        p.client.set_context(ctx);
        const std::string big(8 << 20, 'x');
        absl::Status s = p.client.write_all(big);
        EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
      },
      opts());
}

TEST_P(NetContextTest, AcceptUdpAndWaitReadableFollowTheirContext) {
  weft::run(
      [] {
        net::TcpListener l = must(net::listen_tcp("127.0.0.1:0"), "listen");
        l.set_deadline(in(kIoBound));
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        l.set_context(ctx);
        auto acceptor = weft::spawn([&] { return l.accept().status(); });
        net::UdpSocket u = must(net::listen_udp("127.0.0.1:0"), "udp");
        u.set_deadline(in(kIoBound));
        u.set_context(ctx);
        auto receiver = weft::spawn([&] {
          std::byte buf[64];
          return u.recv_from(buf).status();
        });
        int fds[2];
        ASSERT_EQ(pipe(fds), 0);
        auto waiter = weft::spawn([&, c = ctx] { return net::wait_readable(fds[0], c); });
        ASSERT_TRUE(eventually([&] {
          return parked_on("io read", {acceptor.id(), receiver.id(), waiter.id()});
        }));
        cancel();
        EXPECT_EQ(acceptor.join().code(), StatusCode::kCancelled);
        EXPECT_EQ(receiver.join().code(), StatusCode::kCancelled);
        EXPECT_EQ(waiter.join().code(), StatusCode::kCancelled);
        // The pipe's registration was released: a later plain wait works.
        ASSERT_EQ(write(fds[1], "x", 1), 1);
        EXPECT_TRUE(net::wait_readable(fds[0], in(kIoBound)).ok());
        close(fds[0]);
        close(fds[1]);
        // The listener still accepts once unbound.
        l.set_context(weft::background());
        auto c = must(net::dial_tcp(l.local_addr(), kIoBound), "dial");
        EXPECT_TRUE(l.accept().ok());
      },
      opts());
}

TEST_P(NetContextTest, RequestStopEndsABlockedReadWithCancelled) {
  weft::run(
      [] {
        TcpPair p = tcp_pair();
        auto reader = weft::spawn([&] {
          char buf[16];
          absl::Status first = p.client.read(buf, sizeof buf).status();
          // Later calls of the stopped fiber fail at once.
          absl::Status second = p.client.read(buf, sizeof buf).status();
          return std::pair(first, second);
        });
        ASSERT_TRUE(eventually([&] { return parked_on("io read", {reader.id()}); }));
        reader.request_stop();
        auto [first, second] = reader.join();
        EXPECT_EQ(first.code(), StatusCode::kCancelled) << first;
        EXPECT_TRUE(contains_ci(text(first), "request_stop")) << first;
        EXPECT_EQ(second.code(), StatusCode::kCancelled) << second;
        // Other fibers are unaffected.
        ASSERT_TRUE(p.server.write_all("ok").ok());
        EXPECT_EQ(must(read_exactly(p.client, 2), "read"), "ok");
      },
      opts());
}

TEST_P(NetContextTest, DialContextBoundsTheConnectAndTheNameLookup) {
  weft::run(
      [] {
        // A full backlog makes a connect hang; the context ends it.
        net::TcpListener l = must(net::listen_tcp("127.0.0.1:0", 1), "listen");
        std::vector<net::TcpStream> held;
        auto [ctx, cancel] = weft::with_timeout(weft::background(), 50ms);
        absl::Status last;
        for (int i = 0; i < 16 && last.ok(); ++i) {
          net::DialOptions o;
          o.context = ctx;
          absl::StatusOr<net::TcpStream> c = net::dial_tcp(l.local_addr(), o);
          if (c.ok()) {
            held.push_back(std::move(*c));
          } else {
            last = c.status();
          }
        }
        ASSERT_FALSE(last.ok());
        EXPECT_EQ(last.code(), StatusCode::kDeadlineExceeded) << last;
        // An already cancelled context fails a dial that needs a name lookup, without waiting.
        auto [dead, kill] = weft::with_cancel(weft::background());
        kill();
        net::DialOptions o;
        o.context = dead;
        absl::Status s = net::dial_tcp("localhost:1", o).status();
        EXPECT_EQ(s.code(), StatusCode::kCancelled) << s;
        EXPECT_TRUE(contains_ci(text(s), "resolving")) << s;
      },
      opts());
}

}  // namespace
