// The runtime assembled: construction from Options, the worker threads, run() with its main
// fiber, shutdown (unwinding every fiber still parked), stats() and dump_fibers(). It is the one
// file that sees every layer: core (fibers, stacks), sched (queues, idle path, timers) and the
// services (monitor, debug info, overflow guard). The scheduler's design is in
// sched/scheduler.hpp.
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

#include "core/own_threads.hpp"
#include "core/registry.hpp"
#include "core/stack_profiler.hpp"
#include "core/thread_parker.hpp"
#include "sched/blocking_pool.hpp"
#include "sched/condvar_poller.hpp"
#include "sched/context_switch.hpp"
#include "sched/fiber_lifecycle.hpp"
#include "sched/options.hpp"
#include "sched/scheduler.hpp"
#include "sched/sync_services.hpp"
#include "sched/timers.hpp"
#include "services/debug_info.hpp"
#include "services/hibernator.hpp"
#include "services/monitor.hpp"
#include "services/overflow_guard.hpp"
#include "weft/detail/assert.hpp"
#include "weft/detail/fd_limit.hpp"

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

}  // namespace

Runtime* current_runtime() noexcept { return g_runtime.load(std::memory_order_acquire); }
__attribute__((noinline)) Worker* current_worker() noexcept { return tls_worker; }
__attribute__((noinline)) Fiber* current_fiber() noexcept {
  Worker* w = tls_worker;
  return w ? w->current : nullptr;
}
__attribute__((noinline)) unsigned current_worker_index() noexcept {
  Worker* w = tls_worker;
  return w ? w->index : kNotAWorker;
}
unsigned current_worker_count() noexcept {
  Runtime* rt = current_runtime();
  return rt ? rt->nworkers() : 0;
}

Runtime& runtime_or_throw(const char* what) {
  Runtime* rt = current_runtime();
  if (!rt) {
    throw std::logic_error(std::string("weft: ") + what +
                           " called while no runtime is running: call it from code running "
                           "under weft::run()");
  }
  return *rt;
}

void set_poller_factory(PollerFactory factory) noexcept { g_poller_factory.store(factory); }

Runtime::Runtime(const Options& opts) : opts_(resolve_options(opts)) {
  stacks_ = std::make_unique<StackPool>(opts_.stack_size, opts_.guard_pages);
  stack_sizes_ = StackSizeTable::load(opts_.stack_sizes);
  timers_ = std::make_unique<TimerHeap>(opts_.workers);
  registry_ = std::make_unique<Registry>();
  blocking_ = std::make_unique<BlockingPool>(opts_.max_blocking_threads);
  if (!opts_.stack_profile.empty()) {
    profiler_ = std::make_unique<StackProfiler>(opts_.stack_profile, stacks_->stack_size());
  }
  PollerFactory factory = g_poller_factory.load();
  poller_ = factory ? factory(static_cast<std::uint8_t>(opts_.netpoll), opts_.workers,
                              opts_.hibernate_after > std::chrono::milliseconds::zero())
                    : make_condvar_poller();
  for (unsigned i = 0; i < opts_.workers; ++i) {
    auto w = std::make_unique<Worker>();
    w->rt = this;
    w->index = i;
    w->rng = 0x9E3779B97F4A7C15ull * (i + 1);
    w->sightings.resize(opts_.workers);
    workers_.push_back(std::move(w));
  }
  single_worker_ = workers_.size() == 1;
  if (!single_worker_) RunnextSlot::enable_asymmetric();
  {
    ThreadMutexLock lock(idle_mu_);
    idle_slots_.resize(workers_.size());
  }
  coarse_now_.store(now_ns(), std::memory_order_relaxed);
  debug_info_attach(registry_.get(), stacks_->class_sizes(), &coarse_now_);
}

std::atomic<int> g_outside_wakers{0};

Runtime::~Runtime() {
  debug_info_detach(registry_.get());
  // A plain thread whose wake let main return may still be inside ready().
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
  while (Fiber* f = find_runnable(w)) {
    // A worker counted in nspinning_ makes wake_idle_worker() skip waking others, so it must
    // not stay counted while it runs fibers.
    WEFT_ASSERT(!w.spinning, "a worker runs a fiber while counted as spinning");
    resume_from_scheduler(w, f);
  }
  fiber_retire_all(w);
  remove_overflow_altstack(w);
  tls_worker = nullptr;
}

void Runtime::main_finished() noexcept {
  stopping_.store(true, std::memory_order_seq_cst);
  wake_all();
}

Fiber* Runtime::pop_any() noexcept {
  for (auto& v : workers_) {
    if (Fiber* f = v->runnext.take_quiescent()) return f;
    if (Fiber* f = v->runq.pop()) return f;
    if (Fiber* f = v->spill.pop_front()) {  // the other workers have stopped
      v->spill_size.store(v->spill.size(), std::memory_order_relaxed);  // queues_empty() reads it
      return f;
    }
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
      if (fiber_claim_parked(f)) victim = f;
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
      registry_->dump(std::cerr, stacks_->class_sizes(), now_ns());
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
  registry_->add(main, Registry::shard_of_worker(0));  // worker 0 spawned it
  fiber_set_state(main, FiberState::kRunnable);
  workers_[0]->spawned.store(1, std::memory_order_relaxed);
  workers_[0]->spawned_q.push(main);

  install_overflow_handler(*this);
  // The hibernator before the monitor (which drains its deferred frees), after it at shutdown.
  hibernator_ = Hibernator::start(
      *this, std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.hibernate_after).count());
  stack_restorer_ = hibernator_.get();
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
  fiber_retire_all(w0);
  remove_overflow_altstack(w0);
  tls_worker = nullptr;
  monitor_.reset();
  stack_restorer_ = nullptr;
  hibernator_.reset();  // every fiber has ended, so every hibernated stack came back
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

std::uint64_t Runtime::fibers_alive() const noexcept {
  std::uint64_t spawned = foreign_spawned.load(std::memory_order_relaxed), finished = 0;
  for (const auto& w : workers_) {
    spawned += w->spawned.load(std::memory_order_relaxed);
    finished += w->finished.load(std::memory_order_relaxed);
  }
  return spawned > finished ? spawned - finished : 0;
}

Stats Runtime::stats() noexcept {
  Stats s;
  std::int64_t in_use = 0;
  for (auto& w : workers_) {
    s.fibers_spawned += w->spawned.load(std::memory_order_relaxed);
    s.switches += w->switches.load(std::memory_order_relaxed);
    s.steals += w->steals.load(std::memory_order_relaxed);
    s.parks += w->parks.load(std::memory_order_relaxed);
    s.timers_fired += w->timers_fired.load(std::memory_order_relaxed);
    in_use += static_cast<std::int64_t>(w->stacks_in_use.load(std::memory_order_relaxed));
  }
  s.fibers_spawned += foreign_spawned.load(std::memory_order_relaxed);
  s.fibers_alive = fibers_alive();
  s.workers = nworkers();
  s.stacks_in_use = in_use > 0 ? static_cast<std::uint64_t>(in_use) : 0;
  s.stacks_cached = stacks_->cached();
  s.stack_bytes_reserved = stacks_->reserved_bytes();
  s.blocking_jobs = blocking_ ? blocking_->completed() : 0;
  s.blocking_threads = blocking_ ? blocking_->threads() : 0;
  s.watchdog_reports = monitor_ ? monitor_->reports() : 0;
  if (hibernator_) {
    const Hibernator::Counters h = hibernator_->counters();
    s.fibers_hibernated = h.hibernated;
    s.hibernated_image_bytes = h.image_bytes;
    s.hibernated_stack_bytes = h.released_bytes;
    s.hibernations = h.hibernations;
    s.hibernation_restores = h.restores;
    s.hibernation_fault_restores = h.fault_restores;
  }
  s.netpoll = poller_->name();
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
  raise_fd_soft_limit();
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
  rt->registry().dump(out, rt->stacks().class_sizes(), detail::now_ns());
}

}  // namespace weft
