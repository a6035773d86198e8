// RunnextSlot (runtime/src/sched/runnext_slot.hpp), a worker's runnext, tested directly with fake
// Fiber pointers (it never dereferences them): the owner's exchange hands back what the slot held,
// take() empties it, a one-worker slot is plain, and a stress test: the owner exchanging in a
// tight loop (its plain path, where membarrier is available) while thief threads take; every item
// comes out exactly once.
#include "sched/runnext_slot.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "../test_util.hpp"
#include "fake_fibers.hpp"

namespace {

using weft::detail::Fiber;
using weft::detail::RunnextSlot;
using weft_internal_test::ExactlyOnce;
using weft_internal_test::FakeFibers;

TEST(RunnextSlot, OwnerExchangeReturnsWhatItHeldAndTakeEmptiesIt) {
  const bool asymmetric = RunnextSlot::enable_asymmetric();
  RecordProperty("asymmetric", asymmetric ? "yes" : "no");
  RunnextSlot s;
  FakeFibers f(3);
  EXPECT_EQ(s.peek(), nullptr);
  EXPECT_EQ(s.owner_exchange(f[0], false), nullptr);
  EXPECT_EQ(s.owner_exchange(f[1], false), f[0]);
  EXPECT_EQ(s.peek(), f[1]);
  EXPECT_EQ(s.take(), f[1]);
  EXPECT_EQ(s.take(), nullptr);
  EXPECT_EQ(s.owner_exchange(f[2], true), nullptr);  // a one-worker runtime's plain path
  EXPECT_EQ(s.owner_exchange(nullptr, true), f[2]);
  EXPECT_EQ(s.peek(), nullptr);
  EXPECT_EQ(s.owner_exchange(f[0], false), nullptr);
  EXPECT_EQ(s.take_quiescent(), f[0]);  // shutdown's, with the workers joined
  EXPECT_EQ(s.take_quiescent(), nullptr);
}

TEST(RunnextSlot, StressOwnerExchangesWhileThievesTakeEveryItemExactlyOnce) {
  RunnextSlot::enable_asymmetric();
  const std::size_t kItems = static_cast<std::size_t>(weft_test::scaled(2000000));
  constexpr int kThieves = 2;
  FakeFibers f(kItems);
  ExactlyOnce tally(f);
  RunnextSlot s;
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> taken{0};
  std::vector<std::thread> thieves;
  for (int t = 0; t < kThieves; ++t) {
    thieves.emplace_back([&] {
      while (!done.load(std::memory_order_acquire)) {
        if (!s.peek()) continue;
        if (Fiber* x = s.take()) {
          tally.mark(x);
          taken.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  std::uint64_t owner_got = 0;
  for (std::size_t i = 0; i < kItems; ++i) {
    // Every other exchange empties the slot (a pick), as the scheduler alternates wake and pick.
    if (Fiber* old = s.owner_exchange(f[i], false)) {
      tally.mark(old);
      ++owner_got;
    }
    if (i % 2 == 1) {
      if (Fiber* old = s.owner_exchange(nullptr, false)) {
        tally.mark(old);
        ++owner_got;
      }
    }
  }
  if (Fiber* old = s.owner_exchange(nullptr, false)) {
    tally.mark(old);
    ++owner_got;
  }
  done.store(true, std::memory_order_release);
  for (auto& t : thieves) t.join();
  EXPECT_EQ(tally.foreign(), 0u);
  EXPECT_EQ(owner_got + taken.load(), kItems);
  EXPECT_EQ(tally.failure(), "");
  RecordProperty("taken", std::to_string(taken.load()));
}

}  // namespace
