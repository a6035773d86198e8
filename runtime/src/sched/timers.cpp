// Timer heap; design in timers.hpp.
#include "sched/timers.hpp"

#include <sched.h>

#include "sched/scheduler.hpp"
#include "weft/detail/assert.hpp"

namespace weft::detail {

TimerHeap::TimerHeap(std::size_t callers)
    : firing_(std::make_unique<std::atomic<TimerEntry*>[]>(callers)), nslots_(callers) {
  for (std::size_t i = 0; i < callers; ++i) firing_[i].store(nullptr, std::memory_order_relaxed);
}

TimerHeap::~TimerHeap() {
  for (TimerEntry* t : heap_) t->heap_index = -1;
}

bool TimerHeap::add(TimerEntry* t) {
  ThreadMutexLock lock(mu_);
  WEFT_ASSERT(t->heap_index < 0, "timer armed twice");
  heap_.push_back(t);
  place(heap_.size() - 1, t);
  sift_up(heap_.size() - 1);
  publish_earliest();
  return heap_.front() == t;
}

bool TimerHeap::cancel(TimerEntry* t) noexcept {
  {
    ThreadMutexLock lock(mu_);
    if (t->heap_index >= 0) {
      remove_at(static_cast<std::size_t>(t->heap_index));
      publish_earliest();
      return true;
    }
  }
  // Already popped: wait until its callback returned, so the caller may free the record. A slot
  // set to `t` was set under mu_ before the lock above, so it cannot be missed here.
  for (std::size_t i = 0; i < nslots_; ++i) {
    while (firing_[i].load(std::memory_order_acquire) == t) sched_yield();
  }
  return false;
}

std::uint64_t TimerHeap::run_due(std::int64_t now, std::size_t slot) noexcept {
  WEFT_ASSERT(slot < nslots_, "timer caller slot out of range");
  std::uint64_t fired = 0;
  for (;;) {
    TimerEntry* t;
    {
      ThreadMutexLock lock(mu_);
      if (heap_.empty() || heap_.front()->when_ns > now) {
        publish_earliest();
        return fired;
      }
      t = heap_.front();
      remove_at(0);
      firing_[slot].store(t, std::memory_order_relaxed);
      publish_earliest();
    }
    t->fire(t);  // the last touch of *t
    firing_[slot].store(nullptr, std::memory_order_release);
    ++fired;
  }
}

std::size_t TimerHeap::size() const noexcept {
  ThreadMutexLock lock(mu_);
  return heap_.size();
}

void TimerHeap::sift_up(std::size_t i) noexcept {
  TimerEntry* t = heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (heap_[parent]->when_ns <= t->when_ns) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, t);
}

void TimerHeap::sift_down(std::size_t i) noexcept {
  TimerEntry* t = heap_[i];
  const std::size_t n = heap_.size();
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_[child + 1]->when_ns < heap_[child]->when_ns) ++child;
    if (heap_[child]->when_ns >= t->when_ns) break;
    place(i, heap_[child]);
    i = child;
  }
  place(i, t);
}

void TimerHeap::remove_at(std::size_t i) noexcept {
  TimerEntry* gone = heap_[i];
  TimerEntry* last = heap_.back();
  heap_.pop_back();
  // After a burst of armed timers (a deadline per connection), give the array back: it never
  // shrinks by itself. At an eighth full, so the cost stays amortised O(1).
  if (heap_.capacity() > 4096 && heap_.size() * 8 < heap_.capacity()) heap_.shrink_to_fit();
  gone->heap_index = -1;
  if (i < heap_.size()) {
    place(i, last);
    sift_down(i);
    sift_up(static_cast<std::size_t>(last->heap_index));
  }
}

void timer_add(TimerEntry* t) {
  Runtime& rt = runtime_or_throw("a weft timer");
  if (rt.timers().add(t)) rt.timers_changed();
}

bool timer_cancel(TimerEntry* t) noexcept {
  Runtime* rt = current_runtime();
  return rt ? rt->timers().cancel(t) : false;
}

}  // namespace weft::detail
