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
//     after the fiber's context was saved. So ready() never sees a fiber still on its stack.
//  2. ready() takes a parked fiber with a CAS Parked->Runnable, so exactly one party resumes it.
//  3. A worker about to sleep first announces itself (nsleeping_, seq_cst), then re-checks every
//     queue; a submitter pushes, then (seq_cst fence) reads nsleeping_. By the store-load order
//     one of the two sees the other: either the sleeper finds the work or the submitter wakes it.
//  4. The futex wait compares a per-worker sequence number read before the re-check, so a wake
//     that lands between the re-check and the syscall makes the syscall return at once.
//
// Thread-locals: current_worker() is non-inlined and every path re-reads it after a switch,
// because a fiber may resume on another kernel thread (the compiler may cache a TLS address
// within one function).
#pragma once

#include <atomic>
#include <boost/lockfree/queue.hpp>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fiber.hpp"
#include "run_queue.hpp"
#include "spawn_deque.hpp"
#include "stack_pool.hpp"
#include "weft/detail/poller.hpp"
#include "weft/runtime.hpp"

namespace weft::detail {

class Runtime;
class BlockingPool;
class Monitor;
class TimerHeap;
class Registry;
class StackProfiler;

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
  std::uint64_t rng = 0;
  std::uint64_t next_id = 0, id_end = 0;  // batch of fiber ids handed to this worker
  int* errno_addr = nullptr;              // this thread's errno (bind_thread_state)
  void* eh_globals = nullptr;             // this thread's __cxa_eh_globals
#if defined(__SANITIZE_ADDRESS__)
  const void* thread_stack_bottom = nullptr;
  std::size_t thread_stack_size = 0;
  void* sched_fake_stack = nullptr;
#endif
#if defined(__SANITIZE_THREAD__)
  void* tsan_sched_fiber = nullptr;
#endif

  // Queues.
  RunQueue runq;         // runnable fibers that ran before (woken, yielded): FIFO
  SpawnDeque spawned_q;  // spawned, never run: newest first for the owner, oldest for thieves
  std::atomic<Fiber*> runnext{nullptr};  // owner; thieves take it only when `stuck`

  // Counters: written by the owner only (relaxed), summed by stats() and the monitor.
  std::atomic<std::uint64_t> switches{0};
  std::atomic<std::uint64_t> steals{0};
  std::atomic<std::uint64_t> parks{0};
  std::atomic<std::uint64_t> spawned{0};
  std::atomic<std::uint64_t> finished{0};
  std::atomic<std::uint64_t> stacks_in_use{0};  // may go negative-then-positive across workers
  std::atomic<std::uint64_t> timers_fired{0};

  // Monitor view.
  std::atomic<Fiber*> running{nullptr};      // the fiber it runs now (null when in the scheduler);
                                             // the monitor compares it, never dereferences it
  std::atomic<std::uint64_t> running_id{0};  // that fiber's id
  std::atomic<bool> idle{false};             // in the idle path (sleeping, spinning or polling)
  std::atomic<bool> stuck{false};            // the monitor saw one fiber hold it too long
  std::uint64_t mon_seen_seq = 0;            // monitor thread only
  std::int64_t mon_stuck_since = 0;          // monitor thread only
  std::uint64_t mon_reported_seq = ~0ull;    // monitor thread only

  // Sleeping.
  std::atomic<std::uint32_t> wake_seq{0};  // futex word
  bool asleep = false;                     // guarded by Runtime::idle_mu_: on the sleepers list
  bool counted_spinning = false;           // idle_mu_: the waker that unlisted it counted it
                                           // in nspinning_ (wake_all does not)
  bool spinning = false;                   // owner: counted in Runtime::nspinning_
  void* altstack = nullptr;                // owner: sigaltstack for the overflow handler

  std::thread thread;
};

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
  StackPool& stacks() noexcept { return *stacks_; }
  TimerHeap& timers() noexcept { return *timers_; }
  Registry& registry() noexcept { return *registry_; }
  BlockingPool& blocking() noexcept { return *blocking_; }
  Poller& poller() noexcept { return *poller_; }
  StackProfiler* profiler() noexcept { return profiler_.get(); }  // null unless profiling

  // Makes a woken fiber runnable. `caller` is the calling thread's worker (null on a plain
  // thread; the waker has already looked it up). From a worker of this runtime: its runnext
  // slot; else the global queue.
  void submit_ready(Fiber* f, Worker* caller) noexcept;
  // Makes a new fiber runnable. Returns true if the caller (a spawning fiber) should yield
  // because its worker is flooded with unstarted fibers.
  bool submit_spawned(Fiber* f) noexcept;
  void push_global(Fiber* f) noexcept;
  // Owner only: appends to w's run queue, moving half of a full queue to the global queue.
  void push_local(Worker& w, Fiber* f) noexcept;
  // Wakes an idle worker if none is spinning, so new work does not wait.
  void wake_idle_worker() noexcept;
  // A new earliest timer: make sure some idle worker recomputes its sleep.
  void timers_changed() noexcept;

  // Picks the next fiber to run on `w` without blocking (runnext, local, global); null if none.
  Fiber* pick_local(Worker& w) noexcept;

  std::uint64_t alloc_id(Worker* w) noexcept;
  // Every few dozen scheduling rounds, fires due timers (busy workers keep time this way).
  // Only where the worker holds no lock: after a switch's pending action ran.
  void maybe_run_timers(Worker& w, bool every_time = false) noexcept;

  bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }
  bool unwinding() const noexcept { return unwinding_; }
  void main_finished() noexcept;
  std::int64_t global_size() const noexcept { return gq_size_.load(std::memory_order_relaxed); }
  // A clock refreshed by the monitor every few milliseconds: cheap timestamps for dumps.
  std::int64_t coarse_now() const noexcept { return coarse_now_.load(std::memory_order_relaxed); }
  void set_coarse_now(std::int64_t t) noexcept { coarse_now_.store(t, std::memory_order_relaxed); }
  Stats stats() noexcept;
  std::atomic<std::uint64_t> foreign_spawned{0};  // fibers started from plain threads

  // For the monitor: every worker idle, no queued fiber, no pending timer, no blocking() job and
  // nothing parked on the poller: no fiber can become runnable except from an outside thread.
  bool quiescent() noexcept;
  void wake_all() noexcept;

 private:
  void worker_loop(Worker& w);
  Fiber* find_runnable(Worker& w);  // blocks in the idle path; null when stopping
  Fiber* steal(Worker& w) noexcept;
  Fiber* pop_global(Worker& w) noexcept;
  // With a single worker nobody steals, so the owner's pop needs no CAS.
  Fiber* pop_runq(Worker& w) noexcept {
    return single_worker_ ? w.runq.pop_unshared() : w.runq.pop();
  }
  bool queues_empty() noexcept;
  void run_due_timers(Worker& w) noexcept;
  void place_ready(Worker& w, FiberList& list) noexcept;
  bool sleep(Worker& w);  // returns after a wake; false if it found work on re-check
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
  std::unique_ptr<StackProfiler> profiler_;  // destroyed (profile written) with the runtime

  boost::lockfree::queue<Fiber*> gq_{1024};
  std::atomic<std::int64_t> gq_size_{0};

  std::mutex idle_mu_;
  std::vector<Worker*> sleepers_;  // idle_mu_
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

// Context switching (context_switch.cpp). `w.pending` must be set. next == null: switch to w's
// scheduler context. Returns in the resumed context (maybe on another thread) after running the
// pending action recorded by whoever switched to us.
void switch_to(Worker& w, Fiber* next);
// Called by the scheduler context to start or resume `f`.
void resume_from_scheduler(Worker& w, Fiber* f);
// Prepares a never-run fiber: takes a stack and builds its initial context.
void prepare_first_run(Worker& w, Fiber* f);
void after_switch(void* from_ctx);
// Caches the calling thread's errno and exception-globals addresses in `w` (its own thread).
void bind_thread_state(Worker& w) noexcept;
// Never returns, but deliberately not [[noreturn]]: ASan instruments calls to noreturn functions
// with __asan_handle_no_return, which misreads a fiber stack (seen at -O0).
void exit_current_fiber(Worker& w);

// Fiber lifecycle helpers (fiber.cpp).
void fiber_finished_bookkeeping(Worker& w, Fiber* f);  // join wake-up, registry, main-fiber end
void fiber_free(Fiber* f) noexcept;
void fiber_drop_unstarted(Fiber* f) noexcept;  // shutdown: never-started fiber

}  // namespace weft::detail
