// Context switching: the only code that jumps between stacks. Design in scheduler.hpp.
//
// Every jump is bracketed for the sanitizers (ASan fake stacks, TSan fibers) and carries the
// per-fiber copies of thread state that would otherwise leak between fibers sharing a kernel
// thread: errno and libstdc++'s exception globals (the stack of caught exceptions and the
// uncaught count). Without the latter, a fiber that parks inside a catch block corrupts the
// caught-exception stack of the next fiber that throws on that thread.
#include "sched/context_switch.hpp"

#include <cerrno>

#include "core/jump_context.hpp"
#include "core/registry.hpp"
#include "core/stack_profiler.hpp"
#include "core/stack_restorer.hpp"
#include "sched/fiber_lifecycle.hpp"
#include "sched/fiber_locals.hpp"
#include "sched/scheduler.hpp"
#include "sched/tracking.hpp"
#include "weft/detail/assert.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace __cxxabiv1 {
struct __cxa_eh_globals;
extern "C" __cxa_eh_globals* __cxa_get_globals() noexcept;
}  // namespace __cxxabiv1

namespace weft::detail {
namespace {

// libstdc++'s layout (libsupc++/unwind-cxx.h); stable ABI since GCC 3.
struct EhGlobals {
  void* caught;
  unsigned int uncaught;
};

// The per-thread addresses are cached in the Worker, which never changes threads; a fiber reads
// them through the worker it is on *now*, so migration cannot make it use another thread's copy.
inline void save_thread_state(Worker& w, Fiber* f) noexcept {
  if (!f) return;
  f->saved_errno = *w.errno_addr;
  auto* g = static_cast<EhGlobals*>(w.eh_globals);
  f->eh_caught = g->caught;
  f->eh_uncaught = g->uncaught;
}

inline void restore_thread_state(Worker& w, Fiber* f) noexcept {
  auto* g = static_cast<EhGlobals*>(w.eh_globals);
  if (f) {
    *w.errno_addr = f->saved_errno;
    g->caught = f->eh_caught;
    g->uncaught = f->eh_uncaught;
  } else {
    // The scheduler context never holds exceptions across a switch.
    g->caught = nullptr;
    g->uncaught = 0;
  }
}

inline void sanitizer_before_jump(Worker& w, Fiber* from, Fiber* to, bool from_exits) {
#if defined(__SANITIZE_ADDRESS__)
  void** save = from_exits ? nullptr : (from ? &from->asan_fake_stack : &w.sched_fake_stack);
  if (to) {
    __sanitizer_start_switch_fiber(save, to->stack.load(std::memory_order_relaxed),
                                   w.rt->stacks().class_size(to->stack_class));
  } else {
    __sanitizer_start_switch_fiber(save, w.thread_stack_bottom, w.thread_stack_size);
  }
#else
  (void)from_exits;
#endif
#if defined(__SANITIZE_THREAD__)
  __tsan_switch_to_fiber(to ? to->tsan_fiber : w.tsan_sched_fiber, 0);
#endif
  (void)w;
  (void)from;
  (void)to;
}

inline void sanitizer_after_jump(Worker& w) {
#if defined(__SANITIZE_ADDRESS__)
  Fiber* me = w.current;
  const void* old_bottom = nullptr;
  std::size_t old_size = 0;
  __sanitizer_finish_switch_fiber(me ? me->asan_fake_stack : w.sched_fake_stack, &old_bottom,
                                  &old_size);
  if (!w.thread_stack_bottom && !w.pending.from) {
    // First switch out of the scheduler context: ASan tells us the thread's stack bounds.
    w.thread_stack_bottom = old_bottom;
    w.thread_stack_size = old_size;
  }
#else
  (void)w;
#endif
}

// The exit half of a switch away from a finished fiber: its stack goes back to the pool and
// its header to its last reference holder.
[[gnu::noinline]] void free_exited_fiber(Worker& w, Fiber* f) {
  if (StackProfiler* prof = w.rt->profiler()) {
    prof->record(f->name, f->stack.load(std::memory_order_relaxed),
                 w.rt->stacks().class_size(f->stack_class), f->unwound);
  }
  w.rt->stacks().release(w.stacks, f->stack.load(std::memory_order_relaxed), f->stack_class);
  w.stacks_in_use.fetch_sub(1, std::memory_order_relaxed);
  f->stack.store(nullptr, std::memory_order_relaxed);
#if defined(__SANITIZE_THREAD__)
  __tsan_destroy_fiber(f->tsan_fiber);
  f->tsan_fiber = nullptr;
#endif
  fiber_retire(w, f);
}

// The second half of every switch, run by the code that resumes: the jump's data is the worker
// of the thread that jumped, which is the thread running us now (so no thread-local lookup).
// It stores the context of the side that switched away and runs its pending action, once that
// side's stack is no longer in use: push it (yield), publish it as parked via its commit (park),
// or free its stack (exit).
inline Worker& after_switch(transfer_t t) {
  Worker& w = *static_cast<Worker*>(t.data);
  sanitizer_after_jump(w);
  const Pending::Kind kind = w.pending.kind;
  Fiber* const from = w.pending.from;
  w.pending.kind = Pending::kNone;
  if (from) {
    from->ctx.store(t.fctx, std::memory_order_relaxed);
  } else {
    w.sched_ctx = t.fctx;
  }
  if (kind == Pending::kYield) [[likely]] {
    fiber_set_state(from, FiberState::kRunnable);
    w.rt->push_local(w, from);
  } else if (kind == Pending::kPark) {
    fiber_set_state(from, FiberState::kParked, std::memory_order_release);
    // The park was called off: nobody else knows the fiber, so it is ours to requeue.
    if (!w.pending.commit(w.pending.arg)) w.rt->ready(from, &w, Runtime::kQueueTail);
  } else if (kind == Pending::kExit) {
    free_exited_fiber(w, from);
  }
  restore_thread_state(w, w.current);
  if (w.current) w.rt->maybe_run_timers_and_poll(w);
  return w;
}

void fiber_trampoline(transfer_t t) {
  Worker* w = &after_switch(t);
  Fiber* self = w->current;
  try {
    self->ops->run(self->storage());
  } catch (const FiberUnwind&) {
    self->unwound = true;
  }
  if (self->locals) destroy_fiber_locals(self);
  w = current_worker();  // the fiber may have migrated
  exit_current_fiber(*w);
}

}  // namespace

void prepare_first_run(Worker& w, Fiber* f) {
  StackPool& pool = w.rt->stacks();
  char* stack = pool.acquire(w.stacks, f->stack_class);
  const std::size_t size = pool.class_size(f->stack_class);
#if defined(__SANITIZE_ADDRESS__)
  // A fiber that exits never returns from its frames, so their scope poisoning stays in the
  // shadow memory; a reused stack must start clean.
  ASAN_UNPOISON_MEMORY_REGION(stack, size);
#endif
  f->stack.store(stack, std::memory_order_relaxed);
  w.stacks_in_use.fetch_add(1, std::memory_order_relaxed);
  f->ctx.store(make_fcontext(stack + size, size, &fiber_trampoline), std::memory_order_relaxed);
#if defined(__SANITIZE_THREAD__)
  f->tsan_fiber = __tsan_create_fiber(0);
#endif
}

namespace {

// The rare half of switching a fiber in, out of line so that the common path keeps nothing in
// callee-saved registers: its first run needs a stack, and a hibernated stack must come back
// before the jump reads it.
[[gnu::noinline]] void make_runnable_stack(Worker& w, Fiber* next) {
  if (!next->ctx.load(std::memory_order_relaxed)) prepare_first_run(w, next);
  if (next->hibernation.load(std::memory_order_acquire) != 0) w.rt->stack_restorer()->restore(next);
}

}  // namespace

// Out of line, so that every jump_context is made from this one call site: a resumed fiber then
// returns to the address the jumping side's call pushed, which keeps the CPU's return predictor
// right (jump_context_x86_64.S).
[[gnu::noinline]] Worker& switch_to(Worker& w, Fiber* next) {
  Fiber* from = w.current;
  const bool exiting = w.pending.kind == Pending::kExit;
  if (!exiting) save_thread_state(w, from);
  fcontext_t target;
  if (next) {
    WEFT_ASSERT(next != from, "switching a fiber to itself");
    WEFT_ASSERT(next->state.load(std::memory_order_relaxed) != FiberState::kDone,
                "resuming a finished fiber");
    if (!next->ctx.load(std::memory_order_relaxed) ||
        next->hibernation.load(std::memory_order_acquire) != 0) [[unlikely]] {
      make_runnable_stack(w, next);
    }
    fiber_set_state(next, FiberState::kRunning);
    track_run(w, next);  // a sampled fiber's scheduling latency ends here (tracking.hpp)
    target = next->ctx.load(std::memory_order_relaxed);
    w.switches.store(w.switches.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    target = w.sched_ctx;
  }
  w.current = next;
  w.running_id.store(next ? next->id : 0, std::memory_order_relaxed);
  sanitizer_before_jump(w, from, next, exiting);
  return after_switch(jump_context(target, &w));
}

void resume_from_scheduler(Worker& w, Fiber* f) {
  w.pending = Pending{Pending::kNone, nullptr, nullptr, nullptr};
  (void)switch_to(w, f);
}

void bind_thread_state(Worker& w) noexcept {
  w.errno_addr = &errno;
  w.eh_globals = __cxxabiv1::__cxa_get_globals();
}

void exit_current_fiber(Worker& w) {
  Fiber* self = w.current;
  fiber_finished_bookkeeping(w, self);
  Worker& w2 = *current_worker();
  w2.pending = Pending{Pending::kExit, self, nullptr, nullptr};
  (void)switch_to(w2, w2.rt->pick_next(w2));
  __builtin_unreachable();
}

}  // namespace weft::detail
