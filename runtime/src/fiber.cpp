// Fiber lifecycle (create, start, join, finish, free), the park()/Waker protocol entry points and
// this_fiber::*. The protocol itself is described in weft/detail/park.hpp and scheduler.hpp.
#include "fiber.hpp"

#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

#include "blocking_pool.hpp"
#include "fiber_alloc.hpp"
#include "registry.hpp"
#include "scheduler.hpp"
#include "thread_parker.hpp"
#include "timers.hpp"
#include "weft/detail/assert.hpp"
#include "weft/runtime.hpp"

namespace weft::detail {
namespace {

constexpr std::uintptr_t kJoinDone = 1;

Runtime& runtime_or_throw(const char* what) {
  Runtime* rt = current_runtime();
  if (!rt) {
    throw std::logic_error(std::string("weft: ") + what +
                           " called while no runtime is running: call it from code running "
                           "under weft::run()");
  }
  return *rt;
}

}  // namespace

const char* fiber_state_name(FiberState s) noexcept {
  switch (s) {
    case FiberState::kCreated:
      return "created";
    case FiberState::kRunnable:
      return "runnable";
    case FiberState::kRunning:
      return "running";
    case FiberState::kParked:
      return "parked";
    case FiberState::kDone:
      return "done";
  }
  return "?";
}

const char* wait_reason_name(WaitReason r) noexcept {
  switch (r) {
    case WaitReason::kNone:
      return "none";
    case WaitReason::kMutex:
      return "mutex";
    case WaitReason::kCondVar:
      return "condvar";
    case WaitReason::kWaitGroup:
      return "waitgroup";
    case WaitReason::kSemaphore:
      return "semaphore";
    case WaitReason::kJoin:
      return "join";
    case WaitReason::kSleep:
      return "sleep";
    case WaitReason::kBlocking:
      return "blocking call";
    case WaitReason::kChanRecv:
      return "chan recv";
    case WaitReason::kChanSend:
      return "chan send";
    case WaitReason::kSelect:
      return "select";
    case WaitReason::kIoRead:
      return "io read";
    case WaitReason::kIoWrite:
      return "io write";
    case WaitReason::kForever:
      return "forever";
  }
  return "?";
}

void assert_fail(const char* expr, const char* msg, const char* file, int line) noexcept {
  std::fprintf(stderr, "weft: assertion failed: %s (%s) at %s:%d\n", expr, msg, file, line);
  std::abort();
}

void FiberList::push(Fiber* f) noexcept {
  f->next = nullptr;
  (tail ? tail->next : head) = f;
  tail = f;
  ++size;
}

Fiber* FiberList::pop() noexcept {
  Fiber* f = head;
  if (f) {
    head = f->next;
    if (!head) tail = nullptr;
    f->next = nullptr;
    --size;
  }
  return f;
}

// ---- creation and lifetime -------------------------------------------------------------------

Fiber* fiber_create(const ClosureOps* ops, std::size_t closure_size, std::size_t closure_align,
                    void** storage) {
  Runtime& rt = runtime_or_throw("weft::go/weft::spawn");
  const std::size_t align = closure_align > alignof(Fiber) ? closure_align : alignof(Fiber);
  const std::size_t offset = (sizeof(Fiber) + closure_align - 1) / closure_align * closure_align;
  const bool pooled = FiberAlloc::fits(offset + closure_size, align);
  void* mem = pooled ? FiberAlloc::allocate()
                     : ::operator new(offset + closure_size, std::align_val_t(align));
  Fiber* f = ::new (mem) Fiber();
  f->ops = ops;
  f->storage_offset = static_cast<std::uint32_t>(offset);
  f->alloc_align = pooled ? 0 : static_cast<std::uint32_t>(align);
  f->id = rt.alloc_id(current_worker());
  *storage = f->storage();
  return f;
}

void fiber_free(Fiber* f) noexcept {
  if (f->ops->release) f->ops->release(f->storage());
  fiber_abandon(f);
}

void fiber_abandon(Fiber* f) noexcept {
  delete f->name;
  const std::size_t align = f->alloc_align;
  f->~Fiber();
  if (align == 0) {
    FiberAlloc::deallocate(f);
  } else {
    ::operator delete(f, std::align_val_t(align));
  }
}

void fiber_start(Fiber* f, bool joinable) {
  Runtime& rt = runtime_or_throw("weft::go/weft::spawn");
  if (joinable) f->refs.store(2, std::memory_order_relaxed);
  rt.registry().add(f);
  Worker* w = current_worker();
  if (w) {
    w->spawned.store(w->spawned.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    rt.foreign_spawned.fetch_add(1, std::memory_order_relaxed);
  }
  f->state.store(FiberState::kRunnable, std::memory_order_relaxed);
  // A flooded worker makes the spawner yield, so the fibers it made run before it makes more.
  if (rt.submit_spawned(f) && w->current && !rt.unwinding()) this_fiber::yield();
}

void fiber_release(Fiber* f) noexcept {
  if (f->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) fiber_free(f);
}

std::uint64_t fiber_id(const Fiber* f) noexcept { return f->id; }

void fiber_finished_bookkeeping(Worker& w, Fiber* f) {
  w.rt->registry().remove(f);
  w.finished.store(w.finished.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  f->state.store(FiberState::kDone, std::memory_order_release);
  const std::uintptr_t old = f->join_word.exchange(kJoinDone, std::memory_order_acq_rel);
  if (old > kJoinDone) reinterpret_cast<WaitNode*>(old)->waker.wake();
  if (f->is_main) w.rt->main_finished();
}

void fiber_drop_unstarted(Fiber* f) noexcept {
  f->ops->drop(f->storage());
  f->unwound = true;
  fiber_finished_bookkeeping(*current_worker(), f);
  fiber_release(f);
}

bool fiber_join(Fiber* f) {
  if (f->join_word.load(std::memory_order_acquire) != kJoinDone) {
    WaitNode node;
    node.waker = Waker::current();
    struct Ctx {
      Fiber* f;
      WaitNode* node;
    } ctx{f, &node};
    try {
      park(
          [](void* a) {
            auto* c = static_cast<Ctx*>(a);
            std::uintptr_t expected = 0;
            return c->f->join_word.compare_exchange_strong(
                expected, reinterpret_cast<std::uintptr_t>(c->node), std::memory_order_acq_rel);
          },
          &ctx, WaitReason::kJoin, static_cast<std::int64_t>(f->id));
    } catch (const FiberUnwind&) {
      std::uintptr_t mine = reinterpret_cast<std::uintptr_t>(&node);
      f->join_word.compare_exchange_strong(mine, 0, std::memory_order_acq_rel);
      throw;
    }
  }
  if (f->unwound) {
    // The joined fiber was unwound at shutdown. A joining fiber is being shut down too: unwind
    // it as well rather than hand it an error it would have to handle (it might be a go() fiber,
    // for which any escaping exception is fatal).
    Runtime* rt = current_runtime();
    if (rt && rt->unwinding() && in_fiber() && std::uncaught_exceptions() == 0) {
      throw FiberUnwind{};
    }
    return false;
  }
  return true;
}

[[noreturn]] void die_uncaught_exception(const char* what) noexcept {
  Fiber* f = current_fiber();
  std::string name;
  if (f && current_runtime()) name = current_runtime()->registry().name_of(f);
  std::fprintf(stderr,
               "weft: fiber %llu \"%s\" ended by an uncaught exception: %s\n"
               "weft: an exception escaping a go() fiber is fatal (like a Go panic); catch it in "
               "the fiber, or use weft::spawn() and Task::join() to receive it\n",
               f ? static_cast<unsigned long long>(f->id) : 0ull, name.c_str(), what);
  std::fflush(stderr);
  std::abort();
}

// ---- parking ------------------------------------------------------------------------------------

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
  FiberState expected = FiberState::kParked;
  if (f->state.compare_exchange_strong(expected, FiberState::kRunnable,
                                       std::memory_order_acq_rel)) {
    current_runtime()->submit_ready(f, caller);
  } else {
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
  self->parked_at_ns.store(rt->coarse_now(), std::memory_order_relaxed);
  w->parks.store(w->parks.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  w->pending = Pending{Pending::kPark, self, commit, arg};
  switch_to(*w, rt->pick_local(*w));
  Fiber* me = current_fiber();
  me->wait_reason.store(WaitReason::kNone, std::memory_order_relaxed);
  if (me->unwind_requests > 0 && std::uncaught_exceptions() == 0) throw FiberUnwind{};
}

void thread_park_until(CommitFn commit, void* arg, std::int64_t deadline_ns, CommitFn timed_out,
                       void* timeout_arg) {
  WEFT_ASSERT(!current_fiber(), "thread_park_until() called from a fiber");
  ThreadParker::current().park_until(commit, arg, deadline_ns, timed_out, timeout_arg);
}

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void timer_add(Timer* t) {
  Runtime& rt = runtime_or_throw("a weft timer");
  if (rt.timers().add(t)) rt.timers_changed();
}

bool timer_cancel(Timer* t) noexcept {
  Runtime* rt = current_runtime();
  return rt ? rt->timers().cancel(t) : false;
}

void run_blocking(void (*job)(void*), void* arg) {
  Runtime& rt = runtime_or_throw("weft::blocking");
  BlockingPool::Job j{job, arg, Waker::current()};
  struct Ctx {
    BlockingPool* pool;
    BlockingPool::Job* job;
  } ctx{&rt.blocking(), &j};
  // The job owns the fiber's frame until it wakes it, so shutdown waits for it instead of
  // unwinding (see Runtime::shutdown_unwind); park() never throws here for that reason.
  park(
      [](void* a) {
        auto* c = static_cast<Ctx*>(a);
        c->pool->submit(c->job);
        return true;
      },
      &ctx, WaitReason::kBlocking);
}

}  // namespace weft::detail

namespace weft {

void this_fiber::yield() {
  using namespace detail;
  Worker* w = current_worker();
  if (!w || !w->current) require_fiber("weft::this_fiber::yield()");
  Runtime* rt = w->rt;
  if (rt->unwinding() && std::uncaught_exceptions() == 0) throw FiberUnwind{};
  Fiber* next = rt->pick_local(*w);
  if (!next) {
    // A fiber that yields in a loop on an otherwise idle worker never switches, so it must keep
    // time itself: due timers may make something runnable (a yielding fiber holds no spin lock).
    rt->maybe_run_timers(*w, /*every_time=*/true);
    next = rt->pick_local(*w);
  }
  // Nothing else to run: keep going, unless the runtime is stopping, in which case the worker
  // must get back to its scheduler loop (the fiber is queued and unwound later).
  if (!next && !rt->stopping()) return;
  w->pending = Pending{Pending::kYield, w->current, nullptr, nullptr};
  switch_to(*w, next);
  Fiber* me = current_fiber();
  if (me->unwind_requests > 0 && std::uncaught_exceptions() == 0) throw FiberUnwind{};
}

void this_fiber::sleep_until(std::chrono::steady_clock::time_point t) {
  using namespace detail;
  require_fiber("weft::this_fiber::sleep_until()");
  const std::int64_t when =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  if (when <= now_ns()) return;
  struct Sleep {
    Timer timer;
    Waker waker;
  } s;
  s.timer.when_ns = when;
  s.waker = Waker::current();
  s.timer.fire = [](Timer* t) {
    reinterpret_cast<Sleep*>(reinterpret_cast<char*>(t) - offsetof(Sleep, timer))->waker.wake();
  };
  try {
    park(
        [](void* a) {
          timer_add(&static_cast<Sleep*>(a)->timer);
          return true;
        },
        &s, WaitReason::kSleep);
  } catch (const FiberUnwind&) {
    timer_cancel(&s.timer);
    throw;
  }
}

void this_fiber::sleep_for(std::chrono::nanoseconds d) {
  if (d <= std::chrono::nanoseconds::zero()) {
    detail::require_fiber("weft::this_fiber::sleep_for()");
    return;
  }
  sleep_until(std::chrono::steady_clock::now() + d);
}

std::uint64_t this_fiber::id() noexcept {
  detail::Fiber* f = detail::current_fiber();
  return f ? f->id : 0;
}

void this_fiber::set_name(std::string_view name) {
  detail::require_fiber("weft::this_fiber::set_name()");
  detail::current_runtime()->registry().set_name(detail::current_fiber(), std::string(name));
}

}  // namespace weft
