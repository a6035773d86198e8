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

// A server binds all its connections to one context (weft::net::Server does): the binding is the
// descriptor's, so cancelling that one context ends every call blocked on any of them, and each
// socket is usable again once unbound.
TEST_P(NetContextTest, OneContextBoundToManySocketsEndsEveryBlockedCall) {
  weft::run(
      [] {
        constexpr int kSockets = 32;
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        std::vector<TcpPair> pairs;
        for (int i = 0; i < kSockets; ++i) {
          pairs.push_back(tcp_pair());
          pairs.back().client.set_context(ctx);
        }
        std::vector<weft::Task<absl::Status>> readers;
        for (TcpPair& p : pairs) {
          readers.push_back(weft::spawn([&p] {
            char buf[16];
            return p.client.read(buf, sizeof buf).status();
          }));
        }
        ASSERT_TRUE(eventually([&] {
          for (auto& r : readers) {
            if (!parked_on("io read", {r.id()})) return false;
          }
          return true;
        }));
        cancel();
        for (auto& r : readers) {
          absl::Status st = r.join();
          EXPECT_EQ(st.code(), StatusCode::kCancelled) << st;
        }
        for (TcpPair& p : pairs) {
          EXPECT_EQ(p.client.write_all("x").code(), StatusCode::kCancelled);
          p.client.set_context(weft::background());
          ASSERT_TRUE(p.server.write_all("ok").ok());
          EXPECT_EQ(must(read_exactly(p.client, 2), "read"), "ok");
        }
      },
      opts());
}

// Rebinding does not interrupt a blocked call; from then on the call follows the new binding:
// the old context's cancellation leaves it blocked, the new one's ends it.
TEST_P(NetContextTest, ABlockedCallFollowsTheSocketsNewBinding) {
  weft::run(
      [] {
        TcpPair p = tcp_pair();
        auto [old_ctx, cancel_old] = weft::with_cancel(weft::background());
        auto [new_ctx, cancel_new] = weft::with_cancel(weft::background());
        p.client.set_context(old_ctx);
        auto reader = weft::spawn([&] {
          char buf[16];
          return p.client.read(buf, sizeof buf).status();
        });
        ASSERT_TRUE(eventually([&] { return parked_on("io read", {reader.id()}); }));
        p.client.set_context(new_ctx);
        cancel_old();  // no longer bound: nothing wakes the reader
        EXPECT_TRUE(parked_on("io read", {reader.id()}));
        EXPECT_TRUE(p.client.context().err().ok());
        cancel_new();
        absl::Status st = reader.join();
        EXPECT_EQ(st.code(), StatusCode::kCancelled) << st;
      },
      opts());
}

// A moved socket keeps its binding; a closed one leaves its descriptor unbound for the sockets
// that reuse it. Descriptors are reused first-in first-out from a table of 4096 per chunk, so
// 4200 sockets opened and closed one at a time after the close reuse it in a process that never
// held more than a chunk's worth (as each test here runs alone under ctest).
TEST_P(NetContextTest, AMovedSocketKeepsItsBindingAndAClosedOneLeavesNone) {
  weft::run(
      [] {
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        net::UdpSocket bound = must(net::listen_udp("127.0.0.1:0"), "udp");
        bound.set_context(ctx);
        cancel();
        net::UdpSocket moved = std::move(bound);
        const std::string self = moved.local_addr();
        absl::Status st = moved.send_to(std::string_view("x"), self);
        EXPECT_EQ(st.code(), StatusCode::kCancelled) << st;
        EXPECT_EQ(moved.context().err().code(), StatusCode::kCancelled);
        EXPECT_TRUE(bound.context().err().ok());  // the moved-from socket has none
        moved.close();
        for (int i = 0; i < 4200; ++i) {
          net::UdpSocket u = must(net::listen_udp("127.0.0.1:0"), "udp");
          const std::string me = u.local_addr();
          absl::Status sent = u.send_to(std::string_view("y"), me);
          ASSERT_TRUE(sent.ok()) << "socket " << i << ": " << sent;
        }
      },
      opts());
}

// select over a socket bound to a context fires when the context is done (weft/net.hpp), and
// the call made in the case reports why.
TEST_P(NetContextTest, ASelectOnABoundSocketFiresWhenTheContextIsDone) {
  weft::run(
      [] {
        TcpPair p = tcp_pair();
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        p.client.set_context(ctx);
        weft::Chan<int> never;
        auto selector = weft::spawn([&] {
          absl::Status st;
          weft::select(weft::case_recv(never), weft::net::case_readable(p.client, [&] {
                         char buf[16];
                         st = p.client.read(buf, sizeof buf).status();
                       }));
          return st;
        });
        ASSERT_TRUE(eventually([&] { return parked_on("select", {selector.id()}); }));
        cancel();
        absl::Status st = selector.join();
        EXPECT_EQ(st.code(), StatusCode::kCancelled) << st;
        // Already done: a new select on it fires at once.
        EXPECT_EQ(weft::select(weft::case_recv(never), weft::net::case_readable(p.client)), 1u);
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
