// RunQueue (runtime/src/sched/run_queue.hpp), a worker's bounded single-producer multi-consumer
// ring, tested directly with fake Fiber pointers (it never dereferences them): FIFO order across
// wrap-around, pop_unshared, the full queue refusing push, steal_into taking the larger half (1 of
// 1, 2 of 3) and handing back one of them, and a stress test: one owner pushing and popping
// (popping whenever the ring is full) while thief threads steal into their own queues; every item
// is seen exactly once.
#include "sched/run_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "../test_util.hpp"
#include "fake_fibers.hpp"

namespace {

using weft::detail::Fiber;
using weft::detail::RunQueue;
using weft_internal_test::ExactlyOnce;
using weft_internal_test::FakeFibers;
constexpr std::uint32_t kCap = RunQueue::kCapacity;

TEST(RunQueue, EmptyQueuePopsNull) {
  RunQueue q;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_EQ(q.pop_unshared(), nullptr);
  RunQueue dst;
  EXPECT_EQ(q.steal_into(dst), nullptr);
  EXPECT_TRUE(dst.empty());
}

TEST(RunQueue, FifoAcrossManyWrapArounds) {
  RunQueue q;
  FakeFibers f(10 * kCap + 7);
  std::size_t next_pop = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    ASSERT_TRUE(q.push(f[i]));
    if (q.size() > 7 + i % 3) {  // keep a few in flight: head and tail wrap at different times
      ASSERT_EQ(q.pop(), f[next_pop]) << i;
      ++next_pop;
    }
  }
  while (Fiber* x = q.pop()) {
    ASSERT_EQ(x, f[next_pop]);
    ++next_pop;
  }
  EXPECT_EQ(next_pop, f.size());
  EXPECT_TRUE(q.empty());
}

TEST(RunQueue, PopUnsharedIsFifoToo) {
  RunQueue q;
  FakeFibers f(3 * kCap);
  std::size_t next_pop = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    ASSERT_TRUE(q.push(f[i]));
    if (q.size() > 5) {
      ASSERT_EQ(q.pop_unshared(), f[next_pop++]);
    }
  }
  while (Fiber* x = (next_pop % 2 ? q.pop() : q.pop_unshared())) ASSERT_EQ(x, f[next_pop++]);
  EXPECT_EQ(next_pop, f.size());
}

TEST(RunQueue, FullQueueRefusesPushUntilOneIsTaken) {
  RunQueue q;
  FakeFibers f(kCap + 1);
  for (std::uint32_t i = 0; i < kCap; ++i) ASSERT_TRUE(q.push(f[i]));
  EXPECT_EQ(q.size(), kCap);
  EXPECT_FALSE(q.push(f[kCap]));
  EXPECT_EQ(q.size(), kCap);
  EXPECT_EQ(q.pop(), f[0]);
  EXPECT_TRUE(q.push(f[kCap]));
  EXPECT_FALSE(q.push(f[kCap]));
  for (std::uint32_t i = 1; i <= kCap; ++i) ASSERT_EQ(q.pop(), f[i]);
  EXPECT_TRUE(q.empty());
}

TEST(RunQueue, StealIntoTakesTheLargerHalfAndReturnsOne) {
  FakeFibers f(8);
  {  // 1 of 1: returned directly, nothing left in dst
    RunQueue q, dst;
    ASSERT_TRUE(q.push(f[0]));
    EXPECT_EQ(q.steal_into(dst), f[0]);
    EXPECT_TRUE(q.empty());
    EXPECT_TRUE(dst.empty());
  }
  {  // 2 of 3: the oldest two; one returned, the other in dst; the newest stays
    RunQueue q, dst;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.push(f[i]));
    Fiber* got = q.steal_into(dst);
    ASSERT_EQ(dst.size(), 1u);
    Fiber* in_dst = dst.pop();
    EXPECT_TRUE((got == f[0] && in_dst == f[1]) || (got == f[1] && in_dst == f[0]));
    EXPECT_EQ(q.size(), 1u);
    EXPECT_EQ(q.pop(), f[2]);
  }
  {  // 4 of 8
    RunQueue q, dst;
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(q.push(f[i]));
    Fiber* got = q.steal_into(dst);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(dst.size(), 3u);
    EXPECT_EQ(q.size(), 4u);
    std::vector<bool> seen(8);
    seen[f.index(got)] = true;
    while (Fiber* x = dst.pop()) seen[f.index(x)] = true;
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(seen[static_cast<std::size_t>(i)]) << i;
    for (int i = 4; i < 8; ++i) EXPECT_EQ(q.pop(), f[static_cast<std::size_t>(i)]);
  }
}

TEST(RunQueue, StealIntoAfterWrapAround) {
  RunQueue q, dst;
  FakeFibers f(kCap + 100);
  // Move head and tail of both queues near the end of the ring first.
  for (std::uint32_t i = 0; i < kCap - 5; ++i) {
    ASSERT_TRUE(q.push(f[i]));
    ASSERT_EQ(q.pop(), f[i]);
    ASSERT_TRUE(dst.push(f[i]));
    ASSERT_EQ(dst.pop(), f[i]);
  }
  for (std::uint32_t i = 0; i < 20; ++i) ASSERT_TRUE(q.push(f[kCap + i]));
  Fiber* got = q.steal_into(dst);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(dst.size(), 9u);
  std::vector<int> count(f.size());
  ++count[f.index(got)];
  while (Fiber* x = dst.pop()) ++count[f.index(x)];
  while (Fiber* x = q.pop()) ++count[f.index(x)];
  for (std::uint32_t i = 0; i < 20; ++i) EXPECT_EQ(count[kCap + i], 1) << i;
}

// The owner pushes every item (taking half out when full, as a worker hands half to the global
// queue), pops some; thieves steal into their own queues and drain them. Each item exactly once.
TEST(RunQueue, StressOwnerAndThievesSeeEveryItemExactlyOnce) {
  const std::size_t kItems = static_cast<std::size_t>(weft_test::scaled(400000));
  constexpr int kThieves = 3;
  FakeFibers f(kItems);
  ExactlyOnce tally(f);
  auto mark = [&](Fiber* x) { tally.mark(x); };
  RunQueue victim;
  std::atomic<bool> done{false};
  std::vector<std::thread> thieves;
  std::atomic<std::uint64_t> stolen{0};
  for (int t = 0; t < kThieves; ++t) {
    thieves.emplace_back([&] {
      RunQueue mine;
      for (;;) {
        const bool finished = done.load(std::memory_order_acquire);
        Fiber* x = victim.steal_into(mine);
        if (x) {
          mark(x);
          stolen.fetch_add(1, std::memory_order_relaxed);
          while (Fiber* y = mine.pop()) {
            mark(y);
            stolen.fetch_add(1, std::memory_order_relaxed);
          }
        } else if (finished) {
          return;  // the owner emptied the queue before setting done
        }
      }
    });
  }
  std::uint64_t owner_taken = 0;
  for (std::size_t i = 0; i < kItems; ++i) {
    while (!victim.push(f[i])) {
      if (Fiber* x = victim.pop()) {
        mark(x);
        ++owner_taken;
      }
    }
    if (i % 4 == 3) {
      if (Fiber* x = victim.pop()) {
        mark(x);
        ++owner_taken;
      }
    }
  }
  while (Fiber* x = victim.pop()) {
    mark(x);
    ++owner_taken;
  }
  done.store(true, std::memory_order_release);
  for (auto& t : thieves) t.join();
  EXPECT_EQ(tally.foreign(), 0u);
  EXPECT_TRUE(victim.empty());
  EXPECT_EQ(owner_taken + stolen.load(), kItems);
  EXPECT_EQ(tally.failure(), "");
  RecordProperty("stolen", std::to_string(stolen.load()));
}

}  // namespace
