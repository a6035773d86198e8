// CancelSignal: the one-shot event that bounded waits give up on. A Context's cancel node embeds
// one (cancel() and its deadline timer fire it), and every fiber has one (Task::request_stop()
// fires it). Like C++20's std::stop_source + std::stop_callback, without an allocation.
//
// Protocol. fire(why) moves the state live -> why once (CAS; later calls do nothing) and then
// runs every attached callback, one at a time, on the firing thread. A waiter attaches a
// CancelCallback from its own frame before it parks and detaches it after it woke, whatever woke
// it. attach() fails when the signal has already fired (the waiter must not park). detach() that
// finds its callback running waits until it returned, so the frame holding the callback outlives
// every use of it.
//
// Locks. `mu_` guards the callback list and `running_`; it is never held while a callback runs,
// so a callback may take a primitive's SpinLock, and a primitive may attach while it holds its own
// SpinLock (order: primitive lock -> mu_). A callback must not block or park, and must not detach
// itself (it runs on the firing thread, which may be a timer callback or a plain thread).
#pragma once

#include <absl/base/thread_annotations.h>

#include <atomic>
#include <cstdint>

#include "weft/detail/assert.hpp"
#include "weft/detail/intrusive_list.hpp"
#include "weft/detail/spin_lock.hpp"

namespace weft::detail {

struct CancelCallback {
  void (*fire)(CancelCallback* self) = nullptr;  // runs at most once, on the firing thread
  CancelCallback* prev = nullptr;                // links: the signal's mu_
  CancelCallback* next = nullptr;
  bool linked = false;
};

class CancelSignal {
 public:
  // Why a signal fired. kStopped: Task::request_stop (the fiber's own signal).
  enum Why : int { kLive = 0, kCancelled = 1, kDeadline = 2, kStopped = 3 };

  CancelSignal() = default;
  CancelSignal(const CancelSignal&) = delete;
  CancelSignal& operator=(const CancelSignal&) = delete;
  ~CancelSignal() { WEFT_ASSERT(callbacks_empty(), "a CancelSignal destroyed with waiters"); }

  int why() const noexcept { return state_.load(std::memory_order_acquire); }
  bool fired() const noexcept { return why() != kLive; }
  // The first call wins: it sets `why` and runs the callbacks, returning true. Others: false.
  bool fire(Why why) noexcept;
  // Links `cb` unless the signal has fired (then returns false and `cb` is not linked).
  bool attach(CancelCallback* cb) noexcept;
  // Unlinks `cb` if it is still linked; if fire() is running it right now, waits until it returned.
  void detach(CancelCallback* cb) noexcept;

 private:
  bool callbacks_empty() noexcept {
    mu_.lock();
    const bool e = callbacks_.empty();
    mu_.unlock();
    return e;
  }
  std::atomic<int> state_{kLive};
  SpinLock mu_;
  IntrusiveList<CancelCallback> callbacks_ ABSL_GUARDED_BY(mu_);
  CancelCallback* running_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace weft::detail
