// Tracking: the park-time and scheduling-latency histograms behind weft::write_metrics
// (services/metrics.cpp), sampled as Go's runtime samples scheduling latency (gTrackingPeriod):
// every kTrackingPeriod-th park of each worker (by Worker::parks) and every kTrackingPeriod-th of
// its yields (Worker::yield_tick) is tracked. The others cost a counter test at the park or yield
// and a byte test in ready() and in switch_to.
//
// A tracked fiber carries its state in Fiber::track and its timestamp in Fiber::parked_at_ns:
//
//   park()  sampled   track = kTrackParked,   parked_at_ns = now_ns()  (exact, not coarse)
//   yield() sampled   track = kTrackRunnable, parked_at_ns = now_ns()
//   ready()           kTrackParked: park_hist += now - parked_at_ns, then track = kTrackRunnable,
//                     parked_at_ns = now (the wake: the one wake path, so every primitive counts)
//   switch_to         kTrackRunnable: latency_hist += now - parked_at_ns; any: track = kTrackOff
//                     (kTrackParked there: shutdown resumed it without ready(); nothing recorded)
//
// Invariants:
//  - track and a tracked parked_at_ns are written only by the fiber's owner of the moment: the
//    fiber as it switches out, the waker that claimed it in Runtime::ready (before it queues the
//    fiber), the worker switching it in. Ownership passes through the park commit's release and
//    the queues' release/acquire, as for the fiber's other plain fields. A running fiber's track
//    is kTrackOff. parked_at_ns of a parked fiber is always when it parked (dumps read it).
//  - Each histogram has one writer, so recording takes no lock and no atomic read-modify-write:
//    a worker's park_hist is written by ready() on that worker's own thread (its `caller` is the
//    calling thread's worker), its latency_hist by switch_to on it; both with relaxed
//    load + store, like the Worker counters. Wakes from plain threads (blocking-pool and user
//    threads) record into Runtime::foreign_park_hist with fetch_add: such a wake already costs
//    seq_cst read-modify-writes and a global-queue push.
//  - Readers (any thread) sum relaxed loads into a Snapshot. Its _count is the sum of the
//    buckets read, so a snapshot is cumulative and consistent while writers run; _sum may be a
//    sample apart.
//  - Samples only: a _count is about 1/kTrackingPeriod of the parks (park time) or of the parks
//    and yields (scheduling latency); a new fiber's first run is not tracked.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "core/fiber.hpp"
#include "sched/tuning.hpp"

namespace weft::detail {

class Runtime;
struct Worker;

// Fiber::track values.
inline constexpr std::uint8_t kTrackOff = 0;
inline constexpr std::uint8_t kTrackParked = 1;    // a sampled park, not woken yet
inline constexpr std::uint8_t kTrackRunnable = 2;  // woken or yielded after a sample, not run yet

struct LatencyHistogram {
  // Upper bounds (inclusive, Prometheus' `le`): powers of two from 128 ns to 2^34 ns (17.2 s),
  // so that a bucket is found with one bit scan; the last bucket holds what is above them all.
  static constexpr int kMinShift = 7, kMaxShift = 34;
  static constexpr std::size_t kBounds = kMaxShift - kMinShift + 1;
  static constexpr std::size_t kBuckets = kBounds + 1;
  static constexpr std::int64_t bound_ns(std::size_t i) noexcept {
    return std::int64_t{1} << (kMinShift + static_cast<int>(i));
  }

  struct Snapshot {
    std::array<std::uint64_t, kBuckets> counts{};  // per bucket, not cumulative
    std::uint64_t sum_ns = 0;
  };

  static constexpr std::size_t bucket_of(std::int64_t ns) noexcept {
    if (ns <= bound_ns(0)) return 0;
    const int up = std::bit_width(static_cast<std::uint64_t>(ns - 1));  // ceil(log2(ns))
    return up > kMaxShift ? kBounds : static_cast<std::size_t>(up - kMinShift);
  }
  // The histogram's one writer thread.
  void record_owned(std::int64_t ns) noexcept {
    if (ns < 0) ns = 0;
    std::atomic<std::uint64_t>& c = counts[bucket_of(ns)];
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    sum_ns.store(sum_ns.load(std::memory_order_relaxed) + static_cast<std::uint64_t>(ns),
                 std::memory_order_relaxed);
  }
  // Any thread.
  void record_shared(std::int64_t ns) noexcept {
    if (ns < 0) ns = 0;
    counts[bucket_of(ns)].fetch_add(1, std::memory_order_relaxed);
    sum_ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
  }
  // Any thread: adds this histogram's counts to `s`.
  void read_into(Snapshot& s) const noexcept {
    for (std::size_t i = 0; i < kBuckets; ++i)
      s.counts[i] += counts[i].load(std::memory_order_relaxed);
    s.sum_ns += sum_ns.load(std::memory_order_relaxed);
  }

  std::array<std::atomic<std::uint64_t>, kBuckets> counts{};
  std::atomic<std::uint64_t> sum_ns{0};
};

// The cold halves of the hooks below (tracking.cpp).
[[gnu::cold]] void note_tracked_wake(Runtime& rt, Fiber* f, Worker* caller) noexcept;
[[gnu::cold]] void note_tracked_run(Worker& w, Fiber* f) noexcept;

// park(), before the switch: stamps the park, exactly when it is sampled (`nth`: the worker's
// Worker::parks, this park counted), else with the coarse clock.
inline void track_park(std::uint64_t nth, Fiber* f, std::int64_t coarse_now) noexcept {
  if (nth % kTrackingPeriod == 0) [[unlikely]] {
    f->track = kTrackParked;
    f->parked_at_ns.store(now_ns(), std::memory_order_relaxed);
  } else {
    f->parked_at_ns.store(coarse_now, std::memory_order_relaxed);
  }
}
// yield(), before the switch (`tick`: the worker's Worker::yield_tick).
inline void track_yield(std::uint32_t& tick, Fiber* f) noexcept {
  if (++tick % kTrackingPeriod == 0) [[unlikely]] {
    f->track = kTrackRunnable;
    f->parked_at_ns.store(now_ns(), std::memory_order_relaxed);
  }
}
// ready(), once it won the claim and before it queues `f`.
inline void track_wake(Runtime& rt, Fiber* f, Worker* caller) noexcept {
  if (f->track == kTrackParked) [[unlikely]]
    note_tracked_wake(rt, f, caller);
}
// switch_to, as `w` switches `f` in.
inline void track_run(Worker& w, Fiber* f) noexcept {
  if (f->track != kTrackOff) [[unlikely]]
    note_tracked_run(w, f);
}

}  // namespace weft::detail
