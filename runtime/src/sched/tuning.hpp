// The scheduler's tuning constants, in one place so that the files of sched/ agree on them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::detail {

constexpr std::uint32_t kGlobalCheckInterval = 61;     // as in Go: global queue fairness
constexpr std::uint32_t kTimerCheckInterval = 64;      // picks between a busy worker's timer checks
constexpr std::int64_t kBusyPollIntervalNs = 200'000;  // 200 us: busy workers collect I/O
constexpr std::size_t kBusyPollMaxQueued = 64;  // ... if no more than this waits in their queue
constexpr std::int64_t kBusyPollBackstopNs = 1'000'000;  // 1 ms: any busy worker collects I/O
constexpr std::uint32_t kRunnextStreakMax = 32;      // runnext ping-pong must not starve the queue
constexpr std::uint32_t kRunQueueFirstInterval = 8;  // every 8th pick prefers woken to spawned
constexpr int kStealRounds = 4;                      // steal sweeps before a spinner gives up
constexpr std::size_t kIdleFiberChunks = 8;  // fiber headers a worker keeps cached while idle
constexpr std::size_t kRetireBatch = 64;  // ended fibers of another worker's shard unlinked at once
// Every 64th park and yield of a worker is timed for the metrics' histograms (Go's
// gTrackingPeriod is 8). A timed one reads the clock two or three times (kvm-clock: ~25 ns each);
// at 8 that was ~7 ns on a ~38 ns switch, at 64 it is under 1 ns, and a server parking 100k
// times a second still gets 1.5k samples a second.
constexpr std::uint32_t kTrackingPeriod = 64;
// A thief takes a busy worker's only queued fiber once it has seen it waiting this long, and its
// runnext once it has seen the worker not switch for this long (Runtime::steal; Go waits 3 us
// before it steals a running P's runnext).
constexpr std::int64_t kLoneStealDelayNs = 100'000;
// An idle worker that saw work it could not take yet waits this long before it looks again
// (find_runnable), so that it does not keep pulling the other workers' queue lines.
constexpr std::int64_t kIdleRecheckPauseNs = 5'000;

}  // namespace weft::detail
