// The M:N scheduler: one Worker per kernel thread, each with a lock-free RunQueue and a runnext
// slot (Go's P), a global MPMC queue (Boost.Lockfree) for work from outside and overflow, work
// stealing between workers, and an idle path that spins briefly and then sleeps on a futex, with
// at most one idle worker blocked in the poller.
//
// Switching. Fibers switch directly to each other (one jump) when the switching worker has
// something runnable; otherwise they switch to the worker's scheduler context, which runs the
// idle path on the kernel thread's own stack. Before every jump the switcher records a Pending
// action in its Worker; the code that resumes on the other side runs it (after_switch) once the
// old stack is no longer in use: store the old fiber's context, then push it (yield), publish it
// as parked via the commit callback (park), or free its stack (exit).
//
// Why no wake-up is lost:
//  1. A waker finds a parked fiber only through what park()'s commit published, and commit runs
//     after the fiber's context was saved. So Runtime::ready() never sees a fiber still on its
//     stack.
//  2. Exactly one party resumes a parked fiber: a wait's own arbitration leaves one waker per
//     park, and Runtime::ready() decides between it and the shutdown unwind with the
//     Parked->Runnable CAS (fiber_claim_parked) wherever the two can race (see ready()).
//  3. A worker about to sleep first announces itself (nsleeping_, seq_cst), then re-checks every
//     queue; a submitter pushes, then (a seq_cst read-modify-write of nspinning_, which TSan sees
//     and a fence would not) reads nsleeping_. By the store-load order
//     one of the two sees the other: either the sleeper finds the work or the submitter wakes it.
//     That guarantee is needed only for work nobody else would run: a fiber made ready from
//     outside the runtime. Work a worker queues for itself (a spawn, runnext's displaced fiber,
//     a spill moved up, the global queue from a worker, which reads it too) is run by that
//     worker if by nobody else; waking a helper for it is for parallelism, so
//     wake_idle_worker_to_share skips the read-modify-write when relaxed loads show a worker
//     spinning or none idle. (On a spawn loop with two workers that RMW, on a line the other
//     worker keeps writing, was 15% of the time.) A stale load costs a missed helper, not
//     progress, as in Go's wakep after runqput; the monitor wakes one for a worker held by one
//     fiber for a tick with work queued behind it (services/monitor.hpp).
//  4. The futex wait compares a per-worker sequence number read before the re-check, so a wake
//     that lands between the re-check and the syscall makes the syscall return at once.
//
// Thread-locals: a fiber may resume on another kernel thread, and the compiler may cache a TLS
// address within one function, so no path keeps a worker across a switch: park and yield take
// the worker switch_to returns (the jump carries it), and everything else re-reads
// current_worker(), which is never inlined.
//
// Where Runtime's members live: queues.cpp (ready, submit_spawned, push_*/pop_*, refill_runq,
// pick_next, steal, queues_empty, has_queued), idle.cpp (the idle path, the poller seat,
// wake_idle_worker/wake_all, timers_changed, run_timers_and_poll, place_ready), runtime.cpp
// (construction, worker_loop, run_main, shutdown, stats, quiescent, alloc_id).
#pragma once

#include <atomic>
#include <boost/lockfree/queue.hpp>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/fiber.hpp"
#include "sched/stack_sizes.hpp"
#include "sched/tracking.hpp"
#include "sched/tuning.hpp"
#include "sched/worker.hpp"
#include "weft/detail/assert.hpp"
#include "weft/detail/poller.hpp"
#include "weft/detail/thread_mutex.hpp"
#include "weft/runtime.hpp"

namespace weft::detail {

class Runtime;
class BlockingPool;
class Hibernator;
class StackRestorer;
class Monitor;
class TimerHeap;
class Registry;
class StackProfiler;

Worker* current_worker() noexcept;  // below

class Runtime {
 public:
  explicit Runtime(const Options& opts);
  ~Runtime();

  // Runs body(arg) as the main fiber on the calling thread (worker 0) plus N-1 worker threads;
  // returns after shutdown.
  void run_main(void (*body)(void*), void* arg);

  const Options& options() const noexcept { return opts_; }
  unsigned nworkers() const noexcept { return static_cast<unsigned>(workers_.size()); }
  Worker& worker(unsigned i) noexcept { return *workers_[i]; }
  // Racy, any thread: whether w holds runnable fibers in any of its queues (queues_empty's test
  // per worker; the monitor's too).
  static bool has_queued(const Worker& w) noexcept;
  StackPool& stacks() noexcept { return *stacks_; }
  TimerHeap& timers() noexcept { return *timers_; }
  Registry& registry() noexcept { return *registry_; }
  BlockingPool& blocking() noexcept { return *blocking_; }
  Poller& poller() noexcept { return *poller_; }
  StackProfiler* profiler() noexcept { return profiler_.get(); }  // null unless profiling
  // Null unless stack hibernation runs (Options::hibernate_after, services/hibernator.hpp);
  // set before the first fiber runs, reset after the last one ended.
  StackRestorer* stack_restorer() noexcept { return stack_restorer_; }
  Hibernator* hibernator() noexcept { return hibernator_.get(); }  // for the monitor
  const StackSizeTable& stack_sizes() const noexcept { return stack_sizes_; }

  // The one wake path: every wake of a parked fiber -- Waker::wake (channels, sync, timers,
  // close, deadlines), the poller's batch, a called-off park -- ends here. Claims `f` (false,
  // and nothing done, if the shutdown unwind won it; queues.cpp says when a plain store does)
  // and queues it.
  // `caller` is the calling thread's worker (null on a plain thread; the waker has already
  // looked it up). kRunNext: into the caller's runnext slot (the woken fiber runs next, Go's
  // runnext), or the global queue from a plain thread; wakes an idle worker if work was pushed
  // out where others can take it. kQueueTail: to the tail of the caller's own run queue, no
  // idle-worker wake (batch callers wake one for the batch); needs a worker of this runtime.
  enum ReadyPlace { kRunNext, kQueueTail };
  bool ready(Fiber* f, Worker* caller, ReadyPlace place) noexcept;
  // Makes a new fiber runnable. Returns true if the caller (a spawning fiber) should yield
  // because its worker is flooded with unstarted fibers.
  bool submit_spawned(Fiber* f) noexcept;
  void push_global(Fiber* f) noexcept;
  // Owner only: appends to w's run queue, or to its spill list when the ring is full or
  // anything already waits there (one FIFO across both).
  void push_local(Worker& w, Fiber* f) noexcept {
    WEFT_ASSERT(current_worker() == &w, "push_local from a thread that does not own the queue");
    if (w.spill.empty() && w.runq.push(f)) [[likely]]
      return;
    push_spill(w, f);
  }
  // Wakes an idle worker if none is spinning, so new work does not wait.
  void wake_idle_worker() noexcept;
  // The same for work the calling worker queued where it will run it itself if nobody else
  // does: relaxed checks first (see "Why no wake-up is lost", 3), the full wake only when a
  // worker may be idle and none spins.
  void wake_idle_worker_to_share() noexcept {
    if (nspinning_.load(std::memory_order_relaxed) != 0) return;
    if (nsleeping_.load(std::memory_order_relaxed) == 0 &&
        !polling_.load(std::memory_order_relaxed)) {
      return;
    }
    wake_idle_worker();
  }
  // A new earliest timer: interrupts the worker blocked in the poller (the one that keeps time)
  // so it recomputes its timeout. Futex sleepers need no wake: they never wait for timers.
  void timers_changed() noexcept;

  // Picks the next fiber to run on `w` without blocking: runnext, the spawned deque and the run
  // queue, and the global queue (first on every 61st pick, and when the local ones are empty);
  // null if none.
  Fiber* pick_next(Worker& w) noexcept;
  // Whether a fiber on `w` that found a lock taken should spin a little before parking (Go's
  // sync_runtime_canSpin): another worker is awake, so the holder may be running and about to
  // release it, and nothing waits in w's own queues, which spinning would delay.
  bool lock_spin_may_help(const Worker& w) const noexcept;

  std::uint64_t alloc_id(Worker* w) noexcept;
  // Fires due timers, and collects I/O readiness if fibers wait on the poller and nobody polled
  // for 200 us -- busy workers keep time and see I/O this way. Only where the worker holds no
  // lock: after a switch's pending action ran, or from a yield.
  void run_timers_and_poll(Worker& w) noexcept;
  // run_timers_and_poll every kTimerCheckInterval-th call: after_switch calls it on every switch,
  // so the test is inline and the work out of line (16 of ~270 instructions per switch).
  void maybe_run_timers_and_poll(Worker& w) noexcept {
    if (++w.timer_tick % kTimerCheckInterval == 0) run_timers_and_poll(w);
  }

  bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }
  bool unwinding() const noexcept { return unwinding_; }
  void main_finished() noexcept;
  std::int64_t global_size() const noexcept { return gq_size_.load(std::memory_order_relaxed); }
  // A clock refreshed by the monitor every few milliseconds: cheap timestamps for dumps.
  std::int64_t coarse_now() const noexcept { return coarse_now_.load(std::memory_order_relaxed); }
  void set_coarse_now(std::int64_t t) noexcept { coarse_now_.store(t, std::memory_order_relaxed); }
  Stats stats() noexcept;
  // Fibers created and not yet finished (Stats::fibers_alive), from the workers' counters alone:
  // what the monitor reads (stats() also reads the monitor, which it must not do).
  std::uint64_t fibers_alive() const noexcept;
  std::atomic<std::uint64_t> foreign_spawned{0};  // fibers started from plain threads
  // Sampled park times of fibers woken from plain threads (tracking.hpp; any thread records).
  LatencyHistogram foreign_park_hist;

  // For the monitor: every worker idle, no queued fiber, no pending timer, no blocking() job and
  // nothing parked on the poller: no fiber can become runnable except from an outside thread.
  bool quiescent() noexcept;
  void wake_all() noexcept;

 private:
  void worker_loop(Worker& w);
  Fiber* find_runnable(Worker& w);  // blocks in the idle path; null when stopping
  Fiber* steal(Worker& w) noexcept;
  // push_local's slow half: the ring is full, or fibers already wait on the spill list.
  void push_spill(Worker& w, Fiber* f) noexcept;
  Fiber* pop_global(Worker& w) noexcept;
  // With a single worker nobody steals, so the owner's pop needs no CAS, and its runnext slot
  // (which only a thief of a held worker touches besides the owner) needs no exchange; with
  // several, runnext_slot.hpp keeps the owner's side plain where membarrier allows.
  Fiber* pop_runq(Worker& w) noexcept {
    return single_worker_ ? w.runq.pop_unshared() : w.runq.pop();
  }
  Fiber* exchange_runnext(Worker& w, Fiber* f) noexcept {
    return w.runnext.owner_exchange(f, single_worker_);
  }
  bool queues_empty() noexcept;
  // Owner only: moves fibers from w's spill list into the free room of its ring, oldest first,
  // and wakes a sleeping worker to share them.
  void refill_runq(Worker& w) noexcept;
  void run_due_timers(Worker& w) noexcept;
  void place_ready(Worker& w, FiberList& list) noexcept;
  // Blocks in the poller (if the seat is free: it then keeps time for the timers) or on the
  // worker's futex. Returns after a wake or a poll; false if it found work on re-check.
  bool poll_or_sleep(Worker& w);
  void shutdown_unwind(Worker& w);
  void stop_spinning(Worker& w) noexcept;
  void release_poller_seat() noexcept;
  Fiber* pop_any() noexcept;  // shutdown: any queued fiber of any worker

  Options opts_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<StackPool> stacks_;
  std::unique_ptr<TimerHeap> timers_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<BlockingPool> blocking_;
  std::unique_ptr<Poller> poller_;
  std::unique_ptr<Monitor> monitor_;
  std::unique_ptr<Hibernator> hibernator_;   // outlives every fiber's last switch-in
  StackRestorer* stack_restorer_ = nullptr;  // hibernator_, seen through what switch_to needs
  std::unique_ptr<StackProfiler> profiler_;  // destroyed (profile written) with the runtime
  StackSizeTable stack_sizes_;               // by fiber name (Options::stack_sizes); immutable

  boost::lockfree::queue<Fiber*> gq_{1024};
  std::atomic<std::int64_t> gq_size_{0};

  // A worker's place in the idle protocol, guarded by idle_mu_ (indexed by Worker::index).
  struct IdleSlot {
    bool asleep = false;            // on sleepers_
    bool counted_spinning = false;  // the waker that unlisted it counted it in nspinning_
                                    // (wake_all does not)
  };
  ThreadMutex idle_mu_;
  std::vector<Worker*> sleepers_ ABSL_GUARDED_BY(idle_mu_);
  std::vector<IdleSlot> idle_slots_ ABSL_GUARDED_BY(idle_mu_);
  std::atomic<int> nsleeping_{0};  // == sleepers_.size(), readable without the lock
  std::atomic<int> nspinning_{0};
  std::atomic<bool> polling_{false};       // a worker holds the poller seat (inside poll())
  std::atomic<bool> poller_woken_{false};  // a wakeup() is already on its way to it
  std::atomic<std::int64_t> coarse_now_{0};
  std::atomic<std::int64_t> last_poll_ns_{0};  // when some worker last ran poller_->poll()

  bool single_worker_ = false;  // set once at construction
  std::atomic<bool> stopping_{false};
  bool unwinding_ = false;  // set by worker 0 once the other workers have stopped
};

// The runtime running now, or null. Set by run() for its duration.
Runtime* current_runtime() noexcept;
// Wakes from outside the workers (plain threads, blocking-pool threads) in progress. Such a wake
// makes a fiber runnable and then still touches the runtime (queue push, idle-worker wake-up);
// the fiber may run and main may return meanwhile, so ~Runtime waits for this to drain. A global,
// not a Runtime field, so that a waker whose CAS lost to shutdown never touches a dead runtime.
extern std::atomic<int> g_outside_wakers;
// The calling thread's worker, or null on a plain thread. Never inlined (see the header comment).
Worker* current_worker() noexcept;
Fiber* current_fiber() noexcept;

// The runtime running now, or null (see current_runtime) -- or throws std::logic_error naming
// `what` and saying to call it under weft::run().
Runtime& runtime_or_throw(const char* what);

}  // namespace weft::detail
