// The idle path and the poller seat: what a worker does when it has nothing to run, how it is
// woken, and how timers and I/O readiness get collected while every worker is busy. Design and
// the no-lost-wakeup argument in scheduler.hpp.
#include <algorithm>

#include "core/fiber_alloc.hpp"
#include "core/thread_parker.hpp"
#include "sched/fiber_lifecycle.hpp"
#include "sched/scheduler.hpp"
#include "sched/timers.hpp"
#include "sched/tuning.hpp"

namespace weft::detail {

void Runtime::run_timers_and_poll(Worker& w) noexcept {
  const std::int64_t now = now_ns();
  if (timers_->earliest() <= now) run_due_timers(w);
  poller_->flush();  // operations this worker's fibers queued reach the kernel while it stays busy
  // While every worker is busy nobody sits in the poller, so I/O readiness would wait for the
  // next idle moment; a busy worker collects it when nobody has polled for a while (Go's sysmon
  // netpoll). Only with fibers parked on the poller, never concurrently with the poller seat, and
  // only by a worker whose own queue is short: what it collects goes to its queue's tail, so the
  // readiness reaches the worker that will run it soonest (Go polls from a P that ran dry). A
  // worker with a backlog leaves the events in the kernel's ready list, which is FIFO too. (Polling
  // regardless of the backlog, echo at 5,000 connections on 4 of 16 cores had a p99 2.4-2.8x Go's
  // while its median was half Go's.) A queue that never drains (fibers that keep
  // yielding) must not starve I/O, so past kBusyPollBackstopNs any busy worker polls.
  if (poller_->waiters() == 0) return;
  const std::int64_t since_poll = now - last_poll_ns_.load(std::memory_order_relaxed);
  if (since_poll <= kBusyPollIntervalNs) return;
  const bool short_queue = w.runq.size() + w.spill.size() <= kBusyPollMaxQueued;
  if ((short_queue || since_poll > kBusyPollBackstopNs) &&
      !polling_.exchange(true, std::memory_order_acq_rel)) {
    last_poll_ns_.store(now, std::memory_order_relaxed);
    FiberList ready;
    poller_->poll(0, ready);
    release_poller_seat();
    if (!ready.empty()) place_ready(w, ready);
  }
}

void Runtime::run_due_timers(Worker& w) noexcept {
  const std::uint64_t n = timers_->run_due(now_ns(), w.index);
  if (n) w.timers_fired.fetch_add(n, std::memory_order_relaxed);
}

void Runtime::place_ready(Worker& w, FiberList& list) noexcept {
  // Pollers hand back fibers they woke; they are Parked until ready() takes them here. In poll
  // order to the tail of the run queue, then one idle worker is woken for the batch.
  while (Fiber* f = list.pop_front()) ready(f, &w, kQueueTail);
  wake_idle_worker();
}
void Runtime::wake_idle_worker() noexcept {
  // A seq_cst read-modify-write orders our queue push before the reads of nspinning_ and
  // nsleeping_ (a full fence on x86, and visible to TSan, unlike atomic_thread_fence).
  if (nspinning_.fetch_add(0, std::memory_order_seq_cst) != 0) return;
  if (nsleeping_.load(std::memory_order_relaxed) == 0) {
    if (polling_.load(std::memory_order_relaxed) &&
        !poller_woken_.exchange(true, std::memory_order_acq_rel)) {
      poller_->wakeup();
    }
    return;
  }
  int zero = 0;
  // The woken worker starts out spinning; counting it now stops a burst of submits from waking
  // every sleeper for one piece of work (Go's wakep).
  if (!nspinning_.compare_exchange_strong(zero, 1, std::memory_order_acq_rel)) return;
  Worker* target = nullptr;
  {
    ThreadMutexLock lock(idle_mu_);
    if (!sleepers_.empty()) {
      target = sleepers_.back();
      sleepers_.pop_back();
      idle_slots_[target->index].asleep = false;
      idle_slots_[target->index].counted_spinning = true;
      nsleeping_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }
  if (!target) {
    nspinning_.fetch_sub(1, std::memory_order_acq_rel);
    return;
  }
  target->wake_seq.fetch_add(1, std::memory_order_release);
  futex_wake(&target->wake_seq, 1);
}

void Runtime::wake_all() noexcept {
  std::vector<Worker*> all;
  {
    ThreadMutexLock lock(idle_mu_);
    for (Worker* w : sleepers_) idle_slots_[w->index].asleep = false;
    all.swap(sleepers_);
    nsleeping_.store(0, std::memory_order_seq_cst);
  }
  for (Worker* w : all) {
    w->wake_seq.fetch_add(1, std::memory_order_release);
    futex_wake(&w->wake_seq, 1);
  }
  poller_->wakeup();
}

void Runtime::release_poller_seat() noexcept {
  // A wakeup aimed at this poll (poller_woken_) must not outlive it: left set, it would make
  // every later wakeup of the next blocking poll look "already on its way", so a timer armed
  // during that poll would never shorten its (possibly infinite) timeout. A wakeup still
  // pending in the poller just makes the next poll return at once.
  poller_woken_.store(false, std::memory_order_release);
  polling_.store(false, std::memory_order_release);
}

void Runtime::timers_changed() noexcept {
  // seq_cst: see Runtime::poll_or_sleep (the heap published the new earliest deadline with
  // seq_cst).
  if (polling_.load(std::memory_order_seq_cst) &&
      !poller_woken_.exchange(true, std::memory_order_acq_rel)) {
    poller_->wakeup();
  }
}

void Runtime::stop_spinning(Worker& w) noexcept {
  if (!w.spinning) return;
  w.spinning = false;
  // The last spinner found work: there may be more, so let another worker look (Go's
  // resetspinning).
  if (nspinning_.fetch_sub(1, std::memory_order_acq_rel) == 1) wake_idle_worker();
}

bool Runtime::poll_or_sleep(Worker& w) {
  // Try to be the one worker that blocks in the poller (and so keeps time for the timers).
  if (!polling_.exchange(true, std::memory_order_seq_cst)) {
    if (!queues_empty() || stopping()) {
      release_poller_seat();
      return false;
    }
    // seq_cst, paired with timers_changed(): either this read sees a timer armed concurrently,
    // or its timers_changed() sees polling_ and wakes us (a store-buffer race otherwise).
    const std::int64_t next = timers_->earliest_seq_cst();
    std::int64_t timeout = -1;
    if (next != TimerHeap::kNever) {
      timeout = next - now_ns();
      if (timeout < 0) timeout = 0;
    }
    FiberList ready;
    poller_->poll(timeout, ready);
    last_poll_ns_.store(now_ns(), std::memory_order_relaxed);
    release_poller_seat();
    run_due_timers(w);
    if (!ready.empty()) place_ready(w, ready);
    return true;
  }
  {
    ThreadMutexLock lock(idle_mu_);
    sleepers_.push_back(&w);
    idle_slots_[w.index].asleep = true;
    idle_slots_[w.index].counted_spinning = false;
    nsleeping_.fetch_add(1, std::memory_order_seq_cst);
  }
  if (!queues_empty() || stopping() || !polling_.load(std::memory_order_seq_cst)) {
    // Work arrived, or the poller seat became free (someone must keep time): don't sleep.
    ThreadMutexLock lock(idle_mu_);
    if (idle_slots_[w.index].asleep) {
      idle_slots_[w.index].asleep = false;
      std::erase(sleepers_, &w);
      nsleeping_.fetch_sub(1, std::memory_order_seq_cst);
      return false;
    }
    w.spinning = idle_slots_[w.index]
                     .counted_spinning;  // a waker took us off the list (and maybe counted us)
    return true;
  }
  for (;;) {
    std::uint32_t seq;
    {
      // Only the waker that takes us off the list counts: a late increment of wake_seq from an
      // earlier wake-up must not end this sleep. We read the sequence under the lock while still
      // listed, so the wake that unlists us bumps it after this read and the futex returns.
      ThreadMutexLock lock(idle_mu_);
      if (!idle_slots_[w.index].asleep) {
        w.spinning = idle_slots_[w.index].counted_spinning;
        return true;
      }
      seq = w.wake_seq.load(std::memory_order_acquire);
    }
    futex_wait(&w.wake_seq, seq);
  }
}

namespace {

// The idle path found work queued that it could not take: a lone fiber still younger than the
// steal pacing allows (Runtime::steal), a runnext slot, or work another worker took first.
// Looking again at once re-reads the other workers' queue ends and runnext slots, lines their
// owners write on every push, pop and wake, and each read costs the owner a cache miss at its
// next write: select2 on two workers (a consumer busy on one, the other idle) ran at 46 ns per
// select with the idle worker re-checking in a tight loop, 37 ns with this pause. The pause
// reads only the clock, and bounds how late the idle worker sees work it may take.
void pause_before_looking_again() noexcept {
  const std::int64_t until = now_ns() + kIdleRecheckPauseNs;
  while (now_ns() < until) __builtin_ia32_pause();
}

}  // namespace

Fiber* Runtime::find_runnable(Worker& w) {
  w.idle.store(true, std::memory_order_relaxed);
  for (;;) {
    if (stopping()) break;
    if (Fiber* f = pick_next(w)) {
      // A waker may have counted us as spinning (poll_or_sleep); found work ends that, and the
      // last spinner to find work lets another worker look (Go's resetspinning). Left counted,
      // nspinning_ stayed up while we ran, and wake_idle_worker() woke nobody for new work.
      stop_spinning(w);
      w.idle.store(false, std::memory_order_relaxed);
      return f;
    }
    if (timers_->earliest() <= now_ns()) {
      run_due_timers(w);
      continue;
    }
    if (poller_->waiters() > 0 && !polling_.exchange(true, std::memory_order_acq_rel)) {
      FiberList ready;
      poller_->poll(0, ready);
      last_poll_ns_.store(now_ns(), std::memory_order_relaxed);
      release_poller_seat();
      if (!ready.empty()) {
        place_ready(w, ready);
        continue;
      }
    }
    // Spin-steal, but keep at most half of the busy workers spinning (Go's rule).
    if (!w.spinning) {
      const int spinning = nspinning_.load(std::memory_order_relaxed);
      const int busy = static_cast<int>(nworkers()) - nsleeping_.load(std::memory_order_relaxed);
      if (2 * spinning < busy) {
        nspinning_.fetch_add(1, std::memory_order_acq_rel);
        w.spinning = true;
      }
    }
    if (w.spinning) {
      for (int round = 0; round < kStealRounds; ++round) {
        if (Fiber* f = steal(w)) {
          stop_spinning(w);
          w.idle.store(false, std::memory_order_relaxed);
          return f;
        }
      }
      w.spinning = false;
      nspinning_.fetch_sub(1, std::memory_order_acq_rel);
      // Re-check after un-counting ourselves: a submitter that saw us spinning did not wake
      // anyone, so the work it made is ours to find.
      if (!queues_empty()) {
        pause_before_looking_again();
        continue;
      }
    }
    // Operations queued by the fibers this worker ran go to the kernel before it blocks or
    // sleeps: a completion they wait for must not wait for the next poll.
    poller_->flush();
    // Ended fibers waiting for a batch leave the registry, and stacks and fiber headers cached
    // beyond a few go where the monitor's trim can give their memory back.
    fiber_retire_all(w);
    stacks_->shed_idle_surplus(w.stacks);
    FiberAlloc::shed_thread_cache(kIdleFiberChunks);
    if (!poll_or_sleep(w) && !queues_empty()) pause_before_looking_again();
  }
  if (w.spinning) {
    w.spinning = false;
    nspinning_.fetch_sub(1, std::memory_order_acq_rel);
  }
  w.idle.store(false, std::memory_order_relaxed);
  return nullptr;
}

}  // namespace weft::detail
