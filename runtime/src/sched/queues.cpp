// The run queues: where a runnable fiber waits and how a worker picks the next one. Design in
// scheduler.hpp. Per worker: runnext (the fiber a wake made runnable, run next for warm caches,
// Go's runnext), the RunQueue ring of woken/yielded fibers (FIFO, stealable), and the SpawnDeque
// of never-run fibers (newest first for the owner, oldest first for thieves). What does not fit
// in the ring waits on the worker's spill list, behind the ring: one FIFO of unbounded length,
// so thousands of fibers woken by one poll run in the order they became ready. (Spilling half
// the ring into the global queue instead, as Go does, let later wake-ups in the ring overtake
// earlier ones in the global queue, which a busy worker reads only every kGlobalCheckInterval
// picks: echo at 5,000 connections had a p99 6x its median.) One global MPMC queue takes work
// from plain threads and overflowing spawns; every worker reads it every kGlobalCheckInterval
// picks so nothing there starves.
#include <cstdio>
#include <cstdlib>

#include "sched/scheduler.hpp"
#include "sched/sync_services.hpp"
#include "sched/tuning.hpp"
#include "weft/detail/assert.hpp"
#include "weft/detail/fast_rand.hpp"

namespace weft::detail {

void Runtime::push_global(Fiber* f) noexcept {
  gq_size_.fetch_add(1, std::memory_order_relaxed);
  if (!gq_.push(f)) {
    std::fprintf(stderr, "weft: out of memory growing the global run queue\n");
    std::abort();
  }
}

void Runtime::push_spill(Worker& w, Fiber* f) noexcept {
  // Once anything has spilled, later fibers queue behind it: FIFO across ring and spill.
  w.spill.push_back(f);
  w.spill_size.store(w.spill.size(), std::memory_order_relaxed);
}

void Runtime::refill_runq(Worker& w) noexcept {
  // Only the owner pushes, and thieves only shrink the ring, so `room` pushes all succeed.
  std::uint32_t room = RunQueue::kCapacity - w.runq.size();
  while (room-- > 0 && !w.spill.empty()) {
    const bool pushed = w.runq.push(w.spill.pop_front());
    WEFT_ASSERT(pushed, "refilling the run queue beyond its free room");
    (void)pushed;
  }
  w.spill_size.store(w.spill.size(), std::memory_order_relaxed);
  // Now stealable: a sleeping worker can share the backlog.
  wake_idle_worker_to_share();
}

bool Runtime::ready(Fiber* f, Worker* w, ReadyPlace place) noexcept {
  // Every caller won its wait's own arbitration first (the channel or wait-queue lock, a
  // select's `fired`, a PollDesc slot, the join word, a timer's removal), so one park has at most
  // one waker. The only party that claims a parked fiber without such a win is the shutdown
  // unwind, which runs on worker 0's thread once every other worker thread was joined: a wake on
  // a worker thread before it happens-before it, and one during it runs on its own thread. So a
  // worker claims with a plain store outside the unwind; a plain thread, which may run beside
  // the unwind, and everything during it keep the CAS.
  const bool own_worker = w && w->rt == this;
  if (own_worker && !unwinding_) {
    fiber_take_parked(f);
  } else if (!fiber_claim_parked(f)) {
    return false;
  }
  track_wake(*this, f, w);  // a sampled park ends here (tracking.hpp)
  if (place == kQueueTail) {
    WEFT_ASSERT(own_worker, "ready(kQueueTail) needs the caller's own worker");
    push_local(*w, f);
    return true;
  }
  if (own_worker) {
    // runnext: the woken fiber runs next on this worker (warm caches, Go's runnext). Another
    // worker takes it only once this one is held by a fiber (steal; the monitor wakes a helper
    // for that), so only a fiber it pushes out into the queue needs another worker now.
    if (Fiber* old = exchange_runnext(*w, f)) {
      push_local(*w, old);
      wake_idle_worker_to_share();
    }
    return true;
  }
  push_global(f);
  wake_idle_worker();
  return true;
}

bool Runtime::submit_spawned(Fiber* f) noexcept {
  Worker* w = current_worker();
  if (w && w->rt == this) {
    // Either queue is one this worker takes from: a helper is for parallelism only.
    if (w->spawned_q.push(f)) {
      wake_idle_worker_to_share();
      return false;
    }
    push_global(f);
    wake_idle_worker_to_share();
    return true;
  }
  push_global(f);
  wake_idle_worker();
  return false;
}

Fiber* Runtime::pop_global(Worker& w) noexcept {
  Fiber* f = nullptr;
  if (gq_size_.load(std::memory_order_relaxed) <= 0 || !gq_.pop(f)) return nullptr;
  gq_size_.fetch_sub(1, std::memory_order_relaxed);
  // Take a fair share into the local queue, as Go's globrunqget does.
  std::int64_t share =
      gq_size_.load(std::memory_order_relaxed) / static_cast<std::int64_t>(nworkers());
  if (share > RunQueue::kCapacity / 2) share = RunQueue::kCapacity / 2;
  for (std::int64_t i = 0; i < share; ++i) {
    Fiber* g = nullptr;
    if (!gq_.pop(g)) break;
    gq_size_.fetch_sub(1, std::memory_order_relaxed);
    push_local(w, g);
  }
  return f;
}

Fiber* Runtime::pick_next(Worker& w) noexcept {
  if (unwinding_ || stopping_.load(std::memory_order_relaxed)) return nullptr;
  // No timers here: park() calls this while its fiber still holds the lock that its commit
  // releases, and a timer callback may need that very lock. Busy workers fire timers in
  // after_switch (maybe_run_timers_and_poll), where no lock is held.
  const std::uint32_t tick = ++w.schedtick;
  if (tick % kGlobalCheckInterval == 0) {
    if (Fiber* f = pop_global(w)) return f;
  }
  if (w.runnext_streak < kRunnextStreakMax || w.runq.empty()) {
    if (w.runnext.peek()) {
      if (Fiber* f = exchange_runnext(w, nullptr)) {
        ++w.runnext_streak;
        return f;
      }
    }
  }
  w.runnext_streak = 0;
  // The ring drained below half while fibers wait on the spill list: move them up, in order.
  if (!w.spill.empty() && w.runq.size() <= RunQueue::kCapacity / 2) refill_runq(w);
  // Unstarted fibers first (depth-first through fork-join trees), but every few rounds the
  // woken ones first, so a spawning tree cannot starve them.
  if (tick % kRunQueueFirstInterval == 0) {
    if (Fiber* f = pop_runq(w)) return f;
  }
  if (Fiber* f = w.spawned_q.take()) return f;
  if (Fiber* f = pop_runq(w)) return f;
  return pop_global(w);
}

bool Runtime::lock_spin_may_help(const Worker& w) const noexcept {
  return nworkers() > 1 &&
         nsleeping_.load(std::memory_order_relaxed) + 1 < static_cast<int>(nworkers()) &&
         w.runq.empty() && w.spawned_q.empty() && w.spill.empty() && !w.runnext.peek();
}

bool lock_spin_may_help() noexcept {
  const Worker* w = current_worker();
  return w && w->rt->lock_spin_may_help(*w);
}

bool Runtime::has_queued(const Worker& w) noexcept {
  return !w.runq.empty() || !w.spawned_q.empty() || w.runnext.peek(std::memory_order_seq_cst) ||
         w.spill_size.load(std::memory_order_relaxed) != 0;
}

bool Runtime::queues_empty() noexcept {
  if (gq_size_.load(std::memory_order_seq_cst) > 0) return false;
  for (auto& w : workers_) {
    if (has_queued(*w)) return false;
  }
  return true;
}

namespace {

// Steal pacing: may thief `w` take the one fiber queued on `victim`? Only once it has seen that
// fiber there for kLoneStealDelayNs. A worker with one queued fiber is running another; it runs
// the queued one itself as soon as that one parks or yields, and for the usual reason a fiber
// waits behind a running one (that one woke it, as a message's sender wakes its receiver) that
// is soon. Taken at once, it moves its cache lines to the thief, and two fibers that talk keep
// doing so: select2 (a consumer selecting over two producers' channels) ran at 86 ns per
// select on two workers, the producers stolen back and forth, against 30 ns on one worker. With
// a 20 us delay it takes about 36 ns, with 100 us about 30 ns (docs/architecture.md, "Stealing
// and spinning", has what the delay costs in latency and idle CPU). Per victim, so that lone
// fibers on several workers each get their turn.
bool lone_fiber_waited(Worker& w, const Worker& victim) noexcept {
  return w.sightings[victim.index].lone_head.unchanged_for(victim.runq.head_position(), now_ns(),
                                                           kLoneStealDelayNs);
}

// May thief `w` take `victim`'s runnext? runnext belongs to its worker, which runs it at its next
// switch: a receiver woken by its sender runs as soon as the sender parks, on warm caches, and a
// ping-pong pair stays on one worker. But a worker that has not switched for kLoneStealDelayNs
// (Go waits 3 us before it steals a running P's runnext) is held by one fiber, which computes or
// sits in a system call, and the fiber in its runnext waits behind it while this worker idles.
// The switch count, not the fiber in the slot, says so: a pair that hands off through runnext
// switches at every hand-off, so it is taken apart only if one of them runs for the whole delay.
bool runnext_waited(Worker& w, const Worker& victim) noexcept {
  return w.sightings[victim.index].held.unchanged_for(
      victim.switches.load(std::memory_order_relaxed), now_ns(), kLoneStealDelayNs);
}

}  // namespace

Fiber* Runtime::steal(Worker& w) noexcept {
  const unsigned n = nworkers();
  if (n < 2) return nullptr;
  const unsigned start = static_cast<unsigned>(xorshift64(w.rng) % n);
  for (unsigned i = 0; i < n; ++i) {
    Worker& victim = *workers_[(start + i) % n];
    if (&victim == &w) continue;
    Fiber* batch[SpawnDeque::kMaxStealBatch];
    if (const std::size_t got = victim.spawned_q.steal_batch(batch, SpawnDeque::kMaxStealBatch)) {
      for (std::size_t j = 1; j < got; ++j) {
        if (!w.spawned_q.push(batch[j])) push_local(w, batch[j]);
      }
      w.steals.fetch_add(1, std::memory_order_relaxed);
      return batch[0];
    }
    // A worker the monitor saw stuck in one fiber will not get to its queue soon: no delay.
    if (victim.runq.size() == 1 && !victim.stuck.load(std::memory_order_relaxed) &&
        !lone_fiber_waited(w, victim)) {
      continue;
    }
    if (Fiber* f = victim.runq.steal_into(w.runq)) {
      w.steals.fetch_add(1, std::memory_order_relaxed);
      return f;
    }
    // runnext belongs to its worker, unless one fiber holds that worker (runnext_waited; the
    // monitor's stuck mark says so too, without the wait).
    if (victim.runnext.peek() &&
        (victim.stuck.load(std::memory_order_relaxed) || runnext_waited(w, victim))) {
      if (Fiber* f = victim.runnext.take()) {
        w.steals.fetch_add(1, std::memory_order_relaxed);
        return f;
      }
    }
  }
  return nullptr;
}

}  // namespace weft::detail
