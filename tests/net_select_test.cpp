// select over sockets (weft::net::case_readable / case_writable) under workers = 1, 2, 4 and 8:
// a parked select wakes for data, for a channel value, for a close from another fiber and for its
// timeout; a readiness that a losing case saw is not lost (the next read finds the data); a fresh
// socket is writable at once; a listener is readable when a connection waits; one fiber serves a
// socket and a channel together (the chat-server shape), with many messages racing both ways.
// Waiters are acted on only once they are seen parked in select; orders are asserted, never
// durations.
#include <weft/weft.hpp>

#include "net_test_util.hpp"
#include "test_util.hpp"

namespace {

using namespace weft_test;
using namespace weft_net_test;
using absl::StatusCode;

class NetSelectTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(NetSelectTest);

TEST_P(NetSelectTest, AParkedSelectWakesForDataAndTheReadGetsIt) {
  weft::run(
      [] {
        TcpPair p = tcp_pair();
        weft::Chan<int> never;
        auto selector = weft::spawn([&] {
          std::string got;
          const std::size_t i =
              weft::select(weft::case_recv(never), weft::net::case_readable(p.client, [&] {
                             char buf[16];
                             auto n = p.client.read(buf, sizeof buf);
                             if (n.ok()) got.assign(buf, *n);
                           }));
          return std::pair(i, got);
        });
        ASSERT_TRUE(eventually([&] { return parked_on("select", {selector.id()}); }));
        ASSERT_TRUE(p.server.write_all("data").ok());
        auto [i, got] = selector.join();
        EXPECT_EQ(i, 1u);
        EXPECT_EQ(got, "data");
      },
      opts());
}

TEST_P(NetSelectTest, AChannelWinsAndTheSocketsReadinessIsNotLost) {
  weft::run(
      [] {
        TcpPair p = tcp_pair();
        weft::Chan<int> ch(1);
        auto selector = weft::spawn(
            [&] { return weft::select(weft::net::case_readable(p.client), weft::case_recv(ch)); });
        ASSERT_TRUE(eventually([&] { return parked_on("select", {selector.id()}); }));
        ch.send(7);
        EXPECT_EQ(selector.join(), 1u);
        // Data now: a new select sees it, and the read gets it.
        ASSERT_TRUE(p.server.write_all("later").ok());
        EXPECT_EQ(weft::select(weft::net::case_readable(p.client), weft::case_recv(ch)), 0u);
        EXPECT_EQ(must(read_exactly(p.client, 5), "read"), "later");
        // Data that a select's read left behind (no new edge) is still seen as readable.
        ASSERT_TRUE(p.server.write_all("abcdef").ok());
        EXPECT_EQ(weft::select(weft::net::case_readable(p.client)), 0u);
        EXPECT_EQ(must(read_exactly(p.client, 3), "read"), "abc");
        EXPECT_EQ(weft::select(weft::net::case_readable(p.client), weft::case_recv(ch)), 0u);
        EXPECT_EQ(must(read_exactly(p.client, 3), "read"), "def");
      },
      opts());
}

TEST_P(NetSelectTest, CloseFromAnotherFiberFiresTheCaseAndTheCallReportsIt) {
  weft::run(
      [] {
        TcpPair p = tcp_pair();
        auto selector = weft::spawn([&] {
          const std::size_t i = weft::select(weft::net::case_readable(p.client));
          char buf[4];
          return std::pair(i, p.client.read(buf, sizeof buf).status());
        });
        ASSERT_TRUE(eventually([&] { return parked_on("select", {selector.id()}); }));
        p.client.close();
        auto [i, st] = selector.join();
        EXPECT_EQ(i, 0u);
        EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st;
      },
      opts());
}

TEST_P(NetSelectTest, TimeoutWritableAndAcceptReadiness) {
  weft::run(
      [] {
        TcpPair p = tcp_pair();
        // Nothing to read: the timeout case fires.
        EXPECT_EQ(weft::select(weft::net::case_readable(p.client), weft::case_timeout(2ms)), 1u);
        // A fresh connection can be written at once.
        EXPECT_EQ(weft::select(weft::net::case_writable(p.client), weft::case_timeout(kIoBound)),
                  0u);
        // With case_default, a socket without data is not ready.
        EXPECT_EQ(weft::select(weft::net::case_readable(p.client), weft::case_default()), 1u);
        // A listener is readable when a connection waits to be accepted.
        net::TcpListener l = must(net::listen_tcp("127.0.0.1:0"), "listen");
        auto acceptor = weft::spawn([&] {
          const std::size_t i = weft::select(weft::net::case_readable(l));
          return std::pair(i, l.accept().ok());
        });
        ASSERT_TRUE(eventually([&] { return parked_on("select", {acceptor.id()}); }));
        net::TcpStream c = must(net::dial_tcp(l.local_addr(), kIoBound), "dial");
        auto [i, ok] = acceptor.join();
        EXPECT_EQ(i, 0u);
        EXPECT_TRUE(ok);
        // A read and a select waiting on the same direction at once: the second to wait is
        // refused. "Parked in select" is seen before the select has armed its socket case (the
        // park's commit arms it), so either may come second. When the select came second it
        // returns at once and its own read is the call that reports the conflict; it then writes
        // the byte the test's read waits for.
        auto selector = weft::spawn([&] {
          const std::size_t i = weft::select(weft::net::case_readable(p.server));
          char b[4];
          absl::StatusOr<std::size_t> n = p.server.read(b, sizeof b);
          if (!n.ok()) must_ok(p.client.write_all("x"), "write");
          return std::pair(i, n.status().code());
        });
        ASSERT_TRUE(eventually([&] { return parked_on("select", {selector.id()}); }));
        char b[4];
        absl::StatusOr<std::size_t> n = p.server.read(b, sizeof b);
        if (!n.ok()) {
          EXPECT_EQ(n.status().code(), StatusCode::kFailedPrecondition) << n.status();
          ASSERT_TRUE(p.client.write_all("x").ok());  // the select fires; its read gets it
        }
        auto [fired, code] = selector.join();
        EXPECT_EQ(fired, 0u);
        // Exactly one of the two reads was refused; the other got the byte.
        if (n.ok()) {
          EXPECT_EQ(*n, 1u);
          EXPECT_EQ(code, StatusCode::kFailedPrecondition);
        } else {
          EXPECT_EQ(code, StatusCode::kOk);
        }
      },
      opts());
}

// A reader and a select on one socket direction at once (a misuse each call may report), over
// many edges: the reader, woken by an edge, must not take back a side a select armed meanwhile
// (it wiped the select's hook: the select slept or spun for ever, and the reader lost the edge).
// What is guaranteed: every byte is read, each refused read says FAILED_PRECONDITION, nobody hangs.
TEST_P(NetSelectTest, AReaderAndASelectOnOneSideLoseNoEdgeAndNeverHang) {
  weft::run(
      [] {
        constexpr int kBytes = kSanitized ? 300 : 3000;
        TcpPair p = tcp_pair();
        std::atomic<int> got{0};
        std::atomic<bool> done{false};
        weft::Chan<int> ack;  // one per byte read; closed when the reader ends
        auto reader = weft::spawn([&] {
          struct CloseAck {
            weft::Chan<int>& c;
            ~CloseAck() { c.close(); }
          } close_ack{ack};
          while (got.load() < kBytes) {
            char b[1];
            absl::StatusOr<std::size_t> n = p.server.read(b, sizeof b);
            if (n.ok()) {
              ASSERT_EQ(*n, 1u);
              got.fetch_add(1);
              ack.send(1);
            } else {
              ASSERT_EQ(n.status().code(), StatusCode::kFailedPrecondition) << n.status();
              weft::this_fiber::yield();
            }
          }
        });
        auto selector = weft::spawn([&] {
          while (!done.load()) {
            weft::select(weft::net::case_readable(p.server), weft::case_timeout(1ms));
            weft::this_fiber::yield();
          }
        });
        for (int i = 0; i < kBytes; ++i) {
          ASSERT_TRUE(p.client.write_all("x").ok());
          ASSERT_TRUE(ack.recv().has_value()) << "the reader ended after " << i << " bytes";
        }
        reader.join();
        done.store(true);
        selector.join();
        EXPECT_EQ(got.load(), kBytes);
      },
      opts());
}

// One fiber per connection serving both its socket and an outbound channel: what chat_server's
// two fibers per client become. Many messages race in both directions; every one arrives.
TEST_P(NetSelectTest, OneFiberServesASocketAndAChannelTogether) {
  weft::run(
      [] {
        constexpr int kMessages = kSanitized ? 300 : 2000;
        TcpPair p = tcp_pair();
        weft::Chan<std::string> outbound(16);
        std::atomic<int> inbound_lines{0};
        auto server = weft::spawn([&] {
          std::string pending;
          bool open = true, out_open = true;
          while (open || out_open) {
            weft::select(weft::net::case_readable(p.server,
                                                  [&] {
                                                    char buf[256];
                                                    auto n = p.server.read(buf, sizeof buf);
                                                    if (!n.ok() || *n == 0) {
                                                      open = false;
                                                      return;
                                                    }
                                                    for (std::size_t k = 0; k < *n; ++k) {
                                                      if (buf[k] == '\n')
                                                        inbound_lines.fetch_add(1);
                                                    }
                                                  }),
                         weft::case_recv(out_open ? outbound : weft::Chan<std::string>(nullptr),
                                         [&](std::optional<std::string> m) {
                                           if (!m) {
                                             out_open = false;
                                             (void)p.server.shutdown_write();
                                             return;
                                           }
                                           (void)p.server.write_all(*m);
                                         }));
            if (!open && out_open) {
              // The peer finished sending; drain what is still to go out.
              for (std::string m : outbound) (void)p.server.write_all(m);
              out_open = false;
              (void)p.server.shutdown_write();
            }
          }
        });
        auto producer = weft::spawn([&] {
          for (int i = 0; i < kMessages; ++i) outbound.send("out-" + std::to_string(i) + "\n");
          outbound.close();
        });
        auto writer = weft::spawn([&] {
          for (int i = 0; i < kMessages; ++i) {
            if (!p.client.write_all("in-" + std::to_string(i) + "\n").ok()) return;
          }
          (void)p.client.shutdown_write();
        });
        absl::StatusOr<std::string> all = read_to_eof(p.client);
        ASSERT_TRUE(all.ok()) << all.status();
        EXPECT_EQ(count_occurrences(*all, "\n"), static_cast<std::size_t>(kMessages));
        producer.join();
        writer.join();
        server.join();
        EXPECT_EQ(inbound_lines.load(), kMessages);
      },
      opts());
}

}  // namespace
