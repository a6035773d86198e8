// WaitBounds: the bounds of one parked wait -- a CancelToken (a context's signal, a deadline) and
// the waiting fiber's own stop signal -- watched while it is parked. Every bounded wait in weft
// (sync, join, sleep, blocking, netpoll) uses it; the primitive supplies only `withdraw`.
//
//   WaitBounds b(token, &withdraw, arg);  // in the waiter's frame (or record)
//   if (!b.arm()) { <release locks>; b.disarm(); return b.status("weft::X"); }  // fired already
//   ... publish the wait record, park ...
//   b.disarm();                            // always, also when unwinding (after it, no withdraw
//                                          //   runs or is running: the frame may go)
//   if (<record was withdrawn>) return b.status("weft::X");
//
// The first bound to fire records why (CAS) and calls withdraw(arg) once, on the firing thread
// (a timer callback, a canceller's thread). withdraw must take the primitive's lock (or win its
// CAS), and only if the wait record is still published unlink it, mark it withdrawn and wake the
// waiter; if a waker got there first the wait completed and withdraw does nothing. It must not
// block or park. A bound that fires while arm() runs or before the record is published finds it
// unpublished: for lock-based primitives the caller arms with the primitive's lock held, so
// withdraw waits for the commit; lock-free primitives re-check fired() after publishing; waits
// whose withdraw is a bare wake (sleep, blocking) use a park gate (ParkGate below).
//
// arm() runs in the waiter before it parks (never inside a park commit: a source may fire while
// arm() runs and its withdraw must find the waiter's state complete). disarm() must not be called
// with the primitive's lock held: it may wait for a withdraw that waits for that lock.
#pragma once

#include <absl/status/status.h>

#include <atomic>
#include <cstdint>

#include "weft/cancel.hpp"
#include "weft/detail/cancel_signal.hpp"
#include "weft/detail/park.hpp"

namespace weft::detail {

// The Status for a wait that gave up because of `why` (a CancelSignal::Why; 0: OK):
// "<what>: context canceled" and the like.
absl::Status wait_bound_status(int why, const char* what);

// The calling fiber's stop signal (Task::request_stop fires it); null outside a fiber.
CancelSignal* current_stop_signal() noexcept;

class WaitBounds {
 public:
  using Withdraw = void (*)(void* arg);

  WaitBounds(const CancelToken& token, Withdraw withdraw, void* arg) noexcept;
  WaitBounds(const WaitBounds&) = delete;
  WaitBounds& operator=(const WaitBounds&) = delete;
  ~WaitBounds() { WEFT_ASSERT(!armed_, "WaitBounds destroyed while armed"); }

  // Attaches to the signals and arms the deadline timer (unless `defer_timer`: the caller then
  // arms timer() itself, e.g. in park_unlocking's commit). Returns false if a bound has already
  // fired (fired() says which): the caller must not park, and disarms once its lock is released.
  bool arm(bool defer_timer = false) noexcept;
  // Detaches and disarms; waits for a withdraw that is running. Idempotent.
  void disarm() noexcept;
  // Has any bound fired (and which)? 0 while none has; otherwise a CancelSignal::Why. seq_cst,
  // as is fire()'s store: a lock-free waiter publishes itself, then reads this, while fire()
  // stores it, then withdraws (reads the waiter's word); one of the two must see the other.
  int fired() const noexcept { return why_.load(std::memory_order_seq_cst); }
  // The Status for a wait that gave up: "<what>: context canceled" and the like.
  absl::Status status(const char* what) const;
  // The deadline timer, armed only if the token has a deadline (null otherwise).
  TimerEntry* timer() noexcept { return deadline_ns_ != 0 ? &timer_ : nullptr; }

 private:
  static void on_token_signal(CancelCallback* cb) noexcept;
  static void on_stop_signal(CancelCallback* cb) noexcept;
  static void on_timer(TimerEntry* t);
  void fire(int why) noexcept;
  void mark(int why) noexcept;  // records `why` if nothing fired yet, without a withdraw

  TimerEntry timer_;  // first member: on_timer recovers `this` from it
  CancelCallback on_token_;
  CancelCallback on_stop_;
  CancelSignal* token_sig_;
  CancelSignal* stop_sig_;
  std::int64_t deadline_ns_;
  Withdraw withdraw_;
  void* arg_;
  std::atomic<int> why_{0};
  bool armed_ = false;
};

// For a wait whose withdraw can only wake the waiter (sleep, a bounded blocking()): the waiter
// arms its bounds, then parks with a commit that calls parked(); the withdraw calls fire_wakes().
// A source that fires before the commit flips the gate instead of waking a fiber that is not
// parked, and the commit then calls the park off.
class ParkGate {
 public:
  // The park's commit: true to park; false if a bound fired first.
  bool parked() noexcept {
    int expected = kOpen;
    return state_.compare_exchange_strong(expected, kParked, std::memory_order_acq_rel);
  }
  // The withdraw: true if the waiter is parked and must be woken; false if it was not parked yet
  // (it will not park).
  bool fire_wakes() noexcept {
    int expected = kOpen;
    return !state_.compare_exchange_strong(expected, kFired, std::memory_order_acq_rel);
  }
  bool fired_before_park() const noexcept {
    return state_.load(std::memory_order_acquire) == kFired;
  }

 private:
  static constexpr int kOpen = 0, kParked = 1, kFired = 2;
  std::atomic<int> state_{kOpen};
};

}  // namespace weft::detail
