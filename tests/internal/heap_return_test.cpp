// HeapReturn's policy (services/heap_return.hpp), driven with made-up clocks, fiber counts and
// RSS figures (the hooks stand in for /proc/self/statm and malloc_trim): when a trim happens,
// when it does not, and how the periodic one backs off. What malloc_trim really returns is the
// RSS tests' part (net_leak_test).
#include "services/heap_return.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace {

using weft::detail::HeapReturn;

constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kInterval = 10'000 * kMs;

// The fake process: RSS, and how much of it the next trim gives back.
std::int64_t g_rss = 100 << 20;
std::int64_t g_returnable = 0;
HeapReturn::Hooks fake_hooks() {
  g_rss = 100 << 20;
  g_returnable = 0;
  return HeapReturn::Hooks{[] { return g_rss; },
                           [] {
                             g_rss -= g_returnable;
                             g_returnable = 0;
                           }};
}

// Ticks every 100 ms from `from` to `to` (exclusive) with `live` fibers; returns the trims made.
std::uint64_t run_ticks(HeapReturn& h, std::int64_t from, std::int64_t to, std::uint64_t live) {
  const std::uint64_t before = h.trims();
  for (std::int64_t t = from; t < to; t += 100 * kMs) h.tick(t, live);
  return h.trims() - before;
}

TEST(HeapReturn, SteadyLoadTrimsOnlyAtTheInterval) {
  HeapReturn h(kInterval, fake_hooks());
  EXPECT_EQ(run_ticks(h, 1 * kMs, 9'900 * kMs, 5000), 0u);
  EXPECT_EQ(run_ticks(h, 9'901 * kMs, 10'101 * kMs, 5000), 1u);  // the interval has passed
  EXPECT_EQ(run_ticks(h, 10'101 * kMs, 19'900 * kMs, 5000), 0u);
}

TEST(HeapReturn, AnEndedBurstTrimsAfterASecondThenFollowsUp) {
  HeapReturn h(kInterval, fake_hooks());
  run_ticks(h, 1 * kMs, 1'000 * kMs, 100);
  run_ticks(h, 1'000 * kMs, 2'000 * kMs, 20'000);  // the burst
  // It ends: nothing while the count settles (under a second), then one trim.
  EXPECT_EQ(run_ticks(h, 2'000 * kMs, 2'900 * kMs, 100), 0u);
  EXPECT_EQ(run_ticks(h, 2'900 * kMs, 3'100 * kMs, 100), 1u);
  // kFollowUps more, a second apart, then quiet until the interval.
  EXPECT_EQ(run_ticks(h, 3'100 * kMs, 8'200 * kMs, 100),
            static_cast<std::uint64_t>(HeapReturn::kFollowUps));
  EXPECT_EQ(run_ticks(h, 8'200 * kMs, 12'000 * kMs, 100), 0u);
}

TEST(HeapReturn, SmallDropsAndNewRampsDoNotTrim) {
  {
    // A drop smaller than kMinDrop is not a burst ending.
    HeapReturn h(kInterval, fake_hooks());
    run_ticks(h, 1 * kMs, 1'000 * kMs, 1000);
    EXPECT_EQ(run_ticks(h, 1'000 * kMs, 4'000 * kMs, 1000 - HeapReturn::kMinDrop + 1), 0u);
  }
  {
    // Nor is one smaller than a quarter of the peak.
    HeapReturn h(kInterval, fake_hooks());
    run_ticks(h, 1 * kMs, 1'000 * kMs, 100'000);
    EXPECT_EQ(run_ticks(h, 1'000 * kMs, 4'000 * kMs, 80'000), 0u);
  }
  {
    // A count that falls and at once climbs again (the next burst ramping up) is left alone.
    HeapReturn h(kInterval, fake_hooks());
    run_ticks(h, 1 * kMs, 1'000 * kMs, 20'000);
    std::uint64_t live = 100;
    for (std::int64_t t = 1'000 * kMs; t < 4'000 * kMs; t += 100 * kMs) h.tick(t, live += 10);
    EXPECT_EQ(h.trims(), 0u);
  }
}

TEST(HeapReturn, PeriodicTrimsThatReturnLittleBackOffAndOneThatReturnsMoreResets) {
  HeapReturn h(kInterval, fake_hooks());
  // Nothing to return: the period doubles after each trim, up to kMaxBackoff intervals.
  std::int64_t t = 1 * kMs;
  h.tick(t, 100);  // the clock starts at the first tick
  std::int64_t expected_period = kInterval;
  for (int i = 0; i < 8; ++i) {
    const std::uint64_t before = h.trims();
    t += h.period_ns();
    run_ticks(h, t, t + 100 * kMs, 100);
    ASSERT_EQ(h.trims(), before + 1) << "periodic trim " << i;
    expected_period = std::min(expected_period * 2, kInterval * HeapReturn::kMaxBackoff);
    EXPECT_EQ(h.period_ns(), expected_period);
    t += 100 * kMs;
  }
  EXPECT_EQ(h.period_ns(), kInterval * HeapReturn::kMaxBackoff);
  // Freed memory (a cache emptied): the next trim returns it, and the period is back.
  g_returnable = 10 << 20;
  t += h.period_ns();
  run_ticks(h, t, t + 100 * kMs, 100);
  EXPECT_EQ(g_rss, 90 << 20);
  EXPECT_EQ(h.period_ns(), kInterval);
}

TEST(HeapReturn, ZeroIntervalDisablesEverything) {
  HeapReturn h(0, fake_hooks());
  run_ticks(h, 1 * kMs, 1'000 * kMs, 20'000);
  EXPECT_EQ(run_ticks(h, 1'000 * kMs, 30'000 * kMs, 0), 0u);
}

}  // namespace
