// TimerHeap: the runtime's one-shot timers (sleeps, CondVar timeouts, select timeouts, timer
// channels and I/O deadlines). A binary min-heap of caller-owned TimerEntry records under one
// mutex; `earliest_` mirrors the top deadline so workers can check "anything due?" without the
// lock. Who fires timers: an idle worker before it sleeps (it sleeps no longer than the earliest
// deadline, which is how a timer due on an idle runtime wakes it), and busy workers every few
// dozen scheduling rounds. Fire callbacks run outside the lock and only make fibers runnable.
// In-flight callbacks are tracked in the heap, one slot per caller (worker index), never in the
// TimerEntry record: a callback that wakes a fiber hands the record back to that fiber, which may
// return and reuse the memory before run_due() gets control back. cancel() of a popped timer
// waits while any slot still names it, so an owner that cancels may free its record after.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "weft/detail/park.hpp"
#include "weft/detail/thread_mutex.hpp"

namespace weft::detail {

class TimerHeap {
 public:
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

  // `callers`: how many threads may call run_due() at once; each passes its own slot index.
  explicit TimerHeap(std::size_t callers);
  TimerHeap(const TimerHeap&) = delete;
  TimerHeap& operator=(const TimerHeap&) = delete;
  // Timers still armed when the runtime ends (a pending after() channel that outlives run())
  // are marked unarmed, so a later timer_cancel() on them never indexes another runtime's heap.
  ~TimerHeap();

  // Returns true if `t` became the earliest timer (an idle sleeper may need a shorter sleep).
  bool add(TimerEntry* t);
  bool cancel(TimerEntry* t) noexcept;
  // Fires every timer due at `now`; returns how many.
  std::uint64_t run_due(std::int64_t now, std::size_t slot) noexcept;
  std::int64_t earliest() const noexcept { return earliest_.load(std::memory_order_acquire); }
  // For the worker about to block in the poller: ordered with add()'s seq_cst publication.
  std::int64_t earliest_seq_cst() const noexcept {
    return earliest_.load(std::memory_order_seq_cst);
  }
  std::size_t size() const noexcept;

 private:
  void sift_up(std::size_t i) noexcept ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void sift_down(std::size_t i) noexcept ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void remove_at(std::size_t i) noexcept ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void place(std::size_t i, TimerEntry* t) noexcept ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    heap_[i] = t;
    t->heap_index = static_cast<std::int32_t>(i);
  }
  void publish_earliest() noexcept ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    earliest_.store(heap_.empty() ? kNever : heap_.front()->when_ns, std::memory_order_seq_cst);
  }

  mutable ThreadMutex mu_;
  std::vector<TimerEntry*> heap_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::int64_t> earliest_{kNever};
  // firing_[slot]: the timer whose callback caller `slot` is running; set under mu_ when the
  // timer is popped, cleared (release) after the callback returned.
  std::unique_ptr<std::atomic<TimerEntry*>[]> firing_;
  std::size_t nslots_;
};

}  // namespace weft::detail
