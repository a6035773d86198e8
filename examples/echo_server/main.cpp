// echo_server: a TCP echo server in plain blocking style, one fiber per connection.
//
//   echo_server --listen=127.0.0.1:7000 [--workers=N] [--stats_every=1s] [--reuse_port]
//               [--idle_timeout=1h] [--write_timeout=30s] [--max_conns=0] [--drain_grace=1s]
//
// Hostile clients: a connection that sends nothing for --idle_timeout is closed quietly
// (examples/common/read_timeouts.hpp); one whose peer takes none of the echoed bytes for
// --write_timeout is closed (examples/common/write_bounds.hpp: a client that sends and never
// reads); past --max_conns connections at once a newcomer is closed at once, unanswered
// (examples/common/connection_cap.hpp). The idle default is generous because holding many idle
// connections is what the showcase and the soak do (scripts/showcase.sh idles them, and
// weft-loadgen's idle connections stay idle for the whole of a long run); --max_conns defaults to
// what the fd limit allows minus the fds kept to refuse with, so it never cuts the showcase's
// per-process counts. Each connection echoes what one read brought before it reads again, so its
// output budget is its 4 KiB buffer: no output queue builds up.
//
// Prints "listening on HOST:PORT" once it accepts connections. SIGINT/SIGTERM drain it
// (weft::net::Server): it stops accepting, lets connections finish for up to --drain_grace, then
// cancels the rest through their context (their blocked reads fail) and exits. With --stats_every
// it prints a `stats` line (connections, fibers, RSS) periodically; the showcase reads them. With
// --reuse_port several server processes share one port (SO_REUSEPORT), each holding its own
// share of the connections: how the showcase goes past one process's fd limit.
#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/time/time.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <weft/weft.hpp>

#include "common/connection_cap.hpp"
#include "common/listen_announced.hpp"
#include "common/process_stats.hpp"
#include "common/read_timeouts.hpp"
#include "common/shutdown_signal.hpp"
#include "common/write_bounds.hpp"

ABSL_FLAG(std::string, listen, "127.0.0.1:7000", "address to listen on, HOST:PORT");
ABSL_FLAG(int, workers, 0, "weft workers (0: all CPUs)");
ABSL_FLAG(absl::Duration, stats_every, absl::ZeroDuration(), "print a stats line this often");
ABSL_FLAG(bool, reuse_port, false,
          "listen with SO_REUSEPORT, so that several server processes share the port");
ABSL_FLAG(absl::Duration, drain_grace, absl::Seconds(1),
          "on SIGINT/SIGTERM, how long connections may finish before they are cancelled");
ABSL_FLAG(absl::Duration, idle_timeout, absl::Hours(1),
          "close a connection that sends nothing for this long (0: never)");
ABSL_FLAG(absl::Duration, write_timeout, absl::FromChrono(examples::WriteBounds::kDefaultTimeout),
          "close a connection whose peer takes none of the echoed bytes for this long, a client "
          "that sends and never reads (0: never)");
ABSL_FLAG(std::size_t, max_conns, 0,
          "connections served at once; past it a newcomer is closed unanswered (lowered to fit the "
          "fd limit; 0: as many as the fd limit allows)");

namespace {

std::atomic<std::int64_t> g_conns{0};
std::atomic<std::uint64_t> g_accepted{0};

struct Bounds {
  std::chrono::nanoseconds idle, write;
};

void serve(weft::net::TcpStream& conn, const Bounds& bounds) {
  g_conns.fetch_add(1, std::memory_order_relaxed);
  struct Gone {
    ~Gone() { g_conns.fetch_sub(1, std::memory_order_relaxed); }
  } gone;  // also when the handler is cancelled by a drain
  // On the fiber's stack, the size a user would pick: the benchmarks compare this handler with
  // Go's written the same way (a 4 KiB buffer). It straddles two stack pages; once the
  // connection has idled past Options::hibernate_after (1 s), the runtime gives them back and
  // keeps only their non-zero bytes (stack hibernation), bringing them back on the next read.
  char buf[4096];
  // No requests to time: only the idle wait before each read is bounded. Both bounds are lazy, so
  // a busy connection costs a clock read per read and per write, not a timer operation.
  examples::ReadTimeouts timeouts(bounds.idle, std::chrono::nanoseconds::zero());
  examples::WriteBounds writes(bounds.write, sizeof buf, 0);
  for (;;) {
    timeouts.wait_for_request();
    timeouts.arm(conn);
    absl::StatusOr<std::size_t> n = conn.read(buf, sizeof buf);
    if (!n.ok() && n.status().code() == absl::StatusCode::kDeadlineExceeded &&
        !timeouts.expired(conn)) {
      n = conn.read(buf, sizeof buf);  // only an earlier deadline passed: the stream has the bound
    }
    // Peer gone (or reset), idle past the bound, or cancelled: nothing to report per connection.
    if (!n.ok() || *n == 0) return;
    if (!writes.write_all(conn, std::string_view(buf, *n)).ok()) return;
  }
}

void print_stats(const char* what) {
  const weft::Stats st = weft::stats();
  std::printf("%s: conns=%" PRId64 " accepted=%" PRIu64 " fibers=%" PRIu64 " rss_bytes=%" PRIu64
              " spawned=%" PRIu64 " switches=%" PRIu64 " parks=%" PRIu64 " steals=%" PRIu64
              " workers=%" PRIu64 " stacks_in_use=%" PRIu64 " stacks_cached=%" PRIu64
              " stack_bytes_reserved=%" PRIu64 " timers_fired=%" PRIu64 " blocking_jobs=%" PRIu64
              " blocking_threads=%" PRIu64 " watchdog_reports=%" PRIu64 "\n",
              what, g_conns.load(), g_accepted.load(), st.fibers_alive, examples::rss_bytes(),
              st.fibers_spawned, st.switches, st.parks, st.steals, st.workers, st.stacks_in_use,
              st.stacks_cached, st.stack_bytes_reserved, st.timers_fired, st.blocking_jobs,
              st.blocking_threads, st.watchdog_reports);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("TCP echo server on weft");
  absl::ParseCommandLine(argc, argv);
  examples::ShutdownSignal signals;  // before run(): worker threads inherit the signal mask
  int rc = 0;
  weft::run(
      [&] {
        weft::net::ListenOptions listen_options;
        listen_options.reuse_port = absl::GetFlag(FLAGS_reuse_port);
        std::optional<weft::net::TcpListener> l =
            examples::listen_announced("echo_server", absl::GetFlag(FLAGS_listen), listen_options);
        if (!l) {
          rc = 1;
          return;
        }
        weft::net::Server server(std::move(*l));
        examples::ConnectionCap cap("echo_server", "--max_conns", absl::GetFlag(FLAGS_max_conns));
        const Bounds bounds{absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_idle_timeout)),
                            absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_write_timeout))};
        // Joined before `server` goes away: serve() returns once drain() stopped accepting.
        // Each kind of fiber has a name, so a stack-size table (WEFT_STACK_SIZES, written by
        // `weft-stackprof sizes` from a profiled run) can give each kind its own stack size.
        weft::Task<absl::Status> serving =
            weft::spawn(weft::FiberOptions{.name = "echo-accept"}, [&] {
              return server.serve(
                  [&](weft::net::TcpStream& s, const weft::Context&) {
                    g_accepted.fetch_add(1, std::memory_order_relaxed);
                    // Past the cap: closed unanswered (an echo has nothing to say), so that the
                    // fds kept out of the cap are there for the next newcomer.
                    std::optional<examples::ConnectionCap::Slot> slot = cap.try_admit();
                    if (!slot) return;
                    // The stream is bound to the server's context: a drain cancels reads.
                    serve(s, bounds);
                  },
                  weft::FiberOptions{.name = "echo-conn"});
            });
        if (const absl::Duration every = absl::GetFlag(FLAGS_stats_every);
            every > absl::ZeroDuration()) {
          weft::go(weft::FiberOptions{.name = "echo-stats"}, [every] {
            weft::Ticker t(absl::ToChronoNanoseconds(every));
            for (;;) {
              t.chan().recv();
              print_stats("stats");
            }
          });
        }
        const int sig = signals.wait();
        std::printf("echo_server: signal %d, shutting down\n", sig);
        print_stats("final");
        const absl::Status drained =
            server.drain(absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_drain_grace)));
        std::printf("echo_server: drained: %s\n", std::string(drained.ToString()).c_str());
        if (absl::Status s = serving.join(); !s.ok()) {
          std::fprintf(stderr, "echo_server: accepting failed: %s\n",
                       std::string(s.ToString()).c_str());
          rc = 1;
        }
      },
      weft::Options{.workers = static_cast<unsigned>(std::max(0, absl::GetFlag(FLAGS_workers)))});
  return rc;
}
