// CancelSignal (weft/detail/cancel_signal.hpp): fire, attach, detach.
#include "weft/detail/cancel_signal.hpp"

#include <sched.h>

namespace weft::detail {

bool CancelSignal::fire(Why why) noexcept {
  int expected = kLive;
  if (!state_.compare_exchange_strong(expected, why, std::memory_order_acq_rel)) return false;
  // attach() checks the state under mu_, so after this loop empties the list nobody links again.
  mu_.lock();
  while (CancelCallback* cb = callbacks_.pop_front()) {
    running_ = cb;
    mu_.unlock();
    cb->fire(cb);  // may wake the waiter, which then waits in detach() until running_ changes
    mu_.lock();
    running_ = nullptr;
  }
  mu_.unlock();
  return true;
}

bool CancelSignal::attach(CancelCallback* cb) noexcept {
  mu_.lock();
  const bool live = state_.load(std::memory_order_acquire) == kLive;
  if (live) callbacks_.push_back(cb);
  mu_.unlock();
  return live;
}

void CancelSignal::detach(CancelCallback* cb) noexcept {
  mu_.lock();
  if (cb->linked) {
    callbacks_.remove(cb);
  } else {
    // Fired (or never attached): fire() may still be inside cb->fire. It runs for a handful of
    // instructions (take a lock, unlink, wake), so yielding the thread is enough.
    while (running_ == cb) {
      mu_.unlock();
      sched_yield();
      mu_.lock();
    }
  }
  mu_.unlock();
}

}  // namespace weft::detail
