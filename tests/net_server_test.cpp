// weft::net::Server's graceful drain (weft/server.hpp) under workers = 1, 2, 4 and 8: a request in
// flight when drain() starts completes and drain returns OK; new connections are refused once
// drain began; a connection that stays past the grace period is cancelled through its context
// (its blocked read fails with kCancelled) and drain reports it; no handler outlives drain(), and
// no fiber is left behind. Orders are asserted (who finished before whom), never durations.
#include <weft/weft.hpp>

#include "net_test_util.hpp"
#include "test_util.hpp"

namespace {

using namespace weft_test;
using namespace weft_net_test;
using absl::StatusCode;

class NetServerTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(NetServerTest);

TEST_P(NetServerTest, DrainLetsAnInFlightRequestFinishAndRefusesNewConnections) {
  weft::run(
      [] {
        net::Server srv(must(net::listen_tcp("127.0.0.1:0"), "listen"));
        const std::string addr = srv.local_addr();
        weft::Chan<int> got_request(1);
        weft::Chan<int> may_reply(1);
        auto server = weft::spawn([&] {
          return srv.serve([&](net::TcpStream& s, const weft::Context&) {
            char buf[5];
            if (!s.read_full(std::as_writable_bytes(std::span(buf))).ok()) return;
            got_request.send(1);
            may_reply.recv();  // the "work", released only after drain() has begun
            (void)s.write_all("reply");
          });
        });
        net::TcpStream c = must(net::dial_tcp(addr, kIoBound), "dial");
        c.set_deadline(in(kIoBound));
        ASSERT_TRUE(c.write_all("hello").ok());
        got_request.recv();
        auto drainer = weft::spawn([&] { return srv.drain(kIoBound); });
        // serve() returns once drain stopped accepting; the handler is still running.
        EXPECT_TRUE(server.join().ok());
        EXPECT_EQ(srv.active(), 1u);
        EXPECT_FALSE(net::dial_tcp(addr, kIoBound).ok()) << "accepted after drain began";
        may_reply.send(1);
        EXPECT_EQ(must(read_exactly(c, 5), "read"), "reply");
        EXPECT_TRUE(drainer.join().ok());
        EXPECT_EQ(srv.active(), 0u);
        EXPECT_TRUE(srv.connection_context().err().ok());  // nobody had to be cancelled
      },
      opts());
}

TEST_P(NetServerTest, DrainCancelsConnectionsThatOutstayTheGracePeriod) {
  weft::run(
      [] {
        const std::uint64_t fibers_before = weft::stats().fibers_alive;
        absl::Status handler_saw;
        {
          net::Server srv(must(net::listen_tcp("127.0.0.1:0"), "listen"));
          weft::Chan<int> reading(1);
          auto server = weft::spawn([&] {
            return srv.serve([&](net::TcpStream& s, const weft::Context& ctx) {
              reading.send(1);
              char buf[16];
              absl::StatusOr<std::size_t> n = s.read(buf, sizeof buf);  // the client never writes
              handler_saw = n.status();
              EXPECT_FALSE(ctx.err().ok());
            });
          });
          net::TcpStream idle = must(net::dial_tcp(srv.local_addr(), kIoBound), "dial");
          reading.recv();
          absl::Status st = srv.drain(5ms);
          EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st;
          EXPECT_TRUE(contains_ci(text(st), "1 connection")) << st;
          // drain returned only after the handler did.
          EXPECT_EQ(handler_saw.code(), StatusCode::kCancelled) << handler_saw;
          EXPECT_EQ(srv.active(), 0u);
          EXPECT_TRUE(server.join().ok());
          EXPECT_TRUE(srv.drain(5ms).ok());  // idempotent: nothing left
          // The server closed its end: the idle client reads end of stream.
          idle.set_deadline(in(kIoBound));
          char b[4];
          absl::StatusOr<std::size_t> n = idle.read(b, sizeof b);
          EXPECT_TRUE(!n.ok() || *n == 0);
        }
        EXPECT_TRUE(eventually([&] { return weft::stats().fibers_alive <= fibers_before; }));
      },
      opts());
}

TEST_P(NetServerTest, ASecondServeIsRefusedAndDrainBeforeServeIsHarmless) {
  weft::run(
      [] {
        net::Server srv(must(net::listen_tcp("127.0.0.1:0"), "listen"));
        EXPECT_TRUE(srv.drain(1ms).ok());
        auto handler = [](net::TcpStream&, const weft::Context&) {};
        EXPECT_TRUE(srv.serve(handler).ok());  // drained already: returns at once
        EXPECT_EQ(srv.serve(handler).code(), StatusCode::kFailedPrecondition);
      },
      opts());
}

}  // namespace
