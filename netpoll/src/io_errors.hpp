// How net calls turn errno values and netpoller outcomes into absl::Status: always the operation,
// the fd (or address) and the reason, so a log line says what to look at.
#pragma once

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <string.h>  // strerrordesc_np

#include <string>
#include <string_view>

#include "poll_desc.hpp"
#include "weft/detail/wait_bounds.hpp"

namespace weft::net::detail {

// The reason text comes from glibc's strerrordesc_np, which returns a constant string, rather
// than absl::ErrnoToStatus: that one fills a lazily built static table inside an uninstrumented
// library, whose first use from two fibers on two threads TSan reports as a data race it cannot
// see the guard for.
inline const char* errno_reason(int err) {
  const char* d = ::strerrordesc_np(err);
  return d ? d : "unknown error";
}

inline absl::Status errno_error(int err, std::string_view op, int fd, std::string_view extra = {}) {
  const std::string msg =
      extra.empty() ? absl::StrCat(absl::string_view(op.data(), op.size()), " fd ", fd)
                    : absl::StrCat(absl::string_view(op.data(), op.size()), " fd ", fd, " (",
                                   absl::string_view(extra.data(), extra.size()), ")");
  return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat(msg, ": ", errno_reason(err)));
}

inline absl::Status closed_error(std::string_view op, int fd) {
  return absl::FailedPreconditionError(absl::StrCat(absl::string_view(op.data(), op.size()), " fd ",
                                                    fd, ": use of a closed socket"));
}

inline absl::Status wait_error(WaitResult r, std::string_view op, int fd) {
  const absl::string_view o(op.data(), op.size());
  switch (r) {
    case WaitResult::kDeadline:
      return absl::DeadlineExceededError(absl::StrCat(o, " fd ", fd, ": deadline exceeded"));
    case WaitResult::kClosed:
      return closed_error(op, fd);
    case WaitResult::kBusy:
      return absl::FailedPreconditionError(
          absl::StrCat(o, " fd ", fd,
                       ": another fiber is already blocked in the same direction on this socket"));
    case WaitResult::kCancelled:
      return absl::CancelledError(absl::StrCat(o, " fd ", fd, ": context canceled"));
    case WaitResult::kStopped:
      return absl::CancelledError(
          absl::StrCat(o, " fd ", fd, ": the fiber was asked to stop (Task::request_stop)"));
    case WaitResult::kReady:
      break;
  }
  return absl::OkStatus();
}

// A deadline already passed fails a call before its syscall, as Go does, so a loop with a
// deadline stops even when data keeps arriving; so does a done context the socket is bound to, a
// fired bound of the call, or the fiber's stop request. Also catches a closed socket.
inline absl::Status precheck(PollDesc* pd, Mode mode, std::string_view op, int fd,
                             const weft::CancelToken& bound = {}) {
  if (!pd || fd < 0) return closed_error(op, fd);
  const std::int64_t d = pd->side(mode).deadline.load(std::memory_order_acquire);
  if (d == PollDesc::kExpired || (d > 0 && d <= weft::detail::now_ns())) {
    return wait_error(WaitResult::kDeadline, op, fd);
  }
  if (const int why = pd->ctx_why.load(std::memory_order_acquire)) {
    return wait_error(bound_result(why), op, fd);  // the socket's context is done
  }
  if (weft::detail::CancelSignal* sig = bound.signal(); sig && sig->fired()) {
    return wait_error(bound_result(sig->why()), op, fd);
  }
  if (weft::detail::CancelSignal* stop = weft::detail::current_stop_signal();
      stop && stop->fired()) {
    return wait_error(WaitResult::kStopped, op, fd);
  }
  return absl::OkStatus();
}

// One call in flight on a socket: holds a descriptor reference (poll_io_begin) so that a
// concurrent close() cannot release the fd number under it. Callers check ok() AND that the
// socket still points at this descriptor (it may have been closed, and the descriptor recycled,
// between reading it and taking the reference).
class IoCall {
 public:
  explicit IoCall(PollDesc* pd) noexcept : pd_(pd && poll_io_begin(pd) ? pd : nullptr) {}
  ~IoCall() {
    if (pd_) poll_io_end(pd_);
  }
  IoCall(const IoCall&) = delete;
  IoCall& operator=(const IoCall&) = delete;
  bool ok() const noexcept { return pd_ != nullptr; }

 private:
  PollDesc* pd_;
};

}  // namespace weft::net::detail
