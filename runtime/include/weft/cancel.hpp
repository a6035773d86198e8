// weft::CancelToken: what a bounded wait gives up on.
//
//   absl::Status s = mu.lock(ctx);                           // a Context converts to a token
//   if (sem.try_acquire_for(50ms)) { ... }                   // a deadline is one too
//   s = wg.wait(weft::CancelToken::after(std::chrono::seconds(1)));
//
// A token is a cancellation signal (a Context's), a deadline, or both. Every wait that takes one
// returns absl::Status: OK when it completed; otherwise it gave up, left the primitive as if it
// had never waited (no permit, lock, value or wake-up taken or lost), and says why:
//   kCancelled         the context was cancelled, or the fiber's Task::request_stop() was called;
//   kDeadlineExceeded  the token's deadline, or the context's, passed.
// A wait that could complete and be cancelled at the same moment completes: the caller then
// holds what it waited for and the status is OK.
//
// Stop requests. Every bounded wait (these, the timed ones such as try_lock_for, sleeps, and the
// network calls) also gives up with kCancelled when its fiber's Task::request_stop() was called,
// before or during the wait; waits without a bound (lock(), acquire(), join()) are not
// interrupted. this_fiber::stop_requested() tells a fiber that it was asked to stop.
//
// A token is a non-owning view: the Context it was made from must outlive the wait, as it does
// when the Context itself is passed to the wait.
#pragma once

#include <absl/status/status.h>

#include <chrono>
#include <cstdint>

#include "weft/detail/deadline.hpp"

namespace weft {

namespace detail {
class CancelSignal;
}

class CancelToken {
 public:
  CancelToken() = default;  // no bound of its own (only the fiber's stop request)
  static CancelToken until(std::chrono::steady_clock::time_point t) noexcept {
    CancelToken c;
    const std::int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    c.deadline_ns_ = ns <= 0 ? 1 : ns;  // 0 means "none"; a time at the epoch has passed
    return c;
  }
  template <class Rep, class Period>
  static CancelToken after(std::chrono::duration<Rep, Period> d) {
    return until(detail::deadline_after(d));
  }
  // A Context's token (weft/context.hpp converts; users rarely call this).
  static CancelToken from_signal(detail::CancelSignal* s, std::int64_t deadline_ns = 0) noexcept {
    CancelToken c;
    c.signal_ = s;
    c.deadline_ns_ = deadline_ns;
    return c;
  }

  detail::CancelSignal* signal() const noexcept { return signal_; }
  std::int64_t deadline_ns() const noexcept { return deadline_ns_; }  // 0: none

 private:
  detail::CancelSignal* signal_ = nullptr;
  std::int64_t deadline_ns_ = 0;
};

}  // namespace weft
