// The park/wake protocol's entry points: park() (a fiber gives up its worker; its commit runs
// once its context is saved, see scheduler.hpp), Waker::wake() (into Runtime::ready, the one
// wake path), this_fiber::yield(), coop_tick() (the cooperative budget), and the plain-thread
// variants (ThreadParker). The protocol is
// described in weft/detail/park.hpp. park() and yield() are the switch-outs that the metrics
// sample (sched/tracking.hpp).
#include <stdexcept>
#include <string>

#include "core/fiber.hpp"
#include "core/thread_parker.hpp"
#include "sched/context_switch.hpp"
#include "sched/scheduler.hpp"
#include "sched/tracking.hpp"
#include "weft/detail/assert.hpp"
#include "weft/runtime.hpp"

namespace weft::detail {

Waker Waker::current() {
  if (Fiber* f = current_fiber()) return Waker(reinterpret_cast<std::uintptr_t>(f));
  return Waker(reinterpret_cast<std::uintptr_t>(&ThreadParker::current()) | 1);
}

void Waker::wake() const {
  WEFT_ASSERT(bits_ != 0, "waking an empty Waker");
  if (bits_ & 1) {
    reinterpret_cast<ThreadParker*>(bits_ & ~std::uintptr_t{1})->wake();
    return;
  }
  Fiber* f = reinterpret_cast<Fiber*>(bits_);
  // Outside a worker, announce the wake before the fiber can run (see g_outside_wakers).
  Worker* const caller = current_worker();
  const bool outside = caller == nullptr;
  if (outside) g_outside_wakers.fetch_add(1, std::memory_order_seq_cst);
  if (!current_runtime()->ready(f, caller, Runtime::kRunNext)) {
    // Only legal while shutdown resumes parked fibers out of band.
    WEFT_ASSERT(current_runtime() && current_runtime()->stopping(),
                "wake() of a fiber that is not parked");
  }
  if (outside) g_outside_wakers.fetch_sub(1, std::memory_order_release);
}

bool in_fiber() noexcept { return current_fiber() != nullptr; }

void require_fiber(const char* what) {
  if (!in_fiber()) {
    throw std::logic_error(std::string("weft: ") + what +
                           " needs a fiber, but was called from a plain thread: call it from "
                           "code running under weft::run() (a fiber started by run, go or spawn)");
  }
}

void park(CommitFn commit, void* arg, WaitReason reason, std::int64_t reason_arg) {
  Worker* w = current_worker();
  Fiber* self = w ? w->current : nullptr;
  if (!self) {
    ThreadParker::current().park(commit, arg);
    return;
  }
  Runtime* rt = w->rt;
  if (rt->unwinding() && std::uncaught_exceptions() == 0) throw FiberUnwind{};
  self->wait_reason.store(reason, std::memory_order_relaxed);
  self->wait_arg.store(reason_arg, std::memory_order_relaxed);
  const std::uint64_t parks = w->parks.load(std::memory_order_relaxed) + 1;
  w->parks.store(parks, std::memory_order_relaxed);
  track_park(parks, self, rt->coarse_now());  // parked_at_ns; exact when sampled
  w->coop_count = 0;  // a park ends the run of operations that completed at once
  w->pending = Pending{Pending::kPark, self, commit, arg};
  Fiber* me = switch_to(*w, rt->pick_next(*w)).current;
  me->wait_reason.store(WaitReason::kNone, std::memory_order_relaxed);
  if (me->unwind_requests > 0 && std::uncaught_exceptions() == 0) throw FiberUnwind{};
}

void coop_tick() {
  Worker* w = current_worker();
  if (!w || !w->current) return;
  if (w->coop_owner != w->current) {
    w->coop_owner = w->current;
    w->coop_count = 0;
  }
  if (++w->coop_count < kCoopBudget) return;
  w->coop_count = 0;
  this_fiber::yield();
}

void thread_park_until(CommitFn commit, void* arg, std::int64_t deadline_ns, CommitFn timed_out,
                       void* timeout_arg) {
  WEFT_ASSERT(!current_fiber(), "thread_park_until() called from a fiber");
  ThreadParker::current().park_until(commit, arg, deadline_ns, timed_out, timeout_arg);
}

}  // namespace weft::detail

namespace weft {

void this_fiber::yield() {
  using namespace detail;
  Worker* w = current_worker();
  if (!w || !w->current) require_fiber("weft::this_fiber::yield()");
  Runtime* rt = w->rt;
  if (rt->unwinding() && std::uncaught_exceptions() == 0) throw FiberUnwind{};
  Fiber* next = rt->pick_next(*w);
  if (!next) {
    // A fiber that yields in a loop on an otherwise idle worker never switches, so it must keep
    // time itself: due timers may make something runnable (a yielding fiber holds no spin lock).
    rt->run_timers_and_poll(*w);
    next = rt->pick_next(*w);
  }
  // Nothing else to run: keep going, unless the runtime is stopping, in which case the worker
  // must get back to its scheduler loop (the fiber is queued and unwound later).
  if (!next && !rt->stopping()) return;
  track_yield(w->yield_tick, w->current);
  w->pending = Pending{Pending::kYield, w->current, nullptr, nullptr};
  Fiber* me = switch_to(*w, next).current;
  if (me->unwind_requests > 0 && std::uncaught_exceptions() == 0) throw FiberUnwind{};
}

}  // namespace weft
