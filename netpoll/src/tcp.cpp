// Stream sockets: listen/dial/accept for TCP and Unix. Accept never makes its caller spin: on
// EMFILE/ENFILE (fd exhaustion) it backs off with a growing sleep and retries, reporting once per
// process on stderr; ECONNABORTED and the network errors accept(2) may pass through are retried.
// Keep-alive: every dialled and accepted connection gets its own jittered idle time and interval
// (set_keep_alive below says why one period for all loses idle connections).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>
#include <weft/net.hpp>
#include <weft/runtime.hpp>

#include "address.hpp"
#include "io_errors.hpp"
#include "poll_desc.hpp"
#include "uring_poller.hpp"
#include "weft/detail/fast_rand.hpp"

namespace weft::net {
namespace {

using detail::Mode;
using detail::PollDesc;
using detail::SockAddr;
using detail::WaitResult;

std::atomic<bool> g_reported_fd_exhaustion{false};

// Wraps a fresh non-blocking fd: registers it with the netpoller or closes it. A stream's reads
// are queued on the ring under the io_uring backend ("Queued reads", poll_desc.hpp).
absl::StatusOr<PollDesc*> register_fd(int fd, const char* what, bool stream = false) {
  PollDesc* pd = detail::poll_open(fd, /*owns_fd=*/true, stream && detail::uring_ring() != nullptr);
  if (!pd) {
    const int err = errno;
    ::close(fd);
    return detail::errno_error(err, std::string(what) + ": registering with the netpoller", fd);
  }
  return pd;
}

// Keep-alive that cannot synchronise. The kernel arms a connection's keep-alive timer from its last
// received segment, and its timer wheel batches timers that are seconds away into buckets of a
// quarter second (HZ=250; 64 ms at HZ=1000). With one period on every socket, the thousands of
// idle connections opened in one burst probe in the same instant at both ends, every round: the
// loopback backlog (net.core.netdev_max_backlog, 1000 packets per CPU) drops the tail of each
// burst, a dropped probe is retried after the same interval -- into the next burst, at the same
// place in it -- and after the kernel's probe count the same connections are reset (2,000 idle
// weft-to-weft connections with a 3 s period and 3 probes lost hundreds; Go's 15 s values lost
// 10,415 of 14,000 in a soak). So each connection, dialled or accepted, draws its own idle time
// and its own interval, independently, from `period` +-20% (at least +-1 s; whole seconds, the
// kernel's unit): connections of one burst spread over several buckets, and a probe dropped in a
// burst is retried after an interval that differs from the idle time the answered ones re-arm
// with, so it leaves the burst instead of meeting it again. Both ends of a connection draw
// separately, so a weft client and a weft server rarely share a phase, and never for long.
struct KeepAliveTimes {
  int idle_s;
  int interval_s;
};

// Whole seconds of a keep-alive period: rounded up, within the kernel's [1, 32767].
int keep_alive_seconds(std::chrono::nanoseconds period) {
  const auto secs = std::chrono::ceil<std::chrono::seconds>(period).count();
  return static_cast<int>(std::clamp<std::int64_t>(secs, 1, 32767));
}

KeepAliveTimes jittered_keep_alive(int period_s) {
  const int spread = std::max(1, (period_s + 2) / 5);  // 20%, rounded, at least 1 s
  // The runtime's cheap generator (the jitter needs spread, not secrecy), drawn twice so that
  // idle time and interval are independent.
  const auto draw = [&] {
    const int v =
        period_s - spread +
        static_cast<int>(weft::detail::fast_rand(static_cast<std::uint32_t>(2 * spread + 1)));
    return std::clamp(v, 1, 32767);
  };
  const int idle = draw();
  return {idle, draw()};
}

// Sets a connection's own jittered TCP_KEEPIDLE and TCP_KEEPINTVL. errno on failure.
int set_keep_alive_times(int fd, int period_s) {
  const KeepAliveTimes t = jittered_keep_alive(period_s);
  if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &t.idle_s, sizeof t.idle_s) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &t.interval_s, sizeof t.interval_s) != 0) {
    return errno;
  }
  return 0;
}

// SO_KEEPALIVE with jittered times around `period` (see above), or keep-alive off for a period
// <= 0. On a listening socket this only sets SO_KEEPALIVE, which Linux copies to every accepted
// connection; accept() then draws each connection's times. errno on failure.
int set_keep_alive(int fd, std::chrono::nanoseconds period, bool listening = false) {
  const int on = period > std::chrono::nanoseconds::zero() ? 1 : 0;
  if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0) return errno;
  if (!on || listening) return 0;
  return set_keep_alive_times(fd, keep_alive_seconds(period));
}

void set_nodelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// The accept loop shared by TCP and Unix listeners. Returns the new fd and its descriptor.
absl::StatusOr<std::pair<int, PollDesc*>> accept_one(int lfd, PollDesc* lpd, bool tcp,
                                                     const CancelToken& bound) {
  weft::detail::require_fiber("weft::net accept()");
  if (lfd < 0 || !lpd) return detail::closed_error("accept", lfd);
  if (absl::Status s = detail::precheck(lpd, Mode::kRead, "accept", lfd, bound); !s.ok()) {
    return s;
  }
  const std::uint32_t seq = lpd->seq.load(std::memory_order_acquire);
  auto backoff = std::chrono::milliseconds(5);
  for (;;) {
    const int fd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      if (tcp) set_nodelay(fd);
      absl::StatusOr<PollDesc*> pd = register_fd(fd, "accept", /*stream=*/true);
      if (!pd.ok()) return pd.status();
      (*pd)->short_read_drains = tcp;
      return std::pair{fd, *pd};
    }
    const int err = errno;
    switch (err) {
      case EAGAIN: {
        WaitResult w = detail::poll_wait(lpd, Mode::kRead, bound);
        if (w != WaitResult::kReady) return detail::wait_error(w, "accept", lfd);
        backoff = std::chrono::milliseconds(5);
        continue;
      }
      case EINTR:
      case ECONNABORTED:
      case EPROTO:
      case ENETDOWN:
      case ENOPROTOOPT:
      case EHOSTDOWN:
      case ENONET:
      case EHOSTUNREACH:
      case EOPNOTSUPP:
      case ENETUNREACH:
        continue;  // that connection is gone; the next one may be fine
      case EMFILE:
      case ENFILE:
      case ENOBUFS:
      case ENOMEM: {
        if (!g_reported_fd_exhaustion.exchange(true)) {
          std::fprintf(stderr,
                       "weft: accept on fd %d: %s; backing off and retrying (raise the fd limit "
                       "with `ulimit -n` or close idle connections). Reported once.\n",
                       lfd, std::strerror(err));
        }
        // The pending connection stays in the backlog; retry after a pause instead of spinning.
        // A closed listener (its fd number may already be reused: check the descriptor's
        // sequence, never the fd) or a passed deadline ends the wait.
        // Sleep in short slices so that close() ends the back-off promptly: this call holds the
        // listener's descriptor, and its fd is only released when the call leaves.
        for (auto slept = std::chrono::milliseconds(0);
             slept < backoff && !lpd->closing.load(std::memory_order_acquire);
             slept += std::chrono::milliseconds(5)) {
          weft::this_fiber::sleep_for(std::chrono::milliseconds(5));
        }
        backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
        if (lpd->closing.load(std::memory_order_acquire) ||
            lpd->seq.load(std::memory_order_acquire) != seq) {
          return detail::closed_error("accept", lfd);
        }
        if (absl::Status s = detail::precheck(lpd, Mode::kRead, "accept", lfd); !s.ok()) return s;
        continue;
      }
      default:
        return detail::errno_error(err, "accept", lfd);
    }
  }
}

// connect() on a registered non-blocking socket, parking until it completes.
absl::Status connect_fd(int fd, PollDesc* pd, const SockAddr& a, std::int64_t deadline_ns,
                        const std::string& addr_text, const CancelToken& bound = {}) {
  if (deadline_ns > 0) detail::poll_set_deadline(pd, Mode::kWrite, deadline_ns);
  int rc;
  do {
    rc = ::connect(fd, a.get(), a.len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (err != EINPROGRESS) return detail::errno_error(err, "connect", fd, addr_text);
    // A wake-up is not completion: the socket was registered before connect(), and a fresh
    // socket polls as writable, so a stale edge may be waiting. Completion is SO_ERROR == 0 AND
    // a peer (getpeername); ENOTCONN means still in progress: wait again (as Go does).
    for (;;) {
      WaitResult w = detail::poll_wait(pd, Mode::kWrite, bound);
      if (w != WaitResult::kReady) {
        if (w == WaitResult::kDeadline) {
          return absl::DeadlineExceededError("connect fd " + std::to_string(fd) + " (" + addr_text +
                                             "): timed out");
        }
        return detail::wait_error(w, "connect", fd);
      }
      int soerr = 0;
      socklen_t len = sizeof soerr;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
      if (soerr != 0 && soerr != EINPROGRESS && soerr != EALREADY && soerr != EINTR) {
        return detail::errno_error(soerr, "connect", fd, addr_text);
      }
      sockaddr_storage peer{};
      socklen_t plen = sizeof peer;
      if (soerr == 0 && getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) == 0) break;
    }
  }
  if (deadline_ns > 0) detail::poll_set_deadline(pd, Mode::kWrite, 0);
  return absl::OkStatus();
}

std::int64_t deadline_after(std::chrono::nanoseconds timeout) {
  // Saturating: a huge timeout means "practically never", not an overflow into the past.
  return timeout.count() > 0
             ? weft::detail::deadline_after_ns(weft::detail::now_ns(), timeout.count())
             : 0;
}

}  // namespace

absl::StatusOr<TcpStream> TcpListener::accept() {
  const int lfd = fd();
  PollDesc* const lpd = pd();
  detail::IoCall call(lpd);
  if (!call.ok() || pd() != lpd) return detail::closed_error("accept", lfd);
  // The listener's context is its descriptor's (poll_bind_context): no token of the call's own.
  absl::StatusOr<std::pair<int, PollDesc*>> r = accept_one(lfd, lpd, true, {});
  if (!r.ok()) return r.status();
  TcpStream s(r->first, r->second);
  // SO_KEEPALIVE came from the listener; the times are this connection's own. Like TCP_NODELAY,
  // best effort: it cannot fail on an open TCP socket, and a connection already reset reports
  // that on its first read.
  if (keep_alive_s_ > 0) set_keep_alive_times(r->first, keep_alive_s_);
  weft::detail::coop_tick();  // an accept flood yields too (the stream owns the fd by now)
  return s;
}

absl::StatusOr<UnixStream> UnixListener::accept() {
  const int lfd = fd();
  PollDesc* const lpd = pd();
  detail::IoCall call(lpd);
  if (!call.ok() || pd() != lpd) return detail::closed_error("accept", lfd);
  absl::StatusOr<std::pair<int, PollDesc*>> r = accept_one(lfd, lpd, false, {});
  if (!r.ok()) return r.status();
  UnixStream s(r->first, r->second);
  weft::detail::coop_tick();
  return s;
}

UnixListener& UnixListener::operator=(UnixListener&& o) noexcept {
  if (this != &o) {
    if (!path_.empty()) ::unlink(path_.c_str());
    // The path first: after the move below, `o` is a moved-from object.
    path_ = std::exchange(o.path_, std::string());
    Socket::operator=(std::move(o));
  }
  return *this;
}

UnixListener::~UnixListener() {
  if (!path_.empty()) ::unlink(path_.c_str());  // moved-from listeners have an empty path
}

absl::StatusOr<TcpListener> listen_tcp(std::string_view addr, int backlog) {
  ListenOptions options;
  options.backlog = backlog;
  return listen_tcp(addr, options);
}

absl::StatusOr<TcpListener> listen_tcp(std::string_view addr, const ListenOptions& options) {
  weft::detail::require_fiber("weft::net::listen_tcp");
  auto addrs = detail::resolve(addr, SOCK_STREAM, /*passive=*/true, "listen_tcp");
  if (!addrs.ok()) return addrs.status();
  const SockAddr& a = addrs->front();
  const int fd = ::socket(a.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return detail::errno_error(errno, "listen_tcp: socket", -1, addr);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (options.reuse_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    const int err = errno;
    ::close(fd);
    return detail::errno_error(err, "listen_tcp: setsockopt(SO_REUSEPORT)", fd, addr);
  }
  if (const int err = set_keep_alive(fd, options.keep_alive, /*listening=*/true); err != 0) {
    ::close(fd);
    return detail::errno_error(err, "listen_tcp: setsockopt(keep-alive)", fd, addr);
  }
  if (::bind(fd, a.get(), a.len) != 0 || ::listen(fd, options.backlog) != 0) {
    const int err = errno;
    ::close(fd);
    return detail::errno_error(err, "listen_tcp", fd,
                               err == EADDRINUSE
                                   ? std::string(addr) +
                                         "; another socket holds the port: listeners sharing a "
                                         "port must all set ListenOptions::reuse_port and "
                                         "belong to one user"
                                   : std::string(addr));
  }
  absl::StatusOr<PollDesc*> pd = register_fd(fd, "listen_tcp");
  if (!pd.ok()) return pd.status();
  const int keep_alive_s = options.keep_alive > std::chrono::nanoseconds::zero()
                               ? keep_alive_seconds(options.keep_alive)
                               : 0;
  return TcpListener(fd, *pd, keep_alive_s);
}

absl::StatusOr<TcpStream> dial_tcp(std::string_view addr, const DialOptions& options) {
  weft::detail::require_fiber("weft::net::dial_tcp");
  const std::int64_t deadline = deadline_after(options.timeout);
  // The context and the timeout bound every wait of the dial, name resolution included.
  const CancelToken bound =
      CancelToken::from_signal(static_cast<CancelToken>(options.context).signal(), deadline);
  auto addrs = detail::resolve(addr, SOCK_STREAM, /*passive=*/false, "dial_tcp", bound);
  if (!addrs.ok()) return addrs.status();
  std::optional<SockAddr> local;
  if (!options.local_addr.empty()) {
    std::string src = options.local_addr;
    if (src.find(':') == std::string::npos || (src.front() == '[' && src.back() == ']')) {
      src += ":0";
    }
    auto l = detail::resolve(src, SOCK_STREAM, /*passive=*/true, "dial_tcp local_addr");
    if (!l.ok()) return l.status();
    local = l->front();
  }
  absl::Status last;
  for (const SockAddr& a : *addrs) {
    if (local && local->family() != a.family()) continue;
    const std::string text = detail::format_addr(a);
    const int fd = ::socket(a.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return detail::errno_error(errno, "dial_tcp: socket", -1, text);
    if (local) {
      const int one = 1;
      setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
      if (::bind(fd, local->get(), local->len) != 0) {
        const int err = errno;
        ::close(fd);
        return detail::errno_error(err, "dial_tcp: bind", fd, options.local_addr);
      }
    }
    if (const int err = set_keep_alive(fd, options.keep_alive); err != 0) {
      ::close(fd);
      return detail::errno_error(err, "dial_tcp: setsockopt(keep-alive)", fd, text);
    }
    absl::StatusOr<PollDesc*> pd = register_fd(fd, "dial_tcp", /*stream=*/true);
    if (!pd.ok()) return pd.status();
    (*pd)->short_read_drains = true;
    TcpStream s(fd, *pd);  // closes the fd if we give up on this address
    last = connect_fd(fd, *pd, a, deadline, text, bound);
    if (last.ok()) {
      set_nodelay(fd);
      return s;
    }
    if (absl::IsDeadlineExceeded(last) || absl::IsCancelled(last)) break;
  }
  if (last.ok()) {
    return absl::InvalidArgumentError("dial_tcp: no address of \"" + std::string(addr) +
                                      "\" matches the family of local_addr " + options.local_addr);
  }
  return last;
}

absl::StatusOr<TcpStream> dial_tcp(std::string_view addr, std::chrono::nanoseconds timeout) {
  DialOptions options;
  options.timeout = timeout;
  return dial_tcp(addr, options);
}

absl::StatusOr<UnixListener> listen_unix(std::string_view path) {
  weft::detail::require_fiber("weft::net::listen_unix");
  auto a = detail::unix_addr(path, "listen_unix");
  if (!a.ok()) return a.status();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return detail::errno_error(errno, "listen_unix: socket", -1, path);
  if (::bind(fd, a->get(), a->len) != 0 || ::listen(fd, 4096) != 0) {
    const int err = errno;
    ::close(fd);
    return detail::errno_error(err, "listen_unix", fd, path);
  }
  absl::StatusOr<PollDesc*> pd = register_fd(fd, "listen_unix");
  if (!pd.ok()) {
    ::unlink(std::string(path).c_str());
    return pd.status();
  }
  return UnixListener(fd, *pd, std::string(path));
}

absl::StatusOr<UnixStream> dial_unix(std::string_view path) {
  weft::detail::require_fiber("weft::net::dial_unix");
  auto a = detail::unix_addr(path, "dial_unix");
  if (!a.ok()) return a.status();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return detail::errno_error(errno, "dial_unix: socket", -1, path);
  absl::StatusOr<PollDesc*> pd = register_fd(fd, "dial_unix", /*stream=*/true);
  if (!pd.ok()) return pd.status();
  UnixStream s(fd, *pd);
  // A full Unix backlog makes a non-blocking connect fail with EAGAIN (it has no "in progress"
  // state); that is reported, as Go does.
  if (absl::Status st = connect_fd(fd, *pd, *a, 0, std::string(path)); !st.ok()) return st;
  return s;
}

}  // namespace weft::net
