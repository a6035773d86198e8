// WaitBounds (weft/detail/wait_bounds.hpp): arm, disarm, and the first-fire-wins withdrawal.
#include "weft/detail/wait_bounds.hpp"

#include <cstddef>
#include <string>

#include "weft/detail/park.hpp"

namespace weft::detail {

WaitBounds::WaitBounds(const CancelToken& token, Withdraw withdraw, void* arg) noexcept
    : token_sig_(token.signal()),
      stop_sig_(current_stop_signal()),
      deadline_ns_(token.deadline_ns()),
      withdraw_(withdraw),
      arg_(arg) {
  on_token_.fire = &on_token_signal;
  on_stop_.fire = &on_stop_signal;
  timer_.when_ns = deadline_ns_;
  timer_.fire = &on_timer;
}

bool WaitBounds::arm(bool defer_timer) noexcept {
  WEFT_ASSERT(!armed_, "WaitBounds armed twice");
  // Every field is written before the first attach: a source may fire (and its withdraw wake the
  // waiter) as soon as it is attached. A failure detaches nothing here -- a callback of ours may
  // be running and waiting for the caller's lock -- the caller's disarm() does, lock released.
  armed_ = true;
  if (deadline_ns_ != 0 && deadline_ns_ <= now_ns()) {
    mark(CancelSignal::kDeadline);
    return false;
  }
  if (token_sig_ && !token_sig_->attach(&on_token_)) {
    mark(token_sig_->why());
    return false;
  }
  if (stop_sig_ && !stop_sig_->attach(&on_stop_)) {
    mark(CancelSignal::kStopped);
    return false;
  }
  if (deadline_ns_ != 0 && !defer_timer) timer_add(&timer_);
  return true;
}

void WaitBounds::mark(int why) noexcept {
  int expected = 0;
  why_.compare_exchange_strong(expected, why, std::memory_order_acq_rel);
}

void WaitBounds::disarm() noexcept {
  if (!armed_) return;
  armed_ = false;
  // timer_cancel and detach both wait for a callback that is running right now; either is a
  // no-op for a source that was never armed.
  if (deadline_ns_ != 0) timer_cancel(&timer_);
  if (token_sig_) token_sig_->detach(&on_token_);
  if (stop_sig_) stop_sig_->detach(&on_stop_);
}

void WaitBounds::fire(int why) noexcept {
  int expected = 0;
  if (!why_.compare_exchange_strong(expected, why, std::memory_order_seq_cst)) return;
  withdraw_(arg_);  // then reads the waiter's word: see fired()
}

void WaitBounds::on_token_signal(CancelCallback* cb) noexcept {
  auto* self =
      reinterpret_cast<WaitBounds*>(reinterpret_cast<char*>(cb) - offsetof(WaitBounds, on_token_));
  self->fire(self->token_sig_->why());  // kCancelled, or kDeadline from the context's timer
}

void WaitBounds::on_stop_signal(CancelCallback* cb) noexcept {
  auto* self =
      reinterpret_cast<WaitBounds*>(reinterpret_cast<char*>(cb) - offsetof(WaitBounds, on_stop_));
  self->fire(CancelSignal::kStopped);
}

void WaitBounds::on_timer(TimerEntry* t) {
  reinterpret_cast<WaitBounds*>(t)->fire(CancelSignal::kDeadline);
}

absl::Status WaitBounds::status(const char* what) const { return wait_bound_status(fired(), what); }

absl::Status wait_bound_status(int why, const char* what) {
  switch (why) {
    case CancelSignal::kCancelled:
      return absl::CancelledError(std::string(what) + ": context canceled");
    case CancelSignal::kDeadline:
      return absl::DeadlineExceededError(std::string(what) + ": deadline exceeded");
    case CancelSignal::kStopped:
      return absl::CancelledError(std::string(what) +
                                  ": the fiber was asked to stop (Task::request_stop)");
    default:
      return absl::OkStatus();
  }
}

}  // namespace weft::detail
