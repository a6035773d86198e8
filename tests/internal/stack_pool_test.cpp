// StackPool and StackCache (runtime/src/core/stack_pool.hpp), tested directly without a runtime:
// the stack size rounds up to whole pages (at least two), a stack is writable from its lowest
// byte to its top and the page below it is a guard (touching it kills the process), stacks are
// distinct and do not overlap, reserved_bytes() grows by whole regions, a worker cache is LIFO and
// overflows its older half to the shared pool, drain() moves a cache to the shared pool, acquire()
// refills from it (committed stacks first), trim() releases only shared stacks that stayed unused
// for a whole interval beyond the hot set (their pages read back as zeros), and several threads
// with their own caches never get the same stack at once. Size classes: a request maps to the
// smallest power-of-two class that holds it, or to the default class when that is no larger;
// each class's stacks have its size, their own guard, and go back to their own class.
#include "core/stack_pool.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "../test_util.hpp"

namespace {

using weft::detail::StackCache;
using weft::detail::StackPool;

std::size_t page() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

TEST(StackPool, StackSizeRoundsUpToWholePagesAndAtLeastTwo) {
  const std::size_t p = page();
  EXPECT_EQ(StackPool(1, true).stack_size(), 2 * p);
  EXPECT_EQ(StackPool(2 * p + 1, true).stack_size(), 3 * p);
  EXPECT_EQ(StackPool(16 * p, false).stack_size(), 16 * p);
  StackPool pool(64 << 10, true);
  EXPECT_EQ(pool.page_size(), p);
  EXPECT_TRUE(pool.guard_pages());
  EXPECT_FALSE(StackPool(64 << 10, false).guard_pages());
}

TEST(StackPool, SizeClassesArePowersOfTwoAndTheDefaultServesWhatItFits) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer builds raise every class to 256 KiB";
#else
  StackPool pool(64 << 10, true);
  EXPECT_EQ(pool.class_for(64 << 10), 0u);
  EXPECT_EQ(pool.class_for(40 << 10), 0u) << "the 64 KiB class would be no smaller";
  EXPECT_EQ(pool.class_size(pool.class_for(1)), 8u << 10);
  EXPECT_EQ(pool.class_size(pool.class_for(16 << 10)), 16u << 10);
  EXPECT_EQ(pool.class_size(pool.class_for((16 << 10) + 1)), 32u << 10);
  EXPECT_EQ(pool.class_size(pool.class_for(100 << 10)), 128u << 10);
  EXPECT_EQ(pool.class_size(pool.class_for(StackPool::kMaxClassBytes)), StackPool::kMaxClassBytes);
  EXPECT_THROW(pool.class_for(StackPool::kMaxClassBytes + 1), std::invalid_argument);
  // A default that is not a power of two serves the requests it holds below the next class.
  StackPool odd(100 << 10, true);
  EXPECT_EQ(odd.class_for(90 << 10), 0u);
  EXPECT_EQ(odd.class_size(odd.class_for(120 << 10)), 128u << 10);
  EXPECT_EQ(odd.class_size(odd.class_for(60 << 10)), 64u << 10);
#endif
}

TEST(StackPool, EachClassHandsOutStacksOfItsSizeAndTakesThemBack) {
  StackPool pool(64 << 10, true);
  StackCache cache;
  const unsigned small = pool.class_for(8 << 10);
  const unsigned big = pool.class_for(1 << 20);
  std::vector<std::pair<char*, unsigned>> got;
  for (unsigned cls : {0u, small, big, small, big, 0u}) {
    char* s = pool.acquire(cache, cls);
    std::memset(s, 0xAB, pool.class_size(cls));  // the whole stack is writable
    got.emplace_back(s, cls);
  }
  std::sort(got.begin(), got.end());
  for (std::size_t i = 0; i + 1 < got.size(); ++i) {
    EXPECT_LE(got[i].first + pool.class_size(got[i].second), got[i + 1].first) << "stacks overlap";
  }
  // The caches hold the rest of each class's carved batch; the released stacks go on top.
  const std::size_t small_before = cache.stacks[small].size();
  const std::size_t big_before = cache.stacks[big].size();
  for (auto [s, cls] : got) pool.release(cache, s, cls);
  EXPECT_EQ(cache.stacks[small].size(), small_before + 2);
  EXPECT_EQ(cache.stacks[big].size(), big_before + 2);
  const std::set<char*> smalls(cache.stacks[small].begin(), cache.stacks[small].end());
  EXPECT_EQ(smalls.count(pool.acquire(cache, small)), 1u) << "a class hands back its own stacks";
  pool.drain(cache);
  EXPECT_GE(pool.cached(), 5u);
}

TEST(StackPoolDeathTest, ThePageBelowASmallClassStackIsAGuard) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        StackPool pool(64 << 10, true);
        StackCache cache;
        char* s = pool.acquire(cache, pool.class_for(8 << 10));
        s[-1] = 1;
      },
      "");
}

TEST(StackPool, StacksAreWritableDistinctAndReservedInWholeRegions) {
  for (const bool guard : {true, false}) {
    SCOPED_TRACE(guard ? "guard pages" : "no guard pages");
    StackPool pool(16 << 10, guard);
    StackCache cache;
    EXPECT_EQ(pool.reserved_bytes(), 0u) << "nothing is mapped before the first acquire";
    const std::size_t size = pool.stack_size();
    const std::size_t slot = size + (guard ? pool.page_size() : 0);
    std::vector<char*> stacks;
    for (int i = 0; i < 300; ++i) {
      char* s = pool.acquire(cache, 0);
      ASSERT_NE(s, nullptr);
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(s) % pool.page_size(), 0u);
      std::memset(s, i & 0xff, size);  // the whole stack, lowest byte to top
      stacks.push_back(s);
    }
    // 300 stacks: two regions of 256 slots each.
    EXPECT_EQ(pool.reserved_bytes(), 2 * 256 * slot);
    std::vector<char*> sorted = stacks;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 1; i < sorted.size(); ++i) {
      ASSERT_GE(static_cast<std::size_t>(sorted[i] - sorted[i - 1]), size) << "overlapping stacks";
    }
    for (int i = 0; i < 300; ++i) {
      char* s = stacks[static_cast<std::size_t>(i)];
      ASSERT_EQ(s[0], static_cast<char>(i & 0xff));
      ASSERT_EQ(s[size - 1], static_cast<char>(i & 0xff));
    }
    for (char* s : stacks) pool.release(cache, s, 0);
    pool.drain(cache);
  }
}

TEST(StackPoolDeathTest, ThePageBelowAStackIsAGuard) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        StackPool pool(16 << 10, true);
        StackCache cache;
        char* s = pool.acquire(cache, 0);
        s[0] = 1;                                 // usable
        *static_cast<volatile char*>(s - 1) = 1;  // the guard page
        std::fprintf(stderr, "wrote to the guard page\n");
        std::_Exit(0);
      },
      "");
}

TEST(StackPool, CacheIsLifoAndOverflowsItsOlderHalfToTheSharedPool) {
  StackPool pool(16 << 10, true);
  StackCache cache;
  char* a = pool.acquire(cache, 0);
  pool.release(cache, a, 0);
  EXPECT_EQ(pool.acquire(cache, 0), a) << "the cache hands back the stack it just got";
  pool.release(cache, a, 0);
  pool.drain(cache);

  StackPool fresh(16 << 10, true);
  StackCache c2;
  std::vector<char*> stacks;
  // Whole carved batches, so that c2 ends up empty and holds only what is released below.
  const std::size_t n = StackCache::kMax + StackPool::kRefillBatch;
  for (std::size_t i = 0; i < n; ++i) stacks.push_back(fresh.acquire(c2, 0));
  EXPECT_TRUE(c2.stacks[0].empty());
  EXPECT_EQ(fresh.cached(), 0u);
  for (std::size_t i = 0; i < StackCache::kMax; ++i) fresh.release(c2, stacks[i], 0);
  EXPECT_EQ(c2.stacks[0].size(), StackCache::kMax);
  EXPECT_EQ(fresh.cached(), 0u);
  fresh.release(c2, stacks[StackCache::kMax], 0);  // overflow: the older half goes to the pool
  EXPECT_EQ(fresh.cached(), StackCache::kMax / 2);
  EXPECT_EQ(c2.stacks[0].size(), StackCache::kMax / 2 + 1);
  EXPECT_EQ(c2.stacks[0].back(), stacks[StackCache::kMax]);
  EXPECT_EQ(c2.stacks[0].front(), stacks[StackCache::kMax / 2]) << "the newest half stays";
  for (std::size_t i = StackCache::kMax + 1; i < n; ++i) fresh.release(c2, stacks[i], 0);
  fresh.drain(c2);
  EXPECT_TRUE(c2.stacks[0].empty());
  EXPECT_EQ(fresh.cached(), n);
}

// Fresh slots come a batch at a time too: one lock round trip carves kRefillBatch of them.
TEST(StackPool, AnEmptyPoolCarvesFreshStacksInABatch) {
  StackPool pool(16 << 10, true);
  StackCache c;
  char* first = pool.acquire(c, 0);
  ASSERT_EQ(c.stacks[0].size(), StackPool::kRefillBatch - 1);
  const std::size_t slot = pool.stack_size() + pool.page_size();
  // The cache hands them out lowest first, one slot apart, each above its own guard page.
  for (std::size_t i = 1; i < StackPool::kRefillBatch; ++i) {
    char* s = pool.acquire(c, 0);
    EXPECT_EQ(s, first + i * slot);
    std::memset(s, 0x11, pool.stack_size());
  }
  EXPECT_TRUE(c.stacks[0].empty());
  EXPECT_EQ(pool.reserved_bytes(), 256 * slot);
}

// Threads carving fresh stacks at once (their guards installed outside the lock) get disjoint
// stacks, each whole and writable.
TEST(StackPool, ThreadsCarvingAtOnceGetDisjointWritableStacks) {
  constexpr int kThreads = 4;
  constexpr std::size_t kEach = 600;  // several regions' worth between them
  StackPool pool(16 << 10, true);
  std::vector<std::vector<char*>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      StackCache cache;
      for (std::size_t i = 0; i < kEach; ++i) {
        char* s = pool.acquire(cache, 0);
        s[0] = static_cast<char>(t + 1);
        s[pool.stack_size() - 1] = static_cast<char>(t + 1);
        got[static_cast<std::size_t>(t)].push_back(s);
      }
      pool.drain(cache);  // the batch's unused rest; the stacks in `got` stay held
    });
  }
  for (auto& th : threads) th.join();
  std::vector<std::pair<char*, int>> all;
  for (int t = 0; t < kThreads; ++t) {
    for (char* s : got[static_cast<std::size_t>(t)]) all.emplace_back(s, t);
  }
  std::sort(all.begin(), all.end());
  for (std::size_t i = 0; i < all.size(); ++i) {
    const char mark = static_cast<char>(all[i].second + 1);
    EXPECT_EQ(all[i].first[0], mark);
    EXPECT_EQ(all[i].first[pool.stack_size() - 1], mark);
    if (i + 1 < all.size()) {
      ASSERT_GE(static_cast<std::size_t>(all[i + 1].first - all[i].first),
                pool.stack_size() + pool.page_size())
          << "overlapping stacks";
    }
  }
  StackCache c;
  for (auto [s, t] : all) pool.release(c, s, 0);
  pool.drain(c);
}

TEST(StackPool, AcquireRefillsAnEmptyCacheFromTheSharedPoolInABatch) {
  StackPool pool(16 << 10, false);
  StackCache c;
  std::vector<char*> stacks;
  constexpr std::size_t kStacks = 3 * StackPool::kRefillBatch;  // whole carved batches
  for (std::size_t i = 0; i < kStacks; ++i) stacks.push_back(pool.acquire(c, 0));
  const std::uint64_t reserved = pool.reserved_bytes();
  for (char* s : stacks) pool.release(c, s, 0);
  pool.drain(c);
  EXPECT_EQ(pool.cached(), kStacks);
  StackCache other;
  std::set<char*> got;
  got.insert(pool.acquire(other, 0));
  const std::size_t batch = kStacks - pool.cached();
  EXPECT_EQ(batch, StackPool::kRefillBatch) << "one lock round trip brings a batch";
  EXPECT_EQ(other.stacks[0].size(), batch - 1);
  for (std::size_t i = 1; i < kStacks; ++i) got.insert(pool.acquire(other, 0));
  EXPECT_EQ(got, std::set<char*>(stacks.begin(), stacks.end())) << "reuses before carving";
  EXPECT_EQ(pool.cached(), 0u);
  EXPECT_EQ(pool.reserved_bytes(), reserved);
  for (char* s : got) pool.release(other, s, 0);
  pool.drain(other);
}

TEST(StackPool, TrimReleasesOnlyStacksIdleForAWholeIntervalBeyondAHotSetThatDecays) {
  constexpr std::size_t kStacks = 19 * StackPool::kRefillBatch;  // whole carved batches: 304
  constexpr std::size_t kHot = 256;    // kSharedHotStacks in stack_pool.cpp
  constexpr std::size_t kHotMin = 16;  // kSharedHotStacksMin
  StackPool pool(16 << 10, true);
  StackCache c;
  std::vector<char*> stacks;
  for (std::size_t i = 0; i < kStacks; ++i) {
    char* s = pool.acquire(c, 0);
    std::memset(s, 0x5a, pool.stack_size());
    stacks.push_back(s);
  }
  for (char* s : stacks) pool.release(c, s, 0);
  pool.drain(c);
  ASSERT_EQ(pool.cached(), kStacks);
  // Stacks whose whole memory was released (read back as zeros), and those that kept only their
  // top page (the hot set once it has sat unused at its floor).
  auto zeroed = [&] {
    std::size_t n = 0;
    for (char* s : stacks) {  // pool-owned memory, still mapped: peek at it
      n += s[0] == 0 && s[pool.stack_size() - 1] == 0;
    }
    return n;
  };
  auto top_only = [&] {
    std::size_t n = 0;
    for (char* s : stacks) {
      n += s[0] == 0 && s[pool.stack_size() - pool.page_size() - 1] == 0 &&
           s[pool.stack_size() - pool.page_size()] != 0 && s[pool.stack_size() - 1] != 0;
    }
    return n;
  };
  pool.trim();  // the first interval starts now: nothing was idle for a whole one yet
  EXPECT_EQ(zeroed(), 0u);
  // One batch taken and given back during the interval: the low-water mark is kStacks - batch.
  StackCache other;
  char* s = pool.acquire(other, 0);
  const std::size_t batch = kStacks - pool.cached();
  pool.release(other, s, 0);
  pool.drain(other);
  ASSERT_EQ(pool.cached(), kStacks);
  pool.trim();
  EXPECT_EQ(zeroed(), kStacks - batch - kHot);
  EXPECT_EQ(pool.cached(), kStacks) << "trimmed stacks stay in the pool";
  // Every further interval with surplus halves the hot set, down to its minimum.
  pool.trim();
  EXPECT_EQ(zeroed(), kStacks - kHot / 2);
  pool.trim();
  EXPECT_EQ(zeroed(), kStacks - kHot / 4);
  pool.trim();
  pool.trim();
  EXPECT_EQ(zeroed(), kStacks - kHotMin);
  EXPECT_EQ(top_only(), 0u) << "the hot set keeps its pages until it sat unused at its floor";
  // A whole interval at the floor, unused: the hot set keeps only its stacks' top pages, once.
  pool.trim();
  EXPECT_EQ(zeroed(), kStacks - kHotMin);
  EXPECT_EQ(top_only(), kHotMin);
  pool.trim();
  EXPECT_EQ(top_only(), kHotMin);
  // Committed stacks are handed out first, then the trimmed (clean) ones, all of them usable.
  std::size_t clean_seen = 0;
  bool dirty_after_clean = false;
  std::vector<char*> again;
  for (std::size_t i = 0; i < kStacks; ++i) {
    char* x = pool.acquire(c, 0);
    if (x[pool.stack_size() - 1] == 0) {
      ++clean_seen;
    } else if (clean_seen) {
      dirty_after_clean = true;
    }
    std::memset(x, 1, pool.stack_size());
    again.push_back(x);
  }
  EXPECT_EQ(clean_seen, kStacks - kHotMin);
  EXPECT_FALSE(dirty_after_clean) << "a trimmed stack was handed out before a committed one";
  for (char* x : again) pool.release(c, x, 0);
  pool.drain(c);
  // That interval used every cached stack: the hot set is whole again.
  pool.trim();
  EXPECT_EQ(zeroed(), 0u);
  pool.trim();
  EXPECT_EQ(zeroed(), kStacks - kHot);
}

// Trimmed stacks are kept as runs of neighbours, merged as trims add to them. Released in a
// shuffled order, trimmed over several intervals (each adds a batch of runs that must merge with
// the earlier ones), then taken back: exactly the stacks released, each once.
TEST(StackPool, TrimmedStacksComeBackEachOnceWhateverOrderTheyWereFreedIn) {
  constexpr std::size_t kStacks = 40 * StackPool::kRefillBatch;  // spans 3 regions of 256
  StackPool pool(16 << 10, true);
  StackCache c;
  std::vector<char*> stacks;
  for (std::size_t i = 0; i < kStacks; ++i) stacks.push_back(pool.acquire(c, 0));
  std::mt19937 rng(3);
  std::shuffle(stacks.begin(), stacks.end(), rng);
  for (char* s : stacks) pool.release(c, s, 0);
  pool.drain(c);
  for (int i = 0; i < 10; ++i) pool.trim();
  ASSERT_EQ(pool.cached(), kStacks);
  std::set<char*> back;
  for (std::size_t i = 0; i < kStacks; ++i) {
    char* s = pool.acquire(c, 0);
    std::memset(s, 1, pool.stack_size());
    EXPECT_TRUE(back.insert(s).second) << "a stack was handed out twice";
  }
  EXPECT_EQ(back, std::set<char*>(stacks.begin(), stacks.end()));
  EXPECT_EQ(pool.cached(), 0u);
  for (char* s : back) pool.release(c, s, 0);
  pool.drain(c);
}

// Each thread owns its cache; the shared pool is under the lock. No stack is ever held by two
// threads at once: each writes its mark over the stack and finds it intact before releasing.
TEST(StackPool, ThreadsWithTheirOwnCachesNeverShareAStack) {
  constexpr int kThreads = 4;
  const int kIters = static_cast<int>(weft_test::scaled(200000));
  StackPool pool(16 << 10, true);
  std::atomic<int> clashes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      StackCache cache;
      std::vector<char*> held;
      const std::uint32_t mark = 0xC0DE0000u | static_cast<std::uint32_t>(t);
      for (int i = 0; i < kIters; ++i) {
        if (held.size() < 100 && (i % 7 != 3 || held.empty())) {
          char* s = pool.acquire(cache, 0);
          std::memcpy(s, &mark, sizeof mark);
          std::memcpy(s + pool.stack_size() - sizeof mark, &mark, sizeof mark);
          held.push_back(s);
        } else {
          char* s = held.back();
          held.pop_back();
          std::uint32_t lo, hi;
          std::memcpy(&lo, s, sizeof lo);
          std::memcpy(&hi, s + pool.stack_size() - sizeof hi, sizeof hi);
          if (lo != mark || hi != mark) clashes.fetch_add(1);
          pool.release(cache, s, 0);
        }
        if (i % 1000 == 999) pool.drain(cache);
      }
      for (char* s : held) pool.release(cache, s, 0);
      pool.drain(cache);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(clashes.load(), 0);
  // At most 4 * 100 stacks were ever held at once, plus what sat in caches: a few regions.
  EXPECT_LE(pool.reserved_bytes(), 8u * 256 * (pool.stack_size() + pool.page_size()));
  EXPECT_GT(pool.cached(), 0u);
}

}  // namespace
