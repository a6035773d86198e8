// weft-loadgen: a closed-loop load generator written with weft itself, in blocking style: one
// fiber per connection, each doing write -> read -> record latency in a loop.
//
//   weft-loadgen --addr=127.0.0.1:7000 --conns=10000 --duration=10s                 # echo
//   weft-loadgen --addr=127.0.0.1:8080 --mode=http --conns=200 --duration=10s       # HTTP/1.1
//
// Phases: ramp (dial every connection, with a live progress bar and a bounded number of dials in
// flight so the server's backlog is not overrun), traffic (all connections start together when
// a channel is closed, and run closed-loop for --duration), report (req/s and latency
// percentiles; a `LOADGEN key=value ...` line for scripts). With --hold the connections stay open
// afterwards (the showcase measures the server's memory while they are held). At the end every
// connection is checked (TCP_INFO: still ESTABLISHED, neither reset nor closed by the server):
// the summary's "held" counts those, and "lost" the ones opened that did not last -- an idle
// connection is never touched during the run, so only this check can see that it died.
//
// Source addresses: one (source IP, destination) pair has only ~28k ephemeral ports. Toward a
// loopback destination, connections are spread over --sources addresses of 127.0.0.0/8
// (127.0.1.1, 127.0.1.2, ...), which Linux routes to lo without any setup, so N is not capped by
// the port range. The fd limit caps N: the generator raises its soft limit to the hard one and
// says plainly how many connections that allows. Several generator processes (the showcase's
// multi-process mode) take disjoint source addresses with --source_base.
//
// TLS: --tls dials with weft::tls (TLS 1.2/1.3; the certificate is not verified, since a
// benchmark's server runs with a throwaway one; sessions are not resumed, so every connection
// pays a full handshake), for the HTTPS benchmarks and idle TLS connections.
//
// Coordination with a script running several generators: --start_on_sigusr1 makes the generator
// print "RAMPED conns=N" after the ramp and wait for SIGUSR1 before its traffic, so every
// process holds its connections at the same moment; --histogram_out writes the latency
// histogram ("VALUE_NS COUNT" per non-empty bucket) so the script can merge percentiles.
#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/strings/str_cat.h>
#include <absl/time/time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <weft/weft.hpp>

#include "histogram.hpp"

ABSL_FLAG(std::string, addr, "127.0.0.1:7000", "server address, HOST:PORT");
ABSL_FLAG(int, conns, 100, "connections to open and hold");
ABSL_FLAG(int, active, 0, "connections that push traffic (0: all of them)");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "length of the traffic phase");
ABSL_FLAG(absl::Duration, hold, absl::ZeroDuration(),
          "keep the connections open this long after "
          "the traffic phase");
ABSL_FLAG(std::string, mode, "echo", "echo (fixed-size messages echoed back) or http (GET)");
ABSL_FLAG(int, size, 64, "echo message size in bytes");
ABSL_FLAG(std::string, path, "/", "HTTP request path");
ABSL_FLAG(int, workers, 0, "weft workers (0: all CPUs)");
ABSL_FLAG(int, sources, -1,
          "source addresses in 127.0.0.0/8 to spread connections over "
          "(-1: automatic, one per 20000 connections toward a loopback "
          "destination; 0: let the kernel choose)");
ABSL_FLAG(int, source_base, 0,
          "index of the first source address (127.0.1.1 is 0): generators running side by side "
          "take disjoint ranges");
ABSL_FLAG(bool, start_on_sigusr1, false,
          "after the ramp, print \"RAMPED conns=N\" and wait for SIGUSR1 before the traffic");
ABSL_FLAG(std::string, histogram_out, "",
          "write the latency histogram here: one \"VALUE_NS COUNT\" line per non-empty bucket");
ABSL_FLAG(int, dial_concurrency, 512, "dials in flight at once during the ramp");
ABSL_FLAG(absl::Duration, dial_timeout, absl::Seconds(10), "timeout of each dial");
ABSL_FLAG(bool, progress, true, "show a progress bar while connections ramp up");
ABSL_FLAG(bool, tls, false,
          "TLS (weft::tls) over each connection; the certificate is not verified");

namespace {

using Clock = std::chrono::steady_clock;
using loadgen::LatencyHistogram;

constexpr int kShards = 64;

struct Shared {
  std::string addr;
  bool http = false;
  std::string request;  // http: the request bytes; echo: the message
  int echo_size = 64;
  std::vector<std::string> sources;
  std::unique_ptr<LatencyHistogram[]> hist = std::make_unique<LatencyHistogram[]>(kShards);
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<int> connected{0};
  std::atomic<int> held_at_end{0};  // of `connected`, those still established at the end
  std::atomic<int> dial_failed{0};
  std::atomic<bool> stop{false};
  weft::Mutex first_error_mu;
  std::string first_error;

  void note_error(const absl::Status& s) {
    errors.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(first_error_mu);
    if (first_error.empty()) first_error = std::string(s.ToString());
  }
};

std::string describe(const absl::Status& s) { return std::string(s.ToString()); }

// The kernel's view of a connection: ESTABLISHED, not reset, not closed by the peer (a FIN
// leaves CLOSE_WAIT). Cheap enough for every connection at the end of a run.
bool still_established(int fd) {
  tcp_info ti{};
  socklen_t len = sizeof ti;
  return fd >= 0 && getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
         ti.tcpi_state == TCP_ESTABLISHED;
}

// Reads one HTTP/1.1 response with a Content-Length body; `buf` keeps bytes read past it.
template <class Stream>
absl::Status read_http_response(Stream& s, std::string& buf) {
  std::size_t header_end;
  for (;;) {
    header_end = buf.find("\r\n\r\n");
    if (header_end != std::string::npos) break;
    char tmp[2048];
    absl::StatusOr<std::size_t> n = s.read(tmp, sizeof tmp);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::UnavailableError("http: connection closed before a response");
    buf.append(tmp, *n);
    if (buf.size() > 64 * 1024) return absl::InternalError("http: response header too large");
  }
  std::size_t content_length = 0;
  bool have_length = false;
  for (std::size_t line = buf.find("\r\n") + 2; line < header_end;) {
    const std::size_t eol = buf.find("\r\n", line);
    const std::size_t colon = buf.find(':', line);
    if (colon != std::string::npos && colon < eol && colon - line == 14 &&
        strncasecmp(buf.data() + line, "content-length", 14) == 0) {
      content_length = std::strtoull(buf.c_str() + colon + 1, nullptr, 10);
      have_length = true;
    }
    line = eol + 2;
  }
  if (!have_length) {
    return absl::UnimplementedError("http: response without Content-Length (keep-alive needs it)");
  }
  const std::size_t total = header_end + 4 + content_length;
  while (buf.size() < total) {
    char tmp[2048];
    absl::StatusOr<std::size_t> n = s.read(tmp, sizeof tmp);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::UnavailableError("http: connection closed inside a body");
    buf.append(tmp, *n);
  }
  buf.erase(0, total);
  return absl::OkStatus();
}

template <class Stream>
void run_traffic(Shared& sh, Stream& s, int id) {
  LatencyHistogram& h = sh.hist[id % kShards];
  std::uint64_t done = 0;
  std::string http_buf;
  std::vector<char> reply(sh.http ? 0 : static_cast<std::size_t>(sh.echo_size));
  while (!sh.stop.load(std::memory_order_relaxed)) {
    const auto t0 = Clock::now();
    absl::Status st = s.write_all(sh.request);
    if (st.ok()) {
      st = sh.http ? read_http_response(s, http_buf)
                   : s.read_full(std::as_writable_bytes(std::span(reply.data(), reply.size())));
    }
    if (!st.ok()) {
      if (!sh.stop.load(std::memory_order_relaxed)) sh.note_error(st);
      break;
    }
    h.record(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()));
    ++done;
  }
  sh.requests.fetch_add(done, std::memory_order_relaxed);
}

void print_progress(int done, int failed, int total, bool final_line) {
  constexpr int kWidth = 40;
  const int filled = total > 0 ? static_cast<int>(static_cast<long>(kWidth) * done / total) : 0;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r[%s] %d/%d connected, %d failed%s", bar.c_str(), done, total, failed,
               final_line ? "\n" : "");
  std::fflush(stderr);
}

bool is_loopback(const std::string& addr) {
  return addr.rfind("127.", 0) == 0 || addr.rfind("localhost:", 0) == 0;
}

int fd_budget(int wanted) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  const long usable = static_cast<long>(rl.rlim_cur) - 64;  // stdio, epoll, eventfd, resolver
  if (wanted > usable) {
    std::fprintf(stderr,
                 "loadgen: capped at %ld connections: RLIMIT_NOFILE allows %llu open files in "
                 "this process (hard limit; raise it with `ulimit -Hn` as root, or run on a "
                 "machine that allows %d)\n",
                 usable, static_cast<unsigned long long>(rl.rlim_cur), wanted + 64);
    return static_cast<int>(std::max(0L, usable));
  }
  return wanted;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("closed-loop echo / HTTP load generator built on weft");
  absl::ParseCommandLine(argc, argv);
  Shared sh;
  sh.addr = absl::GetFlag(FLAGS_addr);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode != "echo" && mode != "http") {
    std::fprintf(stderr, "loadgen: --mode must be echo or http, not \"%s\"\n", mode.c_str());
    return 2;
  }
  sh.http = mode == "http";
  sh.echo_size = std::max(1, absl::GetFlag(FLAGS_size));
  if (sh.http) {
    sh.request = absl::StrCat("GET ", absl::GetFlag(FLAGS_path), " HTTP/1.1\r\nHost: ", sh.addr,
                              "\r\nUser-Agent: weft-loadgen\r\n\r\n");
  } else {
    sh.request.assign(static_cast<std::size_t>(sh.echo_size), 'x');
  }
  const int requested = absl::GetFlag(FLAGS_conns);
  const int conns = fd_budget(requested);
  int active = absl::GetFlag(FLAGS_active);
  if (active <= 0 || active > conns) active = conns;
  int nsources = absl::GetFlag(FLAGS_sources);
  if (nsources < 0) nsources = is_loopback(sh.addr) && conns > 20000 ? (conns + 19999) / 20000 : 0;
  const int source_base = std::max(0, absl::GetFlag(FLAGS_source_base));
  if (nsources > 0 && source_base + nsources > 250 * 250) {
    std::fprintf(stderr, "loadgen: --source_base=%d --sources=%d goes past 127.0.250.250\n",
                 source_base, nsources);
    return 2;
  }
  for (int i = source_base; i < source_base + nsources; ++i) {
    sh.sources.push_back(absl::StrCat("127.0.", 1 + i / 250, ".", 1 + i % 250));
  }
  // Blocked before run() so that every worker thread inherits the mask; read via a signalfd.
  int start_sigfd = -1;
  if (absl::GetFlag(FLAGS_start_on_sigusr1)) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    start_sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (start_sigfd < 0) {
      std::perror("loadgen: signalfd");
      return 2;
    }
  }
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  const absl::Duration hold = absl::GetFlag(FLAGS_hold);
  const bool progress = absl::GetFlag(FLAGS_progress);
  const auto dial_timeout = absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_dial_timeout));
  const int dial_concurrency = std::max(1, absl::GetFlag(FLAGS_dial_concurrency));

  std::fprintf(stderr, "loadgen: %s %s, %d connections (%d pushing traffic), %d source address%s\n",
               mode.c_str(), sh.addr.c_str(), conns, active, nsources, nsources == 1 ? "" : "es");
  struct Outcome {
    double ramp_s = 0, traffic_s = 0;
  } out;
  std::optional<weft::tls::ClientContext> tls;
  if (absl::GetFlag(FLAGS_tls)) {
    weft::tls::ClientConfig cfg;
    cfg.verify = false;
    cfg.session_cache_size = 0;
    if (sh.http) cfg.alpn = {"http/1.1"};
    absl::StatusOr<weft::tls::ClientContext> c = weft::tls::ClientContext::create(cfg);
    if (!c.ok()) {
      std::fprintf(stderr, "loadgen: %s\n", describe(c.status()).c_str());
      return 2;
    }
    tls = std::move(*c);
  }
  const unsigned workers = static_cast<unsigned>(std::max(0, absl::GetFlag(FLAGS_workers)));
  weft::run(
      [&] {
        weft::Chan<int> start;   // closed: traffic begins
        weft::Chan<int> finish;  // closed: connections may close (after --hold)
        weft::Semaphore dial_slots(dial_concurrency);
        weft::WaitGroup dialed, finished_traffic, closed;
        dialed.add(conns);
        finished_traffic.add(conns);
        closed.add(conns);
        const auto ramp_start = Clock::now();
        // One connection's life, over a TcpStream or a TlsStream.
        auto connection = [&](int i, auto dial) {
          weft::net::DialOptions opts;
          opts.timeout = dial_timeout;
          if (!sh.sources.empty()) opts.local_addr = sh.sources[i % sh.sources.size()];
          dial_slots.acquire();
          auto s = dial(opts);
          dial_slots.release();
          if (s.ok()) {
            sh.connected.fetch_add(1, std::memory_order_relaxed);
          } else {
            if (sh.dial_failed.fetch_add(1, std::memory_order_relaxed) == 0) {
              std::fprintf(stderr, "\nloadgen: dial failed: %s\n", describe(s.status()).c_str());
            }
          }
          dialed.done();
          start.recv();  // nullopt once closed
          if (s.ok() && i < active) run_traffic(sh, *s, i);
          finished_traffic.done();
          finish.recv();
          if (s.ok() && still_established(s->fd())) {
            sh.held_at_end.fetch_add(1, std::memory_order_relaxed);
          }
          closed.done();
        };
        for (int i = 0; i < conns; ++i) {
          weft::go([&, i] {
            if (tls) {
              connection(i, [&](const weft::net::DialOptions& o) {
                return weft::tls::dial(sh.addr, *tls, o);
              });
            } else {
              connection(i, [&](const weft::net::DialOptions& o) {
                return weft::net::dial_tcp(sh.addr, o);
              });
            }
          });
        }
        // Progress while ramping.
        weft::Chan<int> ramp_done;
        weft::go([&] {
          const bool tty = isatty(2);
          const auto period =
              tty ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000);
          for (;;) {
            const bool done =
                weft::select(weft::case_recv(ramp_done), weft::case_timeout(period)) == 0;
            if (progress) {
              print_progress(sh.connected.load(), sh.dial_failed.load(), conns, done || !tty);
            }
            if (done) return;
          }
        });
        dialed.wait();
        ramp_done.close();
        out.ramp_s = std::chrono::duration<double>(Clock::now() - ramp_start).count();
        std::fprintf(stderr, "loadgen: %d connections established in %.2f s (%d failed)\n",
                     sh.connected.load(), out.ramp_s, sh.dial_failed.load());
        if (start_sigfd >= 0) {
          std::printf("RAMPED conns=%d\n", sh.connected.load());
          std::fflush(stdout);
          signalfd_siginfo si;
          for (;;) {
            const absl::Status w = weft::net::wait_readable(start_sigfd);
            if (!w.ok()) {
              std::fprintf(stderr, "loadgen: waiting for SIGUSR1: %s\n", describe(w).c_str());
              break;
            }
            if (read(start_sigfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) break;
          }
        }
        const auto t0 = Clock::now();
        start.close();
        weft::this_fiber::sleep_for(absl::ToChronoNanoseconds(duration));
        sh.stop.store(true);
        finished_traffic.wait();
        out.traffic_s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (hold > absl::ZeroDuration()) {
          std::fprintf(stderr, "loadgen: holding %d connections for %s\n", sh.connected.load(),
                       absl::FormatDuration(hold).c_str());
          weft::this_fiber::sleep_for(absl::ToChronoNanoseconds(hold));
        }
        finish.close();
        closed.wait();
      },
      weft::Options{.workers = workers});

  if (start_sigfd >= 0) close(start_sigfd);
  LatencyHistogram all;
  for (int i = 0; i < kShards; ++i) all.merge(sh.hist[i]);
  if (const std::string path = absl::GetFlag(FLAGS_histogram_out); !path.empty()) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "loadgen: cannot write --histogram_out=%s: %s\n", path.c_str(),
                   std::strerror(errno));
      return 2;
    }
    all.for_each_bucket([f](std::uint64_t value_ns, std::uint64_t count) {
      std::fprintf(f, "%" PRIu64 " %" PRIu64 "\n", value_ns, count);
    });
    std::fclose(f);
  }
  const double secs = std::max(1e-9, absl::ToDoubleSeconds(duration));
  const double rps = static_cast<double>(sh.requests.load()) / secs;
  auto us = [&](double q) { return static_cast<double>(all.quantile(q)) / 1000.0; };
  const int held = sh.held_at_end.load();
  const int lost = sh.connected.load() - held;
  std::printf(
      "connections held: %d of %d requested, still established at the end (%d failed to dial, %d "
      "lost after they were opened)\n",
      held, requested, sh.dial_failed.load(), lost);
  std::printf("requests: %" PRIu64 " in %.2f s = %.0f req/s, errors: %" PRIu64 "\n",
              sh.requests.load(), secs, rps, sh.errors.load());
  std::printf("latency: p50 %.1f us, p99 %.1f us, p99.9 %.1f us\n", us(0.5), us(0.99), us(0.999));
  if (!sh.first_error.empty()) std::printf("first error: %s\n", sh.first_error.c_str());
  // conns: held at the end; opened: dialled successfully (conns + lost).
  std::printf("LOADGEN conns=%d requested=%d opened=%d lost=%d dial_failed=%d requests=%" PRIu64
              " rps=%.0f p50_us=%.1f p99_us=%.1f p999_us=%.1f errors=%" PRIu64 " ramp_s=%.2f\n",
              held, requested, sh.connected.load(), lost, sh.dial_failed.load(), sh.requests.load(),
              rps, us(0.5), us(0.99), us(0.999), sh.errors.load(), out.ramp_s);
  return held > 0 && sh.errors.load() == 0 ? 0 : 1;
}
