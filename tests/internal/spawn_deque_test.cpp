// SpawnDeque (runtime/src/sched/spawn_deque.hpp), a worker's bounded Chase-Lev deque of
// not-yet-started fibers, tested directly with fake Fiber pointers (it never dereferences them):
// the owner takes newest first, thieves steal oldest first, the last item goes to exactly one of
// them, a full deque refuses push (it is bounded; it never grows), indices keep working far past
// the capacity, a batch steal takes at most half of what is queued (oldest first, at least one,
// at most its limit), and stress tests: the owner pushing and taking while thief threads steal one
// at a time or in batches (the owner's takes near the top racing batches in flight); every item is
// seen exactly once.
#include "sched/spawn_deque.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "../test_util.hpp"
#include "fake_fibers.hpp"

namespace {

using weft::detail::Fiber;
using weft::detail::SpawnDeque;
using weft_internal_test::ExactlyOnce;
using weft_internal_test::FakeFibers;
constexpr std::int64_t kCap = SpawnDeque::kCapacity;

// A thief's single steal (what a batch of at most one is).
Fiber* steal(SpawnDeque& d) {
  Fiber* f = nullptr;
  return d.steal_batch(&f, 1) ? f : nullptr;
}

TEST(SpawnDeque, EmptyDequeGivesNull) {
  SpawnDeque d;
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.take(), nullptr);
  EXPECT_EQ(steal(d), nullptr);
  EXPECT_TRUE(d.empty());  // a failed take() restores bottom
}

TEST(SpawnDeque, OwnerTakesNewestFirstThievesStealOldestFirst) {
  SpawnDeque d;
  FakeFibers f(6);
  for (std::size_t i = 0; i < 6; ++i) ASSERT_TRUE(d.push(f[i]));
  EXPECT_FALSE(d.empty());
  EXPECT_EQ(d.take(), f[5]);
  EXPECT_EQ(steal(d), f[0]);
  EXPECT_EQ(d.take(), f[4]);
  EXPECT_EQ(steal(d), f[1]);
  EXPECT_EQ(steal(d), f[2]);
  EXPECT_EQ(d.take(), f[3]);  // the last one, via the CAS path
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.take(), nullptr);
  EXPECT_EQ(steal(d), nullptr);
}

TEST(SpawnDeque, FullDequeRefusesPushAndNeverGrows) {
  SpawnDeque d;
  FakeFibers f(static_cast<std::size_t>(kCap) + 1);
  for (std::int64_t i = 0; i < kCap; ++i) ASSERT_TRUE(d.push(f[static_cast<std::size_t>(i)]));
  EXPECT_FALSE(d.push(f[static_cast<std::size_t>(kCap)]));
  EXPECT_FALSE(d.push(f[static_cast<std::size_t>(kCap)]));
  EXPECT_EQ(steal(d), f[0]);  // room for one again
  EXPECT_TRUE(d.push(f[static_cast<std::size_t>(kCap)]));
  EXPECT_FALSE(d.push(f[0]));
  EXPECT_EQ(d.take(), f[static_cast<std::size_t>(kCap)]);
  for (std::int64_t i = kCap - 1; i >= 1; --i) ASSERT_EQ(d.take(), f[static_cast<std::size_t>(i)]);
  EXPECT_TRUE(d.empty());
}

TEST(SpawnDeque, IndicesKeepWorkingFarPastTheCapacity) {
  SpawnDeque d;
  FakeFibers f(64);
  // top and bottom move forward by steals: thousands of ring wrap-arounds.
  for (int round = 0; round < 20000; ++round) {
    for (std::size_t i = 0; i < 3; ++i) ASSERT_TRUE(d.push(f[(round + i) % 64]));
    ASSERT_EQ(steal(d), f[round % 64]);
    ASSERT_EQ(d.take(), f[(round + 2) % 64]);
    ASSERT_EQ(steal(d), f[(round + 1) % 64]);
    ASSERT_TRUE(d.empty());
  }
}

TEST(SpawnDeque, ABatchStealTakesAtMostHalfOldestFirstAndAtLeastOne) {
  SpawnDeque d;
  FakeFibers f(12);
  for (std::size_t i = 0; i < 12; ++i) ASSERT_TRUE(d.push(f[i]));
  Fiber* out[SpawnDeque::kMaxStealBatch];
  ASSERT_EQ(d.steal_batch(out, SpawnDeque::kMaxStealBatch), 6u);  // half of 12
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(out[i], f[i]) << i;
  ASSERT_EQ(d.steal_batch(out, 2), 2u);  // the limit
  EXPECT_EQ(out[0], f[6]);
  EXPECT_EQ(out[1], f[7]);
  EXPECT_EQ(d.take(), f[11]);  // the owner still takes newest first
  ASSERT_EQ(d.steal_batch(out, SpawnDeque::kMaxStealBatch), 1u);  // half of 3
  EXPECT_EQ(out[0], f[8]);
  ASSERT_EQ(d.steal_batch(out, SpawnDeque::kMaxStealBatch), 1u);  // at least one
  EXPECT_EQ(out[0], f[9]);
  EXPECT_EQ(d.take(), f[10]);
  EXPECT_EQ(d.steal_batch(out, SpawnDeque::kMaxStealBatch), 0u);
  EXPECT_TRUE(d.empty());
}

TEST(SpawnDeque, ABatchStealStopsAtTheLimitOldestFirst) {
  SpawnDeque d;
  constexpr auto kLimit = static_cast<std::size_t>(SpawnDeque::kMaxStealBatch);
  constexpr std::size_t kN = 3 * kLimit;  // half of what the thief sees is more than the limit
  FakeFibers f(kN);
  for (std::size_t i = 0; i < kN; ++i) ASSERT_TRUE(d.push(f[i]));
  Fiber* out[SpawnDeque::kMaxStealBatch];
  ASSERT_EQ(d.steal_batch(out, kLimit), kLimit);
  for (std::size_t i = 0; i < kLimit; ++i) EXPECT_EQ(out[i], f[i]) << i;
  EXPECT_EQ(d.take(), f[kN - 1]);
  EXPECT_EQ(d.size(), static_cast<std::int64_t>(kN - kLimit - 1));
}

// The owner pushes every item (a full deque: the owner keeps that item itself, as the spawner
// hands it to the global queue) and takes some; thieves steal. Each item exactly once.
TEST(SpawnDeque, StressOwnerAndThievesSeeEveryItemExactlyOnce) {
  const std::size_t kItems = static_cast<std::size_t>(weft_test::scaled(400000));
  constexpr int kThieves = 3;
  FakeFibers f(kItems);
  ExactlyOnce tally(f);
  auto mark = [&](Fiber* x) { tally.mark(x); };
  SpawnDeque d;
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> stolen{0};
  std::vector<std::thread> thieves;
  for (int t = 0; t < kThieves; ++t) {
    thieves.emplace_back([&] {
      for (;;) {
        const bool finished = done.load(std::memory_order_acquire);
        if (Fiber* x = steal(d)) {
          mark(x);
          stolen.fetch_add(1, std::memory_order_relaxed);
        } else if (finished) {
          return;
        }
      }
    });
  }
  std::uint64_t owner_taken = 0;
  for (std::size_t i = 0; i < kItems; ++i) {
    if (!d.push(f[i])) {
      mark(f[i]);
      ++owner_taken;
    }
    if (i % 3 == 2) {
      if (Fiber* x = d.take()) {
        mark(x);
        ++owner_taken;
      }
    }
  }
  while (!d.empty()) {
    if (Fiber* x = d.take()) {
      mark(x);
      ++owner_taken;
    }
  }
  done.store(true, std::memory_order_release);
  for (auto& t : thieves) t.join();
  EXPECT_EQ(tally.foreign(), 0u);
  EXPECT_EQ(d.take(), nullptr);
  EXPECT_EQ(owner_taken + stolen.load(), kItems);
  EXPECT_EQ(tally.failure(), "");
  RecordProperty("stolen", std::to_string(stolen.load()));
}

// The last item raced by the owner's take() and one thief, many times: exactly one gets it.
TEST(SpawnDeque, LastItemGoesToExactlyOneOfOwnerAndThief) {
  // Each round is a hand-off between two threads through yield(): slow beside CPU hogs, so the
  // sanitizer builds race fewer rounds.
  const int kRounds = static_cast<int>(weft_test::scaled(50000, 250));
  SpawnDeque d;
  FakeFibers f(1);
  std::atomic<int> round_go{-1};
  std::atomic<int> thief_done{-1};
  std::atomic<int> thief_got{0};
  std::thread thief([&] {
    for (int r = 0; r < kRounds; ++r) {
      while (round_go.load(std::memory_order_acquire) < r) std::this_thread::yield();
      if (steal(d) == f[0]) thief_got.fetch_add(1, std::memory_order_relaxed);
      thief_done.store(r, std::memory_order_release);
    }
  });
  int owner_got = 0;
  for (int r = 0; r < kRounds; ++r) {
    ASSERT_TRUE(d.push(f[0]));
    round_go.store(r, std::memory_order_release);
    if (d.take() == f[0]) ++owner_got;
    while (thief_done.load(std::memory_order_acquire) < r) std::this_thread::yield();
    EXPECT_TRUE(d.empty()) << r;
  }
  thief.join();
  EXPECT_EQ(owner_got + thief_got.load(), kRounds);
  RecordProperty("thief_got", std::to_string(thief_got.load()));
}

// Batch thieves against an owner that keeps the deque short, so that most of its takes happen
// within kMaxStealBatch of the top while a batch may be in flight (the owner must then take the
// oldest by CAS); every item exactly once.
TEST(SpawnDeque, StressBatchThievesAndAnOwnerNearTheTopSeeEveryItemExactlyOnce) {
  const std::size_t kItems = static_cast<std::size_t>(weft_test::scaled(400000));
  constexpr int kThieves = 3;
  FakeFibers f(kItems);
  ExactlyOnce tally(f);
  SpawnDeque d;
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> stolen{0};
  std::vector<std::thread> thieves;
  for (int t = 0; t < kThieves; ++t) {
    thieves.emplace_back([&, t] {
      Fiber* out[SpawnDeque::kMaxStealBatch];
      // Thief 0 steals one at a time, the others in batches of every size up to the limit.
      std::size_t max = 1;
      for (;;) {
        const bool finished = done.load(std::memory_order_acquire);
        if (t != 0) max = max % SpawnDeque::kMaxStealBatch + 1;
        const std::size_t n = d.steal_batch(out, max);
        for (std::size_t i = 0; i < n; ++i) tally.mark(out[i]);
        stolen.fetch_add(n, std::memory_order_relaxed);
        if (n == 0 && finished) return;
      }
    });
  }
  constexpr auto kRun = static_cast<std::size_t>(2 * SpawnDeque::kMaxStealBatch + 23);
  static_assert(kRun < static_cast<std::size_t>(SpawnDeque::kCapacity), "a run fits the deque");
  std::uint64_t owner_taken = 0;
  for (std::size_t i = 0; i < kItems; ++i) {
    if (!d.push(f[i])) {
      tally.mark(f[i]);
      ++owner_taken;
    }
    // Runs of kRun pushes with a take after every fifth, then takes down to 0-2 left: the deque
    // grows to about 4/5 of kRun, so the owner takes on both sides of kMaxStealBatch, and
    // thieves see enough for whole batches.
    if (i % kRun == kRun - 1 || i % 5 == 4) {
      const std::int64_t keep =
          i % kRun == kRun - 1 ? static_cast<std::int64_t>(i % 3) : d.size() - 1;
      // (A null take lost a race near the top: a thief has that one.)
      while (d.size() > keep) {
        Fiber* x = d.take();
        if (!x) break;
        tally.mark(x);
        ++owner_taken;
      }
    }
  }
  while (Fiber* x = d.take()) {  // the thieves drain whatever a lost race leaves
    tally.mark(x);
    ++owner_taken;
  }
  done.store(true, std::memory_order_release);
  for (auto& t : thieves) t.join();
  EXPECT_EQ(tally.foreign(), 0u);
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(owner_taken + stolen.load(), kItems);
  EXPECT_EQ(tally.failure(), "");
  RecordProperty("stolen", std::to_string(stolen.load()));
}

}  // namespace
