// SpawnDeque (runtime/src/sched/spawn_deque.hpp), a worker's bounded Chase-Lev deque of
// not-yet-started fibers, tested directly with fake Fiber pointers (it never dereferences them):
// the owner takes newest first, thieves steal oldest first, the last item goes to exactly one of
// them, a full deque refuses push (it is bounded; it never grows), indices keep working far past
// the capacity, and a stress test: the owner pushing and taking while thief threads steal; every
// item is seen exactly once.
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

TEST(SpawnDeque, EmptyDequeGivesNull) {
  SpawnDeque d;
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.take(), nullptr);
  EXPECT_EQ(d.steal(), nullptr);
  EXPECT_TRUE(d.empty());  // a failed take() restores bottom
}

TEST(SpawnDeque, OwnerTakesNewestFirstThievesStealOldestFirst) {
  SpawnDeque d;
  FakeFibers f(6);
  for (std::size_t i = 0; i < 6; ++i) ASSERT_TRUE(d.push(f[i]));
  EXPECT_FALSE(d.empty());
  EXPECT_EQ(d.take(), f[5]);
  EXPECT_EQ(d.steal(), f[0]);
  EXPECT_EQ(d.take(), f[4]);
  EXPECT_EQ(d.steal(), f[1]);
  EXPECT_EQ(d.steal(), f[2]);
  EXPECT_EQ(d.take(), f[3]);  // the last one, via the CAS path
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.take(), nullptr);
  EXPECT_EQ(d.steal(), nullptr);
}

TEST(SpawnDeque, FullDequeRefusesPushAndNeverGrows) {
  SpawnDeque d;
  FakeFibers f(static_cast<std::size_t>(kCap) + 1);
  for (std::int64_t i = 0; i < kCap; ++i) ASSERT_TRUE(d.push(f[static_cast<std::size_t>(i)]));
  EXPECT_FALSE(d.push(f[static_cast<std::size_t>(kCap)]));
  EXPECT_FALSE(d.push(f[static_cast<std::size_t>(kCap)]));
  EXPECT_EQ(d.steal(), f[0]);  // room for one again
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
    ASSERT_EQ(d.steal(), f[round % 64]);
    ASSERT_EQ(d.take(), f[(round + 2) % 64]);
    ASSERT_EQ(d.steal(), f[(round + 1) % 64]);
    ASSERT_TRUE(d.empty());
  }
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
        if (Fiber* x = d.steal()) {
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
      if (d.steal() == f[0]) thief_got.fetch_add(1, std::memory_order_relaxed);
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

}  // namespace
