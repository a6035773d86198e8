// Worker: one per kernel thread of the runtime (Go's P and M in one). Its fields are grouped by
// who may touch them: the owner thread only; its queues (lock-free, stealable); counters written
// by the owner and summed by stats() and the monitor; the metrics' histograms, written by the
// owner and summed by write_metrics (sched/tracking.hpp); the monitor's view; and the futex word
// it sleeps on (its list membership is Runtime::idle_slots_, guarded by Runtime::idle_mu_). Design
// of the scheduler in scheduler.hpp.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/fiber.hpp"
#include "core/registry.hpp"
#include "core/stack_pool.hpp"
#include "sched/run_queue.hpp"
#include "sched/runnext_slot.hpp"
#include "sched/spawn_deque.hpp"
#include "sched/tracking.hpp"
#include "weft/detail/fiber_list.hpp"
#include "weft/detail/park.hpp"

namespace weft::detail {

class Runtime;

// What the fiber that resumes next must do on behalf of the one that switched away.
struct Pending {
  enum Kind : std::uint8_t { kNone, kYield, kPark, kExit };
  Kind kind = kNone;
  Fiber* from = nullptr;  // null: switched away from the scheduler context
  CommitFn commit = nullptr;
  void* arg = nullptr;
};

struct alignas(64) Worker {
  Runtime* rt = nullptr;
  unsigned index = 0;

  // Owner-thread state.
  Fiber* current = nullptr;  // running fiber, null in the scheduler context
  Pending pending;
  fcontext_t sched_ctx = nullptr;
  StackCache stacks;
  std::uint32_t schedtick = 0;
  std::uint32_t runnext_streak = 0;
  std::uint32_t timer_tick = 0;
  std::uint32_t yield_tick = 0;  // yields that switched, for sampling (tracking.hpp)
  // Cooperative budget (coop_tick): operations `coop_owner` completed without parking in a row.
  const Fiber* coop_owner = nullptr;
  std::uint32_t coop_count = 0;
  std::uint64_t rng = 0;
  // Steal pacing (Runtime::steal), as a thief: a value seen on another worker, and since when.
  struct Sighting {
    std::uint64_t value = 0;
    std::int64_t since_ns = 0;  // 0: nothing seen yet
    // Records `v` seen at `now`; true once the same value has been seen for `delay`.
    bool unchanged_for(std::uint64_t v, std::int64_t now, std::int64_t delay) noexcept {
      if (since_ns == 0 || value != v) {
        value = v;
        since_ns = now;
        return false;
      }
      return now - since_ns >= delay;
    }
  };
  // Per other worker (by index): the head position of the one fiber seen alone in its run queue,
  // and its switch count while its runnext was occupied.
  struct VictimSightings {
    Sighting lone_head;
    Sighting held;
  };
  std::vector<VictimSightings> sightings;  // one per worker, sized before the workers start
  std::uint64_t next_id = 0, id_end = 0;   // batch of fiber ids handed to this worker
  // Fibers that ended here but were started by another worker, still registered in its shard:
  // unlinked and released a batch at a time (fiber_retire). Bit i of retiring_mask: list i is
  // not empty.
  std::array<FiberList, Registry::kShards> retiring;
  std::uint64_t retiring_mask = 0;
  static_assert(Registry::kShards <= 64, "retiring_mask has one bit per registry shard");
  int* errno_addr = nullptr;   // this thread's errno (bind_thread_state)
  void* eh_globals = nullptr;  // this thread's __cxa_eh_globals
#if defined(__SANITIZE_ADDRESS__)
  const void* thread_stack_bottom = nullptr;
  std::size_t thread_stack_size = 0;
  void* sched_fake_stack = nullptr;
#endif
#if defined(__SANITIZE_THREAD__)
  void* tsan_sched_fiber = nullptr;
#endif

  // Queues.
  RunQueue runq;  // runnable fibers that ran before (woken, yielded): FIFO
  // Owner only: what does not fit in runq, in arrival order after everything in it (an unbounded
  // FIFO tail, so a burst of poller wake-ups is served in the order it became ready). The owner
  // moves it into runq as runq drains (Runtime::refill_runq), so thieves see the head of it.
  FiberList spill;
  std::atomic<std::uint64_t> spill_size{0};  // spill.size, for other threads (queues_empty)
  SpawnDeque spawned_q;  // spawned, never run: newest first for the owner, oldest for thieves
  RunnextSlot runnext;   // owner; thieves take it only from a held worker (runnext_slot.hpp)

  // Counters: written by the owner only (relaxed), summed by stats() and the monitor.
  std::atomic<std::uint64_t> switches{0};
  std::atomic<std::uint64_t> steals{0};
  std::atomic<std::uint64_t> parks{0};
  std::atomic<std::uint64_t> spawned{0};
  std::atomic<std::uint64_t> finished{0};
  std::atomic<std::uint64_t> stacks_in_use{0};  // may go negative-then-positive across workers
  std::atomic<std::uint64_t> timers_fired{0};

  // Sampled histograms (tracking.hpp): written by the owner only (relaxed), summed by
  // write_metrics.
  LatencyHistogram park_hist;     // park -> wake, recorded by the waker (ready() on this thread)
  LatencyHistogram latency_hist;  // runnable -> running, recorded by switch_to

  // Monitor view.
  std::atomic<std::uint64_t> running_id{0};  // id of the fiber it runs now; 0 in the scheduler
  std::atomic<bool> idle{false};             // in the idle path (sleeping, spinning or polling)
  std::atomic<bool> stuck{false};            // the monitor saw one fiber hold it too long
  std::uint64_t mon_seen_seq = 0;            // monitor thread only
  std::int64_t mon_stuck_since = 0;          // monitor thread only
  std::uint64_t mon_reported_seq = ~0ull;    // monitor thread only

  // Sleeping.
  std::atomic<std::uint32_t> wake_seq{0};  // futex word
  bool spinning = false;                   // owner: counted in Runtime::nspinning_
  void* altstack = nullptr;                // owner: sigaltstack for the overflow handler

  std::thread thread;
};

}  // namespace weft::detail
