// The scheduler's tuning constants, in one place so that the files of sched/ agree on them.
#pragma once

#include <cstdint>

namespace weft::detail {

constexpr std::uint32_t kGlobalCheckInterval = 61;     // as in Go: global queue fairness
constexpr std::uint32_t kTimerCheckInterval = 64;      // picks between a busy worker's timer checks
constexpr std::int64_t kBusyPollIntervalNs = 200'000;  // 200 us: busy workers collect I/O
constexpr std::uint32_t kRunnextStreakMax = 32;      // runnext ping-pong must not starve the queue
constexpr std::uint32_t kRunQueueFirstInterval = 8;  // every 8th pick prefers woken to spawned
constexpr int kStealRounds = 4;                      // steal sweeps before a spinner gives up

}  // namespace weft::detail
