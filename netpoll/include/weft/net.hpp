// Blocking-style networking for fibers: every call that would block parks the calling fiber on
// epoll readiness (the netpoller) and lets its worker run other fibers. Calls need a fiber (they
// throw std::logic_error from a plain thread), except close() and the accessors.
//
// Addresses are "host:port" strings: "127.0.0.1:8080", "[::1]:0", ":8080" (all interfaces),
// "localhost:6379". Numeric hosts are parsed in place; names resolve with getaddrinfo on the
// blocking() pool, never on a worker.
//
// Errors are values: absl::Status / absl::StatusOr, whose message says what failed, on which fd
// or address, and the errno text. A passed deadline gives absl::StatusCode::kDeadlineExceeded;
// an operation on a closed socket gives kFailedPrecondition; a peer reset or refusal gives
// kUnavailable (errno text included). Deadlines are absolute (steady_clock) and stay set until
// changed; time_point{} clears one. Sockets are move-only and close on destruction. TCP streams
// have TCP_NODELAY on; listen_tcp sets SO_REUSEADDR. SIGPIPE never reaches the process: writes
// use MSG_NOSIGNAL, and the runtime ignores SIGPIPE if it still has its default action.
//
// One fiber may read while another writes the same stream; two concurrent readers (or writers)
// of one socket get kFailedPrecondition.
//
// Cancellation. A socket can be bound to a weft::Context (set_context): once it is cancelled or
// past its deadline, calls in progress on the socket fail, and later ones fail before their
// syscall, with kCancelled / kDeadlineExceeded; the socket stays open. Every blocking call also
// fails with kCancelled once its fiber's Task::request_stop() was called. dial_tcp takes a
// context in DialOptions, wait_readable/wait_writable a CancelToken.
#pragma once

#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "weft/cancel.hpp"
#include "weft/context.hpp"
#include "weft/detail/spin_lock.hpp"
#include "weft/select.hpp"

namespace weft::net {

using TimePoint = std::chrono::steady_clock::time_point;

class Socket;
namespace detail {
struct PollDesc;  // the netpoller's per-fd record (netpoll/src/poll_desc.hpp)
// case_readable / case_writable's select source: one direction of a socket's descriptor.
struct ReadySource {
  PollDesc* pd = nullptr;
  int fd = -1;
  std::uint32_t seq = 0;  // the descriptor's generation when the case was made
  bool write = false;
};
ReadySource ready_source(const Socket& s, bool write) noexcept;
const weft::detail::SelectSource* ready_source_ops() noexcept;
}  // namespace detail

// What every socket type below has: an open non-blocking fd registered with the netpoller.
// Move-only; closes on destruction. A default-constructed or moved-from socket is closed
// (is_open() false, fd() -1). Sockets come from listen_*/dial_*/accept; the constructor from an
// fd and a descriptor is the net layer's own.
class Socket {
 public:
  Socket() = default;
  Socket(int fd, detail::PollDesc* pd) noexcept : fd_(fd), pd_(pd) {}
  Socket(Socket&& o) noexcept;
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  // The fd, -1 once closed. Still owned by the socket: do not close it yourself.
  int fd() const noexcept { return fd_.load(std::memory_order_acquire); }
  bool is_open() const noexcept { return fd() >= 0; }
  // Wakes fibers blocked on this socket (they fail with kFailedPrecondition) and closes the fd
  // once no call is using it any more. Callable from any fiber or plain thread; idempotent.
  void close() noexcept;
  // Absolute deadlines (steady_clock), sticky until changed; TimePoint{} clears. A passed
  // deadline fails calls in progress and later ones with kDeadlineExceeded; setting one from
  // another fiber interrupts a blocked call. set_deadline sets both directions (for a listener,
  // the one that accept() uses).
  void set_deadline(TimePoint t);
  void set_read_deadline(TimePoint t);
  void set_write_deadline(TimePoint t);
  // The bound local address as "host:port" ("[v6]:port" for IPv6; the path for Unix sockets).
  std::string local_addr() const;
  // Binds this socket's calls to `ctx` (see "Cancellation" above); background() unbinds. Safe
  // from any fiber, also while calls are in flight: the change does not interrupt a blocked call,
  // which from then on follows the new binding (it fails once the new context is done). The
  // socket keeps `ctx` alive. Binding is once per socket, not per call: calls on a bound socket
  // cost what calls on an unbound one do.
  void set_context(Context ctx);
  Context context() const;

 protected:
  friend detail::ReadySource detail::ready_source(const Socket& s, bool write) noexcept;
  detail::PollDesc* pd() const noexcept { return pd_.load(std::memory_order_acquire); }

 private:
  mutable weft::detail::SpinLock ctx_mu_;  // guards ctx_ (context() is const)
  Context ctx_ ABSL_GUARDED_BY(ctx_mu_);   // background unless set_context
  std::atomic<bool> has_ctx_{false};       // ctx_ can be cancelled (context() skips the lock)

  void take(Socket& o) noexcept;  // the move: o's fd, descriptor (with its binding) and context

  // Atomic because close() may come from another fiber while a call is in progress; a call holds
  // a reference on the descriptor, so the fd stays valid until it leaves (poll_desc.hpp).
  std::atomic<int> fd_{-1};
  std::atomic<detail::PollDesc*> pd_{nullptr};
};

// What TcpStream and UnixStream have: a connected byte stream. One fiber may read while another
// writes; a second concurrent reader (or writer) gets kFailedPrecondition.
class Stream : public Socket {
 public:
  using Socket::Socket;
  // Reads what is available (at least one byte); 0 at end of stream.
  absl::StatusOr<std::size_t> read(std::span<std::byte> buf);
  absl::StatusOr<std::size_t> read(void* buf, std::size_t n);
  // Reads exactly buf.size() bytes; kOutOfRange if the stream ends first.
  absl::Status read_full(std::span<std::byte> buf);
  // Writes everything (partial writes and EINTR are retried), parking while the peer is slow.
  absl::Status write_all(std::span<const std::byte> data);
  absl::Status write_all(const void* data, std::size_t n);
  absl::Status write_all(std::string_view s);
  // Gather write (writev): every part, in order, as one stream of bytes -- a header and a body
  // from separate buffers in one system call instead of two writes or a copy. Partial writes
  // resume mid-part; up to 64 parts go per call (more take several). Same errors as write_all.
  absl::Status writev_all(std::span<const std::string_view> parts);
  absl::Status writev_all(std::initializer_list<std::string_view> parts);
  // Sends `count` bytes of the file `file_fd` starting at `offset` (sendfile(2): the kernel
  // copies from the page cache, no user-space buffer), parking while the peer is slow. Returns
  // the bytes sent: fewer than `count` only if the file ended first. The file's own offset does
  // not move, so several streams may send one file at once. A file sendfile cannot read (not a
  // regular file) gives kInvalidArgument; errors on the socket as write_all.
  absl::StatusOr<std::size_t> send_file(int file_fd, std::uint64_t offset, std::size_t count);
  // Half-close: the peer reads end of stream; this side can still read.
  absl::Status shutdown_write();
  // The peer's address as "host:port" (Unix sockets: its path, often empty).
  std::string peer_addr() const;

  // ---- for protocols layered over a stream (weft::tls) ----
  // What one non-blocking step of a layered operation needs before it can go on.
  enum class Want : std::uint8_t { kDone, kRead, kWrite };
  // Runs `step(fd)` -- one non-blocking attempt of the layered operation, making its own system
  // calls on `fd` -- until it returns kDone, parking until the socket is readable (kRead) or
  // writable (kWrite) in between, exactly as read() and write_all() park: a deadline of the
  // direction waited on, the socket's context, a close() from another fiber and the fiber's stop
  // request end the call with their errors (as read's and write's). `step` must report kRead /
  // kWrite only after a system call said EAGAIN in that direction (edge-triggered readiness: a
  // guess would park until the next edge). The fd stays pinned while the call runs: a concurrent
  // close() does not release it under a step. `writing` names the direction whose deadline is
  // checked before the first step; `until` bounds the whole call as well (a handshake timeout;
  // TimePoint::max(): no bound of its own). `what` names the call in errors. Needs a fiber.
  absl::Status drive_nonblocking(std::string_view what, bool writing,
                                 absl::FunctionRef<Want(int fd)> step,
                                 TimePoint until = TimePoint::max());

 private:
  // The write side of write_all, writev_all and send_file: the checks (closed, deadline,
  // context), then `attempt` (one non-blocking system call: >= 0 bytes written, or -1 with
  // errno) until `done`, parking on EAGAIN. `what` names the call in errors.
  absl::Status write_loop(const char* what, absl::FunctionRef<ssize_t()> attempt,
                          absl::FunctionRef<bool()> done);
};

// A TCP connection (TCP_NODELAY on): everything of Stream and Socket.
class TcpStream : public Stream {
 public:
  using Stream::Stream;
};

// A Unix-domain stream connection: everything of Stream and Socket.
class UnixStream : public Stream {
 public:
  using Stream::Stream;
};

// A listening TCP socket (SO_REUSEADDR): accept() plus everything of Socket.
class TcpListener : public Socket {
 public:
  using Socket::Socket;
  // Parks until a connection arrives. On EMFILE/ENFILE it backs off and retries (reporting once
  // on stderr) instead of spinning; ECONNABORTED is retried silently. Fails with
  // kDeadlineExceeded after set_deadline(), kFailedPrecondition once closed. Each accepted
  // connection gets its own jittered keep-alive times (see kDefaultKeepAlive).
  absl::StatusOr<TcpStream> accept();

  // The net layer's own (listen_tcp): keep_alive_s is ListenOptions::keep_alive in whole seconds,
  // 0 when off.
  TcpListener(int fd, detail::PollDesc* pd, int keep_alive_s) noexcept
      : Socket(fd, pd), keep_alive_s_(keep_alive_s) {}

 private:
  int keep_alive_s_ = 0;  // read-only after construction: accept() may run on several fibers
};

// A listening Unix-domain socket: accept() plus everything of Socket.
class UnixListener : public Socket {
 public:
  UnixListener() = default;
  UnixListener(int fd, detail::PollDesc* pd, std::string path) noexcept
      : Socket(fd, pd), path_(std::move(path)) {}
  UnixListener(UnixListener&&) noexcept = default;
  UnixListener& operator=(UnixListener&& o) noexcept;  // unlinks the path it replaces
  ~UnixListener();
  absl::StatusOr<UnixStream> accept();  // as TcpListener::accept
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;  // the socket file, unlinked on destruction (as Go does on Close)
};

// A UDP socket bound by listen_udp: datagrams plus everything of Socket.
class UdpSocket : public Socket {
 public:
  using Socket::Socket;
  // Receives one datagram (truncated to buf.size()); *from gets the sender's "host:port".
  absl::StatusOr<std::size_t> recv_from(std::span<std::byte> buf, std::string* from = nullptr);
  absl::Status send_to(std::span<const std::byte> data, std::string_view addr);
  absl::Status send_to(std::string_view data, std::string_view addr);
};

absl::StatusOr<TcpListener> listen_tcp(std::string_view addr, int backlog = 4096);

// TCP keep-alive, on by default for accepted and dialled connections as in Go (15 s since Go
// 1.13): after about this long without traffic the kernel probes the peer, again about every this
// long, and a peer that misses 9 probes in a row (the kernel's count) ends the connection, so a
// read blocked on a peer that vanished (power loss, a dropped NAT entry) fails instead of parking
// its fiber forever. Rounded up to whole seconds. "About": each connection draws its own idle time
// and interval from the period +-20% (at least +-1 s), so that thousands of idle connections --
// both ends of weft-to-weft ones included -- never probe in one synchronised burst, whose tail the
// kernel drops round after round until those connections are reset. Zero or negative: off.
inline constexpr std::chrono::seconds kDefaultKeepAlive{15};

// listen_tcp with more control (an addition to the core API).
struct ListenOptions {
  int backlog = 4096;
  // Keep-alive of the connections accepted from this listener (SO_KEEPALIVE is set on the
  // listening socket, which Linux copies to every accepted one; accept() sets each connection's
  // jittered times: two system calls).
  std::chrono::nanoseconds keep_alive = kDefaultKeepAlive;
  // SO_REUSEPORT: several listeners -- in this process or in others of the same user -- bind
  // the same address, and the kernel spreads incoming connections over them by a hash of the
  // peer's address. How a service grows past one process's fd limit, or runs one accept queue
  // per worker. Every listener on the port must set it; binding fails with
  // kFailedPrecondition (EADDRINUSE) otherwise. With port 0, the first listener gets a port and the
  // others pass it.
  bool reuse_port = false;
};
absl::StatusOr<TcpListener> listen_tcp(std::string_view addr, const ListenOptions& options);
// timeout 0: no limit beyond the kernel's own connect timeout. A name with several addresses is
// tried in order within the one timeout.
absl::StatusOr<TcpStream> dial_tcp(std::string_view addr, std::chrono::nanoseconds timeout = {});

// dial_tcp with more control (an addition to the core API, for load generators and
// multi-homed clients).
struct DialOptions {
  std::chrono::nanoseconds timeout{};                       // 0: none
  std::chrono::nanoseconds keep_alive = kDefaultKeepAlive;  // see kDefaultKeepAlive
  // Bounds the dial (connect; name resolution stops being waited for): kCancelled or
  // kDeadlineExceeded when it is done first. Go's DialContext; the stream is not bound to it.
  Context context{};
  // Source address, numeric "host" or "host:port" (port 0 or none: the kernel picks one per
  // destination, with IP_BIND_ADDRESS_NO_PORT, so one source IP is not limited to ~28k ports
  // across all destinations). Empty: the kernel chooses.
  std::string local_addr;
};
absl::StatusOr<TcpStream> dial_tcp(std::string_view addr, const DialOptions& options);
absl::StatusOr<UdpSocket> listen_udp(std::string_view addr);
absl::StatusOr<UnixListener> listen_unix(std::string_view path);
absl::StatusOr<UnixStream> dial_unix(std::string_view path);

// For any other file descriptor (pipes, eventfd, a third-party library's socket): parks until it
// is readable / writable, or fails with kDeadlineExceeded at `deadline`. The fd is registered
// with the netpoller for the duration of the call only; it must not be a weft socket.
absl::Status wait_readable(int fd, TimePoint deadline = TimePoint::max());
absl::Status wait_writable(int fd, TimePoint deadline = TimePoint::max());
// The same, bounded by a CancelToken (a Context converts): kCancelled / kDeadlineExceeded.
absl::Status wait_readable(int fd, const CancelToken& bound);
absl::Status wait_writable(int fd, const CancelToken& bound);

// ---- select over sockets ----------------------------------------------------------------------
//
//   weft::select(weft::net::case_readable(conn, [&] { ... conn.read(...) ... }),
//                weft::case_recv(outbound, [&](std::optional<Msg> m) { ... conn.write_all(...) }),
//                weft::case_recv(ctx.done()));
//
// case_readable(s) fires when a read (or accept, recv_from) on `s` would not park: data, end of
// stream, an error, or a connection to accept; case_writable(s) when a write would not park. A
// socket that is closed (also while the select waits), past its deadline, or bound to a done
// context fires too: the call that follows reports why. The case only reports readiness; the
// handler makes the call. Go cannot do this (golang/go#15735). Needs a fiber. While a select
// waits on a direction of a socket, another fiber's call in that direction fails with
// kFailedPrecondition, as two concurrent readers do.
namespace detail {
template <class F>
struct ReadyCase {
  ReadySource src;
  F handler;
  weft::detail::SelectCase describe() noexcept {
    weft::detail::SelectCase c{weft::detail::SelectCase::kSource};
    c.source = ready_source_ops();
    c.source_obj = &src;
    return c;
  }
  void fire(const weft::detail::SelectCase&) { weft::detail::invoke_handler(handler); }
};
}  // namespace detail

template <class F = weft::detail::NoHandler>
detail::ReadyCase<std::decay_t<F>> case_readable(const Socket& s, F&& handler = {}) {
  return {detail::ready_source(s, false), std::forward<F>(handler)};
}

template <class F = weft::detail::NoHandler>
detail::ReadyCase<std::decay_t<F>> case_writable(const Socket& s, F&& handler = {}) {
  return {detail::ready_source(s, true), std::forward<F>(handler)};
}

}  // namespace weft::net
