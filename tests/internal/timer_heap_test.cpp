// TimerHeap (runtime/src/sched/timers.hpp), the runtime's one-shot timer heap, tested directly
// without a runtime: add() says when a timer became the earliest, earliest() mirrors the top
// deadline (kNever when empty), run_due() fires exactly the due timers in deadline order and
// leaves the rest, cancel() of a pending timer returns true and it never fires, cancel() of a
// fired one returns false, cancel() of a timer whose callback is running waits until it returned,
// fired and cancelled records can be added again, the destructor disarms what is left, and
// run_due() from several threads with distinct slots fires each timer exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "../test_util.hpp"
#include "sched/timers.hpp"

namespace {

using weft::detail::TimerEntry;
using weft::detail::TimerHeap;
constexpr std::int64_t kNever = TimerHeap::kNever;

// A TimerEntry with what its callback records; the TimerEntry is the first member (standard
// layout), so the callback finds its record from the TimerEntry*.
struct Rec {
  TimerEntry timer;
  int id = 0;
  std::atomic<int> fired{0};
  std::vector<int>* order = nullptr;  // single-threaded tests: firing order
  static void fire(TimerEntry* t) {
    auto* r = reinterpret_cast<Rec*>(t);
    r->fired.fetch_add(1, std::memory_order_relaxed);
    if (r->order) r->order->push_back(r->id);
  }
  Rec() { timer.fire = &Rec::fire; }
  void at(std::int64_t when) { timer.when_ns = when; }
};
static_assert(std::is_standard_layout_v<Rec>);

TEST(TimerHeap, EmptyHeap) {
  TimerHeap h(1);
  EXPECT_EQ(h.size(), 0u);
  EXPECT_EQ(h.earliest(), kNever);
  EXPECT_EQ(h.earliest_seq_cst(), kNever);
  EXPECT_EQ(h.run_due(kNever - 1, 0), 0u);
}

TEST(TimerHeap, AddReportsANewEarliestAndEarliestMirrorsTheTop) {
  TimerHeap h(1);
  Rec a, b, c;
  a.at(100);
  b.at(200);
  c.at(50);
  EXPECT_TRUE(h.add(&a.timer));
  EXPECT_EQ(h.earliest(), 100);
  EXPECT_FALSE(h.add(&b.timer));
  EXPECT_EQ(h.earliest(), 100);
  EXPECT_TRUE(h.add(&c.timer));
  EXPECT_EQ(h.earliest(), 50);
  EXPECT_EQ(h.size(), 3u);
  EXPECT_GE(a.timer.heap_index, 0);
  EXPECT_TRUE(h.cancel(&c.timer));  // removing the top republishes earliest
  EXPECT_EQ(h.earliest(), 100);
  EXPECT_EQ(c.timer.heap_index, -1);
  EXPECT_TRUE(h.cancel(&a.timer));
  EXPECT_TRUE(h.cancel(&b.timer));
  EXPECT_EQ(h.earliest(), kNever);
  EXPECT_EQ(h.size(), 0u);
}

TEST(TimerHeap, RunDueFiresOnlyDueTimersInDeadlineOrder) {
  constexpr int kN = 500;
  TimerHeap h(1);
  std::vector<Rec> recs(kN);
  std::vector<int> order;
  std::vector<int> when(kN);
  for (int i = 0; i < kN; ++i) when[static_cast<std::size_t>(i)] = (i * 7919) % 1000 + 1;
  for (int i = 0; i < kN; ++i) {
    Rec& r = recs[static_cast<std::size_t>(i)];
    r.id = i;
    r.order = &order;
    r.at(when[static_cast<std::size_t>(i)]);
    h.add(&r.timer);
  }
  const std::int64_t expect_earliest = *std::min_element(when.begin(), when.end());
  EXPECT_EQ(h.earliest(), expect_earliest);
  const auto due = static_cast<std::uint64_t>(
      std::count_if(when.begin(), when.end(), [](int w) { return w <= 400; }));
  EXPECT_EQ(h.run_due(400, 0), due);
  EXPECT_EQ(order.size(), due);
  for (std::size_t k = 1; k < order.size(); ++k) {
    ASSERT_LE(when[static_cast<std::size_t>(order[k - 1])],
              when[static_cast<std::size_t>(order[k])])
        << "fired out of deadline order at " << k;
  }
  for (int i = 0; i < kN; ++i) {
    const Rec& r = recs[static_cast<std::size_t>(i)];
    EXPECT_EQ(r.fired.load(), when[static_cast<std::size_t>(i)] <= 400 ? 1 : 0) << i;
    EXPECT_EQ(r.timer.heap_index < 0, when[static_cast<std::size_t>(i)] <= 400) << i;
  }
  EXPECT_GT(h.earliest(), 400);
  EXPECT_EQ(h.size(), kN - due);
  EXPECT_EQ(h.run_due(400, 0), 0u);  // nothing due twice
  EXPECT_EQ(h.run_due(1000, 0), kN - due);
  EXPECT_EQ(h.earliest(), kNever);
  for (const Rec& r : recs) EXPECT_EQ(r.fired.load(), 1) << r.id;
}

TEST(TimerHeap, CancelPendingNeverFiresCancelFiredReturnsFalse) {
  TimerHeap h(1);
  Rec pending, fired, later;
  pending.at(10);
  fired.at(5);
  later.at(30);
  h.add(&pending.timer);
  h.add(&fired.timer);
  h.add(&later.timer);
  EXPECT_EQ(h.run_due(5, 0), 1u);
  EXPECT_EQ(fired.fired.load(), 1);
  EXPECT_FALSE(h.cancel(&fired.timer)) << "already fired";
  EXPECT_FALSE(h.cancel(&fired.timer));
  EXPECT_TRUE(h.cancel(&pending.timer));
  EXPECT_FALSE(h.cancel(&pending.timer)) << "a second cancel finds it unarmed";
  EXPECT_EQ(h.earliest(), 30);
  EXPECT_EQ(h.run_due(kNever - 1, 0), 1u);
  EXPECT_EQ(pending.fired.load(), 0);
  EXPECT_EQ(later.fired.load(), 1);
}

TEST(TimerHeap, CancelInTheMiddleKeepsTheHeapOrdered) {
  TimerHeap h(1);
  constexpr int kN = 300;
  std::vector<Rec> recs(kN);
  std::vector<int> order;
  std::mt19937 rng(42);
  for (int i = 0; i < kN; ++i) {
    Rec& r = recs[static_cast<std::size_t>(i)];
    r.id = i;
    r.order = &order;
    r.at(static_cast<std::int64_t>(rng() % 10000));
    h.add(&r.timer);
  }
  int cancelled = 0;
  for (int i = 0; i < kN; i += 3) {
    EXPECT_TRUE(h.cancel(&recs[static_cast<std::size_t>(i)].timer));
    ++cancelled;
  }
  EXPECT_EQ(h.size(), static_cast<std::size_t>(kN - cancelled));
  EXPECT_EQ(h.run_due(kNever - 1, 0), static_cast<std::uint64_t>(kN - cancelled));
  for (std::size_t k = 1; k < order.size(); ++k) {
    ASSERT_LE(recs[static_cast<std::size_t>(order[k - 1])].timer.when_ns,
              recs[static_cast<std::size_t>(order[k])].timer.when_ns);
  }
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(recs[static_cast<std::size_t>(i)].fired.load(), i % 3 == 0 ? 0 : 1) << i;
  }
}

TEST(TimerHeap, FiredAndCancelledRecordsCanBeAddedAgain) {
  TimerHeap h(1);
  Rec r;
  for (int round = 0; round < 5; ++round) {
    r.at(100 + round);
    EXPECT_TRUE(h.add(&r.timer));
    EXPECT_EQ(h.run_due(100 + round, 0), 1u);
    EXPECT_EQ(r.fired.load(), round + 1);
    r.at(200);
    EXPECT_TRUE(h.add(&r.timer));
    EXPECT_TRUE(h.cancel(&r.timer));
    EXPECT_EQ(r.fired.load(), round + 1);
  }
  EXPECT_EQ(h.size(), 0u);
}

TEST(TimerHeap, DestructorDisarmsTimersStillArmed) {
  Rec r;
  r.at(100);
  {
    TimerHeap h(1);
    h.add(&r.timer);
    EXPECT_GE(r.timer.heap_index, 0);
  }
  EXPECT_EQ(r.timer.heap_index, -1);
  EXPECT_EQ(r.fired.load(), 0);
}

// A callback that a timer's owner waits for: cancel() of a timer whose callback is running returns
// false only after the callback returned (so the owner may free the record).
struct SlowRec {
  TimerEntry timer;
  std::atomic<bool> entered{false};
  std::atomic<bool> release{false};
  std::atomic<bool> returned{false};
  static void fire(TimerEntry* t) {
    auto* r = reinterpret_cast<SlowRec*>(t);
    r->entered.store(true);
    while (!r->release.load()) std::this_thread::yield();
    r->returned.store(true);
  }
  SlowRec() { timer.fire = &SlowRec::fire; }
};

TEST(TimerHeap, CancelOfARunningCallbackWaitsForItToReturn) {
  TimerHeap h(2);
  SlowRec r;
  r.timer.when_ns = 1;
  h.add(&r.timer);
  std::thread runner([&] { EXPECT_EQ(h.run_due(1, 1), 1u); });
  while (!r.entered.load()) std::this_thread::yield();
  std::atomic<bool> cancel_returned{false};
  bool cancel_result = true;
  bool returned_when_cancel_returned = false;
  std::thread canceller([&] {
    cancel_result = h.cancel(&r.timer);
    returned_when_cancel_returned = r.returned.load();
    cancel_returned.store(true);
  });
  // No timing assumption: whenever cancel() returns, the callback must have returned before.
  r.release.store(true);
  canceller.join();
  runner.join();
  EXPECT_TRUE(cancel_returned.load());
  EXPECT_FALSE(cancel_result);
  EXPECT_TRUE(returned_when_cancel_returned);
}

// Several threads call run_due() at once, each with its own slot, while timers are added and
// some cancelled: every timer fires exactly once unless its cancel() returned true, in which case
// it never fires; a cancel() that returned false found its callback complete.
TEST(TimerHeap, ConcurrentRunDueFiresEachTimerExactlyOnce) {
  constexpr std::size_t kSlots = 4;
  const std::size_t kTimers = static_cast<std::size_t>(weft_test::scaled(200000));
  TimerHeap h(kSlots);
  struct CRec {
    TimerEntry timer;
    std::atomic<int> fired{0};
    std::atomic<bool> done{false};
    static void fire(TimerEntry* t) {
      auto* r = reinterpret_cast<CRec*>(t);
      r->fired.fetch_add(1, std::memory_order_relaxed);
      r->done.store(true, std::memory_order_release);
    }
  };
  auto recs = std::make_unique<CRec[]>(kTimers);
  std::atomic<std::size_t> added{0};
  std::atomic<std::uint64_t> total_fired{0};
  std::vector<std::thread> runners;
  for (std::size_t s = 0; s < kSlots; ++s) {
    runners.emplace_back([&, s] {
      for (;;) {
        const bool all_added = added.load(std::memory_order_acquire) == kTimers;
        total_fired.fetch_add(h.run_due(kNever - 1, s), std::memory_order_relaxed);
        if (all_added && h.size() == 0) return;
        std::this_thread::yield();
      }
    });
  }
  std::vector<std::uint8_t> cancelled(kTimers);
  std::size_t cancel_true = 0, cancel_false_incomplete = 0;
  for (std::size_t i = 0; i < kTimers; ++i) {
    CRec& r = recs[i];
    r.timer.fire = &CRec::fire;
    r.timer.when_ns = static_cast<std::int64_t>(i % 1000);
    h.add(&r.timer);
    if (i % 5 == 0) {  // cancel an earlier one, which may be pending, firing or fired
      CRec& victim = recs[i / 2];
      if (victim.timer.fire && !cancelled[i / 2]) {
        if (h.cancel(&victim.timer)) {
          cancelled[i / 2] = 1;
          ++cancel_true;
        } else if (!victim.done.load(std::memory_order_acquire)) {
          ++cancel_false_incomplete;
        }
      }
    }
    added.fetch_add(1, std::memory_order_release);
  }
  for (auto& t : runners) t.join();
  EXPECT_EQ(cancel_false_incomplete, 0u) << "cancel() returned before the callback finished";
  EXPECT_EQ(total_fired.load(), kTimers - cancel_true);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kTimers; ++i) {
    if (recs[i].fired.load() != (cancelled[i] ? 0 : 1)) ++wrong;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(h.size(), 0u);
  EXPECT_EQ(h.earliest(), kNever);
  RecordProperty("cancelled_pending", std::to_string(cancel_true));
}

}  // namespace
