// Socket and Stream: the read/write loops over non-blocking fds. Each call tries the syscall
// first and parks on the netpoller only on EAGAIN (poll_desc.hpp makes that race-free); EINTR
// and partial writes are retried; errno is copied right after the syscall, before anything can
// park (a fiber may resume on another thread). Each completed call counts against the fiber's
// cooperative budget (coop_tick in weft/detail/park.hpp), so an always-ready socket yields.
// A socket's context is bound to its descriptor once (set_context -> poll_bind_context): calls
// check the descriptor's flag and neither copy the Context nor attach to its signal.
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <weft/net.hpp>
#include <weft/runtime.hpp>

#include "address.hpp"
#include "io_errors.hpp"
#include "plain_syscalls.hpp"
#include "poll_desc.hpp"
#include "poll_op.hpp"
#include "uring_poller.hpp"
#include "weft/detail/stream_loops.hpp"

namespace weft::net {
using namespace weft::net::detail;  // the descriptor operations of poll_desc.hpp
namespace {

// Parts per writev call: an array on the fiber's stack (1 KiB), so it must stay small enough for
// a 16 KiB stack; longer gathers take several calls.
constexpr int kMaxIov = 64;

std::int64_t to_deadline_ns(TimePoint t) {
  if (t == TimePoint{}) return 0;  // cleared
  if (t == TimePoint::max()) return 0;
  const std::int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return ns > 0 ? ns : 1;  // a time in the past (but not "cleared") has passed
}

}  // namespace

// A move hands over the descriptor with its context binding (poll_desc.hpp, "Contexts"): the
// binding lives in the descriptor, so only the Context that keeps its signal alive moves here.
Socket::Socket(Socket&& o) noexcept { take(o); }

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    take(o);
  }
  return *this;
}

void Socket::take(Socket& o) noexcept {
  o.ctx_mu_.lock();
  fd_.store(o.fd_.exchange(-1));
  pd_.store(o.pd_.exchange(nullptr));
  Context ctx = std::move(o.ctx_);
  o.ctx_ = Context();
  o.has_ctx_.store(false, std::memory_order_release);
  o.ctx_mu_.unlock();
  ctx_mu_.lock();
  std::swap(ctx_, ctx);
  has_ctx_.store(static_cast<CancelToken>(ctx_).signal() != nullptr, std::memory_order_release);
  ctx_mu_.unlock();
  // This socket's previous context (background: it was closed) goes here, outside the lock.
}

void Socket::set_context(Context ctx) {
  weft::detail::CancelSignal* const sig = static_cast<CancelToken>(ctx).signal();
  ctx_mu_.lock();
  if (PollDesc* pd = this->pd()) poll_bind_context(pd, sig);
  std::swap(ctx_, ctx);
  has_ctx_.store(sig != nullptr, std::memory_order_release);
  ctx_mu_.unlock();
  // The previous context is released here, outside the lock (its signal is no longer bound).
}

Context Socket::context() const {
  if (!has_ctx_.load(std::memory_order_acquire)) return Context();
  ctx_mu_.lock();
  Context c = ctx_;
  ctx_mu_.unlock();
  return c;
}

void Socket::close() noexcept {
  ctx_mu_.lock();  // against a set_context binding the descriptor being closed
  PollDesc* pd = pd_.exchange(nullptr);
  const int fd = fd_.exchange(-1);
  if (pd) poll_bind_context(pd, nullptr);  // a recycled descriptor starts unbound
  ctx_mu_.unlock();
  if (pd) {
    poll_close(pd);  // closes the fd once no call is using it any more
  } else if (fd >= 0) {
    ::close(fd);
  }
}

void Socket::set_deadline(TimePoint t) {
  set_read_deadline(t);
  set_write_deadline(t);
}

void Socket::set_read_deadline(TimePoint t) {
  PollDesc* pd = this->pd();
  IoCall call(pd);
  if (call.ok() && this->pd() == pd) poll_set_deadline(pd, Mode::kRead, to_deadline_ns(t));
}

void Socket::set_write_deadline(TimePoint t) {
  PollDesc* pd = this->pd();
  IoCall call(pd);
  if (call.ok() && this->pd() == pd) poll_set_deadline(pd, Mode::kWrite, to_deadline_ns(t));
}

std::string Socket::local_addr() const {
  SockAddr a;
  a.len = sizeof a.storage;
  if (fd() < 0 || getsockname(fd(), a.get(), &a.len) != 0) return "";
  return format_addr(a);
}

std::string Stream::peer_addr() const {
  SockAddr a;
  a.len = sizeof a.storage;
  if (fd() < 0 || getpeername(fd(), a.get(), &a.len) != 0) return "";
  return format_addr(a);
}

absl::StatusOr<std::size_t> Stream::read(void* buf, std::size_t n) {
  weft::detail::require_fiber("weft::net read()");
  const int fd = this->fd();
  PollDesc* const pd = this->pd();
  IoCall call(pd);
  if (!call.ok() || this->pd() != pd) return closed_error("read", fd);
  // The socket's context is the descriptor's (poll_bind_context): no token of the call's own.
  if (absl::Status s = precheck(pd, Mode::kRead, "read", fd); !s.ok()) return s;
  // After a short read, wait for the next edge before reading (see "Short reads" in
  // poll_desc.hpp): the read() it saves would only say EAGAIN.
  bool wait_first = false;
  if (n > 0 && pd->rd_drained.load(std::memory_order_relaxed)) {
    pd->rd_drained.store(false, std::memory_order_relaxed);
    wait_first = true;
  }
  // The io_uring backend: a read that would wait is a recv queued into buf (poll_op.hpp). After a
  // short read (the queue was empty) the kernel arms its poll before trying: no read() at all.
  UringRing* const ring =
      n > 0 && !pd->read_interest.load(std::memory_order_relaxed) ? uring_ring() : nullptr;
  for (;;) {
    if (pd->closing.load(std::memory_order_acquire)) return closed_error("read", fd);
    if (ring && wait_first) {
      const QueuedRecv q = poll_queued_recv(*ring, pd, buf, n, /*poll_first=*/true, {});
      if (q.wait != WaitResult::kReady) return wait_error(q.wait, "read", fd);
      if (q.res < 0) {
        if (q.res == -EINTR || q.res == -EAGAIN) continue;
        return errno_error(-q.res, "read", fd);
      }
      if (q.res > 0 && static_cast<std::size_t>(q.res) < n && pd->short_read_drains) {
        pd->rd_drained.store(true, std::memory_order_relaxed);
      }
      weft::detail::coop_tick();
      return static_cast<std::size_t>(q.res);
    }
    if (wait_first) {
      wait_first = false;
      if (WaitResult w = poll_wait(pd, Mode::kRead); w != WaitResult::kReady) {
        return wait_error(w, "read", fd);
      }
    }
    const ssize_t r = plain_read(fd, buf, n);
    if (r >= 0) {
      if (r > 0 && static_cast<std::size_t>(r) < n && pd->short_read_drains &&
          !pd->short_read_unreliable.load(std::memory_order_acquire)) {
        pd->rd_drained.store(true, std::memory_order_relaxed);
      }
      weft::detail::coop_tick();  // a flood of ready data must not hold the worker
      return static_cast<std::size_t>(r);
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EAGAIN) return errno_error(err, "read", fd);
    if (ring) {
      wait_first = true;  // the queue is empty: queue the recv, poll first
      continue;
    }
    if (WaitResult w = poll_wait(pd, Mode::kRead); w != WaitResult::kReady) {
      return wait_error(w, "read", fd);
    }
  }
}

absl::StatusOr<std::size_t> Stream::read(std::span<std::byte> buf) {
  return read(buf.data(), buf.size());
}

absl::Status Stream::read_full(std::span<std::byte> buf) {
  return read_full_with(buf, "read", fd(),
                        [this](std::byte* p, std::size_t n) { return read(p, n); });
}

absl::Status Stream::write_loop(const char* what, absl::FunctionRef<ssize_t()> attempt,
                                absl::FunctionRef<bool()> done) {
  const int fd = this->fd();
  PollDesc* const pd = this->pd();
  IoCall call(pd);
  if (!call.ok() || this->pd() != pd) return closed_error(what, fd);
  if (absl::Status s = precheck(pd, Mode::kWrite, what, fd); !s.ok()) return s;
  while (!done()) {
    if (pd->closing.load(std::memory_order_acquire)) return closed_error(what, fd);
    if (attempt() >= 0) continue;
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EAGAIN) return errno_error(err, what, fd);
    if (pd->closing.load(std::memory_order_acquire)) return closed_error(what, fd);
    if (WaitResult w = poll_wait(pd, Mode::kWrite); w != WaitResult::kReady) {
      return wait_error(w, what, fd);
    }
  }
  weft::detail::coop_tick();
  return absl::OkStatus();
}

absl::Status Stream::write_all(const void* data, std::size_t n) {
  weft::detail::require_fiber("weft::net write_all()");
  const int fd = this->fd();
  const char* p = static_cast<const char*>(data);
  return write_loop(
      "write",
      [&] {
        return write_step(p, n, [fd](const char* q, std::size_t k) {
          return plain_send(fd, q, k, MSG_NOSIGNAL);
        });
      },
      [&] { return n == 0; });
}

absl::Status Stream::writev_all(std::span<const std::string_view> parts) {
  weft::detail::require_fiber("weft::net writev_all()");
  const int fd = this->fd();
  std::size_t first = 0;  // parts before it are sent
  std::size_t skip = 0;   // bytes of parts[first] already sent
  while (first < parts.size() && parts[first].empty()) ++first;
  return write_loop(
      "writev",
      [&]() -> ssize_t {
        iovec iov[kMaxIov];
        int n = 0;
        for (std::size_t i = first; i < parts.size() && n < kMaxIov; ++i) {
          const std::string_view part = i == first ? parts[i].substr(skip) : parts[i];
          if (part.empty()) continue;
          iov[n++] = iovec{const_cast<char*>(part.data()), part.size()};
        }
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = static_cast<std::size_t>(n);
        const ssize_t r = plain_sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (r > 0) {
          std::size_t left = static_cast<std::size_t>(r);
          while (first < parts.size() && left >= parts[first].size() - skip) {
            left -= parts[first].size() - skip;
            skip = 0;
            ++first;
          }
          skip += left;
        }
        return r;
      },
      [&] {
        while (first < parts.size() && skip == parts[first].size()) {
          skip = 0;
          ++first;
        }
        return first == parts.size();
      });
}

absl::Status Stream::writev_all(std::initializer_list<std::string_view> parts) {
  return writev_all(std::span<const std::string_view>(parts.begin(), parts.size()));
}

absl::StatusOr<std::size_t> Stream::send_file(int file_fd, std::uint64_t offset,
                                              std::size_t count) {
  weft::detail::require_fiber("weft::net send_file()");
  const int fd = this->fd();
  off_t off = static_cast<off_t>(offset);
  std::size_t sent = 0;
  bool eof = false;
  absl::Status st = write_loop(
      "sendfile",
      [&]() -> ssize_t {
        // At most 1 GiB per call (sendfile's own limit is ~2 GiB).
        const ssize_t r =
            ::sendfile(fd, file_fd, &off, std::min<std::size_t>(count - sent, 1u << 30));
        if (r > 0) sent += static_cast<std::size_t>(r);
        if (r == 0) eof = true;  // the file ended
        return r;
      },
      [&] { return eof || sent == count; });
  if (!st.ok() && (absl::IsInvalidArgument(st) || absl::IsUnimplemented(st))) {
    return absl::InvalidArgumentError(std::string(st.message()) + " (file fd " +
                                      std::to_string(file_fd) +
                                      ": sendfile needs a regular file, or another mmap-able one)");
  }
  if (!st.ok()) return st;
  return sent;
}

absl::Status Stream::write_all(std::span<const std::byte> data) {
  return write_all(data.data(), data.size());
}

absl::Status Stream::write_all(std::string_view s) { return write_all(s.data(), s.size()); }

absl::Status Stream::drive_nonblocking(std::string_view what, bool writing,
                                       absl::FunctionRef<Want(int fd)> step, TimePoint until) {
  weft::detail::require_fiber("weft::net drive_nonblocking()");
  const int fd = this->fd();
  PollDesc* const pd = this->pd();
  IoCall call(pd);
  if (!call.ok() || this->pd() != pd) return closed_error(what, fd);
  // The socket's context is the descriptor's (poll_bind_context); the call's own bound is a
  // deadline of its own.
  CancelToken bound;
  if (until != TimePoint::max()) {
    const std::int64_t own = until == TimePoint{} ? 1 : to_deadline_ns(until);
    bound = CancelToken::from_signal(nullptr, own);
    if (own <= weft::detail::now_ns()) return wait_error(WaitResult::kDeadline, what, fd);
  }
  if (absl::Status s = precheck(pd, writing ? Mode::kWrite : Mode::kRead, what, fd, bound);
      !s.ok()) {
    return s;
  }
  for (;;) {
    if (pd->closing.load(std::memory_order_acquire)) return closed_error(what, fd);
    const Want want = step(fd);
    if (want == Want::kDone) break;
    if (pd->closing.load(std::memory_order_acquire)) return closed_error(what, fd);
    const Mode mode = want == Want::kRead ? Mode::kRead : Mode::kWrite;
    const WaitResult w = poll_wait(pd, mode, bound);
    if (w == WaitResult::kBusy && (mode == Mode::kWrite) != writing) {
      // The layer needs the other direction (a TLS read that must send a reply record), whose
      // own caller is parked there already: it takes that edge, so poll for ours instead. Rare
      // (TLS 1.3 key updates), and bounded like every wait here.
      if (absl::Status s = weft::this_fiber::sleep_for(std::chrono::milliseconds(1), bound);
          !s.ok()) {
        return wait_error(
            absl::IsDeadlineExceeded(s) ? WaitResult::kDeadline : WaitResult::kCancelled, what, fd);
      }
      continue;
    }
    if (w != WaitResult::kReady) return wait_error(w, what, fd);
  }
  weft::detail::coop_tick();
  return absl::OkStatus();
}

absl::Status Stream::shutdown_write() {
  const int fd = this->fd();
  PollDesc* const pd = this->pd();
  IoCall call(pd);
  if (!call.ok() || this->pd() != pd) return closed_error("shutdown", fd);
  if (::shutdown(fd, SHUT_WR) != 0) return errno_error(errno, "shutdown", fd);
  return absl::OkStatus();
}

}  // namespace weft::net
