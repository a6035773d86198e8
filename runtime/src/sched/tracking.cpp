// The cold halves of the tracking hooks: what a sampled wake and a sampled switch-in record.
// Design and invariants in tracking.hpp.
#include "sched/tracking.hpp"

#include "sched/scheduler.hpp"

namespace weft::detail {

// `le` is inclusive: a value on a bound counts in that bound's bucket.
static_assert(LatencyHistogram::bucket_of(0) == 0 && LatencyHistogram::bucket_of(128) == 0);
static_assert(LatencyHistogram::bucket_of(129) == 1 && LatencyHistogram::bucket_of(256) == 1);
static_assert(LatencyHistogram::bucket_of(257) == 2);
static_assert(LatencyHistogram::bucket_of(std::int64_t{1} << 34) == LatencyHistogram::kBounds - 1);
static_assert(LatencyHistogram::bucket_of((std::int64_t{1} << 34) + 1) ==
              LatencyHistogram::kBounds);

void note_tracked_wake(Runtime& rt, Fiber* f, Worker* caller) noexcept {
  const std::int64_t now = now_ns();
  const std::int64_t parked = now - f->parked_at_ns.load(std::memory_order_relaxed);
  if (caller && caller->rt == &rt) {
    caller->park_hist.record_owned(parked);  // `caller` is this thread's worker
  } else {
    rt.foreign_park_hist.record_shared(parked);
  }
  f->track = kTrackRunnable;
  f->parked_at_ns.store(now, std::memory_order_relaxed);
}

void note_tracked_run(Worker& w, Fiber* f) noexcept {
  if (f->track == kTrackRunnable) {
    w.latency_hist.record_owned(now_ns() - f->parked_at_ns.load(std::memory_order_relaxed));
  }
  f->track = kTrackOff;
}

}  // namespace weft::detail
