// The scheduler: workers, queues, the idle path, run() and shutdown. Design in scheduler.hpp.
#include "scheduler.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>

#include "blocking_pool.hpp"
#include "debug_info.hpp"
#include "monitor.hpp"
#include "overflow_guard.hpp"
#include "own_threads.hpp"
#include "registry.hpp"
#include "stack_profiler.hpp"
#include "thread_parker.hpp"
#include "timers.hpp"
#include "weft/detail/assert.hpp"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace weft::detail {
namespace {

std::atomic<Runtime*> g_runtime{nullptr};
std::atomic<PollerFactory> g_poller_factory{nullptr};
std::atomic<std::uint64_t> g_next_id{1};
thread_local Worker* tls_worker = nullptr;

constexpr std::uint64_t kIdBatch = 1024;
constexpr std::uint32_t kGlobalCheckInterval = 61;  // as in Go: global queue fairness
constexpr std::uint32_t kTimerCheckInterval = 64;
constexpr std::int64_t kBusyPollIntervalNs = 200'000;  // 200 us
constexpr std::uint32_t kRunnextStreakMax = 32;  // runnext ping-pong must not starve the queue
constexpr std::uint32_t kRunQueueFirstInterval = 8;
constexpr int kStealRounds = 4;

// The default poller: nothing to poll, it only sleeps until woken or the timeout.
class CondvarPoller final : public Poller {
 public:
  void poll(std::int64_t timeout_ns, FiberList&) override {
    std::unique_lock lock(mu_);
    if (timeout_ns < 0) {
      cv_.wait(lock, [&] { return woken_; });
    } else if (timeout_ns > 0) {
      cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), [&] { return woken_; });
    }
    woken_ = false;
  }
  void wakeup() noexcept override {
    std::lock_guard lock(mu_);
    woken_ = true;
    cv_.notify_one();
  }
  std::size_t waiters() const noexcept override { return 0; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
};

unsigned env_unsigned(const char* name, unsigned fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const unsigned long n = std::strtoul(v, &end, 10);
  if (*end != '\0' || n == 0 || n > 4096) {
    throw std::invalid_argument(std::string("weft: $") + name + "=\"" + v +
                                "\" is not a worker count between 1 and 4096");
  }
  return static_cast<unsigned>(n);
}

std::size_t env_size(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (*end == 'k' || *end == 'K') {
    n <<= 10;
    ++end;
  } else if (*end == 'm' || *end == 'M') {
    n <<= 20;
    ++end;
  }
  if (*end == 'i' || *end == 'B' || *end == 'b') ++end;
  if (*end == 'B') ++end;
  if (*end != '\0' || n < 4096 || n > (1ull << 30)) {
    throw std::invalid_argument(
        std::string("weft: $") + name + "=\"" + v +
        "\" is not a stack size between 4K and 1G (examples: 65536, 128K, 1M)");
  }
  return static_cast<std::size_t>(n);
}

Options resolve(const Options& in) {
  Options o = in;
  if (o.workers == 0) {
    const unsigned hw = std::thread::hardware_concurrency();
    o.workers = env_unsigned("WEFT_WORKERS", hw ? hw : 1);
  }
  if (o.stack_size == Options{}.stack_size)
    o.stack_size = env_size("WEFT_STACK_SIZE", o.stack_size);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Sanitizers grow frames several times over; keep the programs that fit normally fitting.
  if (o.stack_size < 256 * 1024) o.stack_size = 256 * 1024;
#endif
  if (o.stack_profile.empty()) {
    if (const char* path = std::getenv("WEFT_STACK_PROFILE")) o.stack_profile = path;
  }
  return o;
}

void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

Runtime* current_runtime() noexcept { return g_runtime.load(std::memory_order_acquire); }
__attribute__((noinline)) Worker* current_worker() noexcept { return tls_worker; }
__attribute__((noinline)) Fiber* current_fiber() noexcept {
  Worker* w = tls_worker;
  return w ? w->current : nullptr;
}

void set_poller_factory(PollerFactory factory) noexcept { g_poller_factory.store(factory); }

Runtime::Runtime(const Options& opts) : opts_(resolve(opts)) {
  stacks_ = std::make_unique<StackPool>(opts_.stack_size, opts_.guard_pages);
  timers_ = std::make_unique<TimerHeap>(opts_.workers);
  registry_ = std::make_unique<Registry>();
  blocking_ = std::make_unique<BlockingPool>(opts_.max_blocking_threads);
  if (!opts_.stack_profile.empty()) {
    profiler_ = std::make_unique<StackProfiler>(opts_.stack_profile, stacks_->stack_size());
  }
  PollerFactory factory = g_poller_factory.load();
  poller_ = factory ? factory() : std::make_unique<CondvarPoller>();
  for (unsigned i = 0; i < opts_.workers; ++i) {
    auto w = std::make_unique<Worker>();
    w->rt = this;
    w->index = i;
    w->rng = 0x9E3779B97F4A7C15ull * (i + 1);
    workers_.push_back(std::move(w));
  }
  single_worker_ = workers_.size() == 1;
  coarse_now_.store(now_ns(), std::memory_order_relaxed);
  debug_info_attach(registry_.get(), stacks_->stack_size(), &coarse_now_);
}

std::atomic<int> g_outside_wakers{0};

Runtime::~Runtime() {
  debug_info_detach(registry_.get());
  // A plain thread whose wake let main return may still be inside submit_ready().
  while (g_outside_wakers.load(std::memory_order_acquire) != 0) sched_yield();
}

std::uint64_t Runtime::alloc_id(Worker* w) noexcept {
  if (!w || w->rt != this) return g_next_id.fetch_add(1, std::memory_order_relaxed);
  if (w->next_id == w->id_end) {
    w->next_id = g_next_id.fetch_add(kIdBatch, std::memory_order_relaxed);
    w->id_end = w->next_id + kIdBatch;
  }
  return w->next_id++;
}

// ---- queues -------------------------------------------------------------------------------------

void Runtime::push_global(Fiber* f) noexcept {
  gq_size_.fetch_add(1, std::memory_order_relaxed);
  if (!gq_.push(f)) {
    std::fprintf(stderr, "weft: out of memory growing the global run queue\n");
    std::abort();
  }
}

void Runtime::push_local(Worker& w, Fiber* f) noexcept {
  WEFT_ASSERT(current_worker() == &w, "push_local from a thread that does not own the queue");
  while (!w.runq.push(f)) {
    Fiber* batch[RunQueue::kCapacity / 2 + 1];
    const std::uint32_t n = w.runq.take_half(batch);
    for (std::uint32_t i = 0; i < n; ++i) push_global(batch[i]);
  }
}

void Runtime::submit_ready(Fiber* f, Worker* w) noexcept {
  if (w && w->rt == this) {
    // runnext: the woken fiber runs next on this worker (warm caches, Go's runnext). It is not
    // stealable, so only a fiber it pushes out into the queue needs another worker.
    if (Fiber* old = w->runnext.exchange(f, std::memory_order_acq_rel)) {
      push_local(*w, old);
      wake_idle_worker();
    }
    return;
  }
  push_global(f);
  wake_idle_worker();
}

bool Runtime::submit_spawned(Fiber* f) noexcept {
  Worker* w = current_worker();
  if (w && w->rt == this) {
    if (w->spawned_q.push(f)) {
      wake_idle_worker();
      return false;
    }
    push_global(f);
    wake_idle_worker();
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

Fiber* Runtime::pick_local(Worker& w) noexcept {
  if (unwinding_ || stopping_.load(std::memory_order_relaxed)) return nullptr;
  // No timers here: park() calls this while its fiber still holds the lock that its commit
  // releases, and a timer callback may need that very lock. Busy workers fire timers in
  // after_switch (maybe_run_timers), where no lock is held.
  const std::uint32_t tick = ++w.schedtick;
  if (tick % kGlobalCheckInterval == 0) {
    if (Fiber* f = pop_global(w)) return f;
  }
  if (w.runnext_streak < kRunnextStreakMax || w.runq.empty()) {
    if (w.runnext.load(std::memory_order_relaxed)) {
      if (Fiber* f = w.runnext.exchange(nullptr, std::memory_order_acq_rel)) {
        ++w.runnext_streak;
        return f;
      }
    }
  }
  w.runnext_streak = 0;
  // Unstarted fibers first (depth-first through fork-join trees), but every few rounds the
  // woken ones first, so a spawning tree cannot starve them.
  if (tick % kRunQueueFirstInterval == 0) {
    if (Fiber* f = pop_runq(w)) return f;
  }
  if (Fiber* f = w.spawned_q.take()) return f;
  if (Fiber* f = pop_runq(w)) return f;
  return pop_global(w);
}

bool Runtime::queues_empty() noexcept {
  if (gq_size_.load(std::memory_order_seq_cst) > 0) return false;
  for (auto& w : workers_) {
    if (!w->runq.empty() || !w->spawned_q.empty() || w->runnext.load(std::memory_order_seq_cst))
      return false;
  }
  return true;
}

Fiber* Runtime::steal(Worker& w) noexcept {
  const unsigned n = nworkers();
  if (n < 2) return nullptr;
  w.rng ^= w.rng << 13;
  w.rng ^= w.rng >> 7;
  w.rng ^= w.rng << 17;
  const unsigned start = static_cast<unsigned>(w.rng % n);
  for (unsigned i = 0; i < n; ++i) {
    Worker& victim = *workers_[(start + i) % n];
    if (&victim == &w) continue;
    if (Fiber* f = victim.spawned_q.steal()) {
      w.steals.fetch_add(1, std::memory_order_relaxed);
      return f;
    }
    if (Fiber* f = victim.runq.steal_into(w.runq)) {
      w.steals.fetch_add(1, std::memory_order_relaxed);
      return f;
    }
    // runnext belongs to its worker, except when the monitor saw that worker stuck in a fiber.
    if (victim.stuck.load(std::memory_order_relaxed) &&
        victim.runnext.load(std::memory_order_relaxed)) {
      if (Fiber* f = victim.runnext.exchange(nullptr, std::memory_order_acq_rel)) {
        w.steals.fetch_add(1, std::memory_order_relaxed);
        return f;
      }
    }
  }
  return nullptr;
}

void Runtime::maybe_run_timers(Worker& w, bool every_time) noexcept {
  if (!every_time && ++w.timer_tick % kTimerCheckInterval != 0) return;
  const std::int64_t now = now_ns();
  if (timers_->earliest() <= now) run_due_timers(w);
  // While every worker is busy nobody sits in the poller, so I/O readiness would wait for the
  // next idle moment; a busy worker collects it when nobody has polled for a while (Go's sysmon
  // netpoll). Only with fibers parked on the poller, and never concurrently with the poller seat.
  if (poller_->waiters() > 0 &&
      now - last_poll_ns_.load(std::memory_order_relaxed) > kBusyPollIntervalNs &&
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
  while (Fiber* f = list.pop()) {
    FiberState expected = FiberState::kParked;
    // Pollers hand back fibers they woke; they are Parked until we take them here.
    if (f->state.compare_exchange_strong(expected, FiberState::kRunnable)) push_local(w, f);
  }
  wake_idle_worker();
}

// ---- waking and sleeping ------------------------------------------------------------------------

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
    std::lock_guard lock(idle_mu_);
    if (!sleepers_.empty()) {
      target = sleepers_.back();
      sleepers_.pop_back();
      target->asleep = false;
      target->counted_spinning = true;
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
    std::lock_guard lock(idle_mu_);
    for (Worker* w : sleepers_) w->asleep = false;
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
  // seq_cst: see Runtime::sleep (the heap published the new earliest deadline with seq_cst).
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

bool Runtime::sleep(Worker& w) {
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
    std::lock_guard lock(idle_mu_);
    sleepers_.push_back(&w);
    w.asleep = true;
    w.counted_spinning = false;
    nsleeping_.fetch_add(1, std::memory_order_seq_cst);
  }
  if (!queues_empty() || stopping() || !polling_.load(std::memory_order_seq_cst)) {
    // Work arrived, or the poller seat became free (someone must keep time): don't sleep.
    std::lock_guard lock(idle_mu_);
    if (w.asleep) {
      w.asleep = false;
      std::erase(sleepers_, &w);
      nsleeping_.fetch_sub(1, std::memory_order_seq_cst);
      return false;
    }
    w.spinning = w.counted_spinning;  // a waker took us off the list (and maybe counted us)
    return true;
  }
  for (;;) {
    std::uint32_t seq;
    {
      // Only the waker that takes us off the list counts: a late increment of wake_seq from an
      // earlier wake-up must not end this sleep. We read the sequence under the lock while still
      // listed, so the wake that unlists us bumps it after this read and the futex returns.
      std::lock_guard lock(idle_mu_);
      if (!w.asleep) {
        w.spinning = w.counted_spinning;
        return true;
      }
      seq = w.wake_seq.load(std::memory_order_acquire);
    }
    futex_wait(&w.wake_seq, seq);
  }
}

Fiber* Runtime::find_runnable(Worker& w) {
  w.idle.store(true, std::memory_order_relaxed);
  for (;;) {
    if (stopping()) break;
    if (Fiber* f = pick_local(w)) {
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
      if (!queues_empty()) continue;
    }
    sleep(w);
  }
  if (w.spinning) {
    w.spinning = false;
    nspinning_.fetch_sub(1, std::memory_order_acq_rel);
  }
  w.idle.store(false, std::memory_order_relaxed);
  return nullptr;
}

// ---- workers, run() and shutdown ----------------------------------------------------------------

void Runtime::worker_loop(Worker& w) {
  // Timers are kept by the worker sleeping in the poller: the default 50 us timer slack would be
  // added to every sleep and timeout.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  OwnThread own;
  tls_worker = &w;
  bind_thread_state(w);
#if defined(__SANITIZE_THREAD__)
  w.tsan_sched_fiber = __tsan_get_current_fiber();
#endif
  install_overflow_altstack(w);
  while (Fiber* f = find_runnable(w)) resume_from_scheduler(w, f);
  remove_overflow_altstack(w);
  tls_worker = nullptr;
}

void Runtime::main_finished() noexcept {
  stopping_.store(true, std::memory_order_seq_cst);
  wake_all();
}

Fiber* Runtime::pop_any() noexcept {
  for (auto& v : workers_) {
    if (Fiber* f = v->runnext.exchange(nullptr, std::memory_order_acq_rel)) return f;
    if (Fiber* f = v->runq.pop()) return f;
    if (Fiber* f = v->spawned_q.take()) return f;
  }
  Fiber* f = nullptr;
  if (gq_.pop(f)) {
    gq_size_.fetch_sub(1, std::memory_order_relaxed);
    return f;
  }
  return nullptr;
}

void Runtime::shutdown_unwind(Worker& w) {
  constexpr int kMaxUnwindRequests = 3;
  for (;;) {
    while (Fiber* f = pop_any()) {
      if (!f->ctx.load(std::memory_order_relaxed)) {
        fiber_drop_unstarted(f);  // never ran: destroy its closure, nothing to unwind
      } else {
        resume_from_scheduler(w, f);  // it throws FiberUnwind at its next park or yield
      }
    }
    if (blocking_->inflight() > 0) {
      // A blocking() job still owns its fiber's frame; let it finish and wake the fiber.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    if (timers_->earliest() <= now_ns()) run_due_timers(w);
    Fiber* victim = nullptr;
    std::size_t alive = 0, stuck = 0;
    registry_->for_each([&](Fiber* f) {
      ++alive;
      if (victim || f->state.load(std::memory_order_acquire) != FiberState::kParked) return;
      // Parked inside a destructor (already unwinding): it can only finish if woken normally.
      if (f->eh_uncaught != 0 || f->unwind_requests >= kMaxUnwindRequests) {
        ++stuck;
        return;
      }
      FiberState expected = FiberState::kParked;
      if (f->state.compare_exchange_strong(expected, FiberState::kRunning)) victim = f;
    });
    if (victim) {
      ++victim->unwind_requests;
      resume_from_scheduler(w, victim);
      continue;
    }
    if (alive == 0) return;
    if (stuck == alive && gq_size_.load() == 0 && queues_empty()) {
      std::fprintf(stderr,
                   "weft: shutdown abandoned %zu fiber(s) that stay parked while unwinding (a "
                   "destructor waits for something no fiber will provide, or a fiber swallowed "
                   "the unwind with catch (...)):\n",
                   stuck);
      registry_->dump(std::cerr, stacks_->stack_size(), now_ns());
      return;
    }
    // Fibers still running elsewhere (outside threads holding them) or timers pending.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void Runtime::run_main(void (*body)(void*), void* arg) {
  // The main fiber: a closure that runs body(arg).
  struct MainClosure {
    void (*body)(void*);
    void* arg;
    static void run(void* p) {
      auto* c = static_cast<MainClosure*>(p);
      c->body(c->arg);
    }
    static void drop(void*) noexcept {}
  };
  static constexpr ClosureOps kMainOps{&MainClosure::run, &MainClosure::drop, nullptr};
  void* storage = nullptr;
  Fiber* main = fiber_create(&kMainOps, sizeof(MainClosure), alignof(MainClosure), &storage);
  ::new (storage) MainClosure{body, arg};
  main->is_main = true;
  registry_->add(main);
  main->state.store(FiberState::kRunnable, std::memory_order_relaxed);
  workers_[0]->spawned.store(1, std::memory_order_relaxed);
  workers_[0]->spawned_q.push(main);

  install_overflow_handler(*this);
  monitor_ = std::make_unique<Monitor>(*this);
  const int old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  char old_name[16] = {};
  pthread_getname_np(pthread_self(), old_name, sizeof(old_name));
  pthread_setname_np(pthread_self(), "weft-worker-0");
  for (unsigned i = 1; i < nworkers(); ++i) {
    Worker& w = *workers_[i];
    w.thread = std::thread([this, &w] {
      const std::string name = "weft-worker-" + std::to_string(w.index);
      pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
      worker_loop(w);
    });
  }
  worker_loop(*workers_[0]);
  for (unsigned i = 1; i < nworkers(); ++i) workers_[i]->thread.join();

  // Single-threaded from here: unwind what is left on worker 0.
  unwinding_ = true;
  Worker& w0 = *workers_[0];
  tls_worker = &w0;
  install_overflow_altstack(w0);
#if defined(__SANITIZE_THREAD__)
  w0.tsan_sched_fiber = __tsan_get_current_fiber();
#endif
  shutdown_unwind(w0);
  remove_overflow_altstack(w0);
  tls_worker = nullptr;
  monitor_.reset();
  remove_overflow_handler();
  blocking_.reset();
  pthread_setname_np(pthread_self(), old_name);
  if (old_slack > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_slack), 0, 0, 0);
  for (auto& w : workers_) stacks_->drain(w->stacks);
}

bool Runtime::quiescent() noexcept {
  for (auto& w : workers_) {
    if (!w->idle.load(std::memory_order_acquire)) return false;
  }
  return queues_empty() && timers_->size() == 0 && blocking_->inflight() == 0 &&
         poller_->waiters() == 0 && !stopping();
}

Stats Runtime::stats() noexcept {
  Stats s;
  std::uint64_t finished = 0;
  std::int64_t in_use = 0;
  for (auto& w : workers_) {
    s.fibers_spawned += w->spawned.load(std::memory_order_relaxed);
    finished += w->finished.load(std::memory_order_relaxed);
    s.switches += w->switches.load(std::memory_order_relaxed);
    s.steals += w->steals.load(std::memory_order_relaxed);
    s.parks += w->parks.load(std::memory_order_relaxed);
    s.timers_fired += w->timers_fired.load(std::memory_order_relaxed);
    in_use += static_cast<std::int64_t>(w->stacks_in_use.load(std::memory_order_relaxed));
  }
  s.fibers_spawned += foreign_spawned.load(std::memory_order_relaxed);
  s.fibers_alive = s.fibers_spawned > finished ? s.fibers_spawned - finished : 0;
  s.workers = nworkers();
  s.stacks_in_use = in_use > 0 ? static_cast<std::uint64_t>(in_use) : 0;
  s.stacks_cached = stacks_->cached();
  s.stack_bytes_reserved = stacks_->reserved_bytes();
  s.blocking_jobs = blocking_ ? blocking_->completed() : 0;
  s.blocking_threads = blocking_ ? blocking_->threads() : 0;
  s.watchdog_reports = monitor_ ? monitor_->reports() : 0;
  return s;
}

void run_runtime(const void* options, void (*body)(void*), void* arg) {
  if (current_worker()) {
    throw std::logic_error(
        "weft::run called from inside a fiber: a runtime is already running here");
  }
  auto rt = std::make_unique<Runtime>(*static_cast<const Options*>(options));
  Runtime* expected = nullptr;
  if (!g_runtime.compare_exchange_strong(expected, rt.get())) {
    throw std::logic_error(
        "weft::run: another weft runtime is already running in this process; "
        "run one at a time");
  }
  raise_fd_limit();
  struct Clear {
    ~Clear() { g_runtime.store(nullptr, std::memory_order_release); }
  } clear;
  rt->run_main(body, arg);
}

}  // namespace weft::detail

namespace weft {

Stats stats() {
  detail::Runtime* rt = detail::current_runtime();
  return rt ? rt->stats() : Stats{};
}

void dump_fibers(std::ostream& out) {
  detail::Runtime* rt = detail::current_runtime();
  if (!rt) {
    out << "weft: no runtime is running\n";
    return;
  }
  rt->registry().dump(out, rt->stacks().stack_size(), detail::now_ns());
}

}  // namespace weft
