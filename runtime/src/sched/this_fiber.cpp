// this_fiber::sleep_until/sleep_for (a park whose commit arms a timer), id and set_name.
#include <cstddef>
#include <string>

#include "core/fiber.hpp"
#include "core/registry.hpp"
#include "sched/scheduler.hpp"
#include "weft/detail/deadline.hpp"
#include "weft/runtime.hpp"

namespace weft {

void this_fiber::sleep_until(std::chrono::steady_clock::time_point t) {
  using namespace detail;
  require_fiber("weft::this_fiber::sleep_until()");
  const std::int64_t when =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  if (when <= now_ns()) return;
  struct Sleep {
    TimerEntry timer;
    Waker waker;
  } s;
  s.timer.when_ns = when;
  s.waker = Waker::current();
  s.timer.fire = [](TimerEntry* t) {
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
  sleep_until(detail::deadline_after(d));
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
