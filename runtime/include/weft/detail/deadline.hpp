// Deadline arithmetic shared by the waits that take a duration (sleep_for, CondVar::wait_for,
// select's case_timeout, after/Timer/Ticker, dial timeouts): a duration too large to add to "now"
// means "practically never" and saturates instead of overflowing into the past.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

namespace weft::detail {

// now + d in nanoseconds, clamped to [min, max] of int64.
constexpr std::int64_t deadline_after_ns(std::int64_t now, std::int64_t d) noexcept {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  if (d > 0 && now > kMax - d) return kMax;
  if (d < 0 && now < kMin - d) return kMin;
  return now + d;
}

// now + d on the steady clock, saturating at time_point::max().
template <class Rep, class Period>
std::chrono::steady_clock::time_point deadline_after(std::chrono::duration<Rep, Period> d) {
  using TP = std::chrono::steady_clock::time_point;
  const TP now = std::chrono::steady_clock::now();
  if (d <= d.zero()) return now;
  if (d >= std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(TP::max() - now))
    return TP::max();
  return now + std::chrono::duration_cast<TP::duration>(d);
}

}  // namespace weft::detail
