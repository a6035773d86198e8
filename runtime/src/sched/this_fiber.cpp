// this_fiber::sleep_until/sleep_for (a WaitBounds -- the deadline timer, the stop request, a
// bound's signal -- armed before a gated park), stop_requested, id and set_name; the calling
// fiber's stop signal (current_stop_signal, weft/detail/wait_bounds.hpp); and
// release_stack_below_frame (weft/detail/fiber_api.hpp).
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/fiber.hpp"
#include "core/registry.hpp"
#include "sched/scheduler.hpp"
#include "weft/detail/deadline.hpp"
#include "weft/detail/fiber_api.hpp"
#include "weft/detail/wait_bounds.hpp"
#include "weft/runtime.hpp"

namespace weft {

namespace {

// The one sleep: parks until `bound` fires (its deadline is the wake-up time, or earlier) or the
// fiber's stop request does. Returns which (a CancelSignal::Why; kDeadline for a full sleep).
int sleep_bounded(const CancelToken& bound) {
  using namespace detail;
  struct Sleep {
    Waker waker;
    ParkGate gate;
  } s{Waker::current(), {}};
  // First-fire-wins in WaitBounds makes the wake single; the gate keeps a source that fires
  // before the park's commit from waking a fiber that is not parked (the commit calls it off).
  WaitBounds bounds(
      bound,
      [](void* a) {
        auto* sl = static_cast<Sleep*>(a);
        if (sl->gate.fire_wakes()) sl->waker.wake();
      },
      &s);
  struct Disarm {
    WaitBounds& b;
    ~Disarm() { b.disarm(); }
  } disarm{bounds};
  if (bounds.arm()) {
    park([](void* a) { return static_cast<Sleep*>(a)->gate.parked(); }, &s, WaitReason::kSleep);
  }
  bounds.disarm();
  return bounds.fired();
}

std::int64_t to_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

void this_fiber::sleep_until(std::chrono::steady_clock::time_point t) {
  detail::require_fiber("weft::this_fiber::sleep_until()");
  if (to_ns(t) <= detail::now_ns()) return;
  sleep_bounded(CancelToken::until(t));
}

void this_fiber::sleep_for(std::chrono::nanoseconds d) {
  if (d <= std::chrono::nanoseconds::zero()) {
    detail::require_fiber("weft::this_fiber::sleep_for()");
    return;
  }
  sleep_until(detail::deadline_after(d));
}

absl::Status this_fiber::sleep_until(std::chrono::steady_clock::time_point t,
                                     const CancelToken& bound) {
  detail::require_fiber("weft::this_fiber::sleep_until(bound)");
  std::int64_t wake = to_ns(t);
  if (wake <= 0) wake = 1;
  // The bound's own deadline, if earlier, ends the sleep as kDeadlineExceeded.
  const std::int64_t bound_deadline = bound.deadline_ns();
  const bool bound_first = bound_deadline != 0 && bound_deadline < wake;
  const CancelToken merged =
      CancelToken::from_signal(bound.signal(), bound_first ? bound_deadline : wake);
  constexpr const char* kWhat = "weft::this_fiber::sleep";
  if (wake <= detail::now_ns()) {
    // Nothing to sleep; a bound that has fired still says so.
    if (bound.signal() && bound.signal()->fired())
      return detail::wait_bound_status(bound.signal()->why(), kWhat);
    if (detail::CancelSignal* stop = detail::current_stop_signal(); stop && stop->fired())
      return detail::wait_bound_status(detail::CancelSignal::kStopped, kWhat);
    return absl::OkStatus();
  }
  const int why = sleep_bounded(merged);
  // kDeadline is the sleep's own end only if the wake-up time has come (a context's deadline
  // fires its signal with kDeadline too, earlier).
  if (why == detail::CancelSignal::kDeadline && !bound_first && detail::now_ns() >= wake)
    return absl::OkStatus();
  return detail::wait_bound_status(why, kWhat);
}

absl::Status this_fiber::sleep_for(std::chrono::nanoseconds d, const CancelToken& bound) {
  return sleep_until(detail::deadline_after(d > d.zero() ? d : d.zero()), bound);
}

detail::CancelSignal* detail::current_stop_signal() noexcept {
  detail::Fiber* f = detail::current_fiber();
  return f ? &f->stop : nullptr;
}

bool this_fiber::stop_requested() noexcept {
  detail::CancelSignal* s = detail::current_stop_signal();
  return s && s->fired();
}

void detail::release_stack_below_frame() noexcept {
  detail::Fiber* f = detail::current_fiber();
  detail::Runtime* rt = detail::current_runtime();
  if (!f || !rt) return;
  const std::uintptr_t lo =
      reinterpret_cast<std::uintptr_t>(f->stack.load(std::memory_order_relaxed));
  // The frame's address, not a local's: under ASan a local may live on a fake stack.
  const std::uintptr_t sp = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  const std::uintptr_t page = rt->stacks().page_size();
  if (lo == 0 || sp <= lo || sp - lo > rt->stacks().class_size(f->stack_class)) return;
  // Keep the page holding the frame and the one under it: madvise's own call frames are there.
  const std::uintptr_t hi = (sp & ~(page - 1)) - page;
  const std::uintptr_t start = (lo + page - 1) & ~(page - 1);
  if (hi > start) madvise(reinterpret_cast<void*>(start), hi - start, MADV_DONTNEED);
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
