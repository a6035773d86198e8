// Timer channels; design in timer_chan.hpp.
#include "timer_chan.hpp"

#include <chrono>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace weft::detail {
namespace {

using TimePoint = std::chrono::steady_clock::time_point;

void fire(TimerEntry* t) {
  auto* ct = reinterpret_cast<TimerChannel*>(t);
  if (ct->stopped.load(std::memory_order_acquire)) {
    // Due, but a stop/reset got in first: that call prevented this value (Go 1.23 counts a
    // send still in progress as not delivered), and it reads this flag after its cancel waited
    // for this callback to return.
    ct->suppressed.store(true, std::memory_order_relaxed);
    return;
  }
  const std::int64_t now = now_ns();
  TimePoint tp{std::chrono::nanoseconds(now)};
  chan_send(ct->chan, &tp, /*block=*/false);  // full (nobody took the last tick): drop this one
  if (ct->period_ns > 0 && !ct->stopped.load(std::memory_order_acquire) &&
      ct->timer.when_ns <= std::numeric_limits<std::int64_t>::max() - ct->period_ns) {
    std::int64_t next = ct->timer.when_ns + ct->period_ns;
    if (next <= now) next = now + ct->period_ns - (now - next) % ct->period_ns;
    ct->timer.when_ns = next;
    timer_add(&ct->timer);
  }
}

}  // namespace

ChanCore* chan_make_timer(std::int64_t first_ns, std::int64_t period_ns) {
  static_assert(std::is_trivially_copyable_v<TimePoint>);
  ChanCore* c = chan_make(1, &kElemOps<TimePoint>);
  auto ct = std::make_unique<TimerChannel>();
  ct->chan = c;
  ct->period_ns = period_ns;
  ct->timer.when_ns = first_ns;
  ct->timer.fire = &fire;
  try {
    timer_add(&ct->timer);  // throws std::logic_error without a running runtime
  } catch (...) {
    chan_release(c);
    throw;
  }
  c->timer = ct.release();
  return c;
}

namespace {
// Sets `stopped` and cancels twice (see timer_chan.hpp); after it no callback sends. True if
// the timer was still armed, or was due but its callback stood down because of `stopped`.
bool disarm(TimerChannel* ct) noexcept {
  ct->stopped.store(true, std::memory_order_release);
  bool prevented = timer_cancel(&ct->timer);
  prevented = timer_cancel(&ct->timer) || prevented;
  return ct->suppressed.exchange(false, std::memory_order_relaxed) || prevented;
}

// With ct->control held: disarm, then drain a value sent but never received.
bool stop_and_drain(ChanCore* c, TimerChannel* ct) noexcept {
  bool prevented = disarm(ct);
  TimePoint stale;
  if (chan_recv(c, &stale, /*block=*/false) == ChanResult::kOk) prevented = true;
  return prevented;
}
}  // namespace

void chan_stop_timer(ChanCore* c) noexcept {
  if (c && c->timer) disarm(c->timer);
}

bool chan_timer_stop(ChanCore* c) noexcept {
  if (!c || !c->timer) return false;
  TimerChannel* ct = c->timer;
  std::lock_guard lock(ct->control);
  return stop_and_drain(c, ct);
}

bool chan_timer_reset(ChanCore* c, std::int64_t when_ns) {
  if (!c || !c->timer) throw std::logic_error("weft::Timer::reset: a moved-from Timer");
  TimerChannel* ct = c->timer;
  std::lock_guard lock(ct->control);
  const bool prevented = stop_and_drain(c, ct);
  ct->timer.when_ns = when_ns;
  ct->stopped.store(false, std::memory_order_release);
  timer_add(&ct->timer);  // throws std::logic_error without a running runtime
  return prevented;
}

void destroy_timer(ChanCore* c) noexcept {
  chan_stop_timer(c);
  delete c->timer;
  c->timer = nullptr;
}

}  // namespace weft::detail
