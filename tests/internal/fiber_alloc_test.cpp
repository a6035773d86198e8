// FiberAlloc (core/fiber_alloc.hpp) driven directly, each case on threads of its own so that it
// starts from empty thread caches: chunks are usable and distinct, freed chunks are reused, a
// cache spills to the global stack at two batches, an idle thread's shed and release_cached give
// every cached chunk back, and chunks freed on one thread serve another. Nothing else in this
// process uses FiberAlloc, so the global stack holds only what these cases put there.
#include "core/fiber_alloc.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace {

using weft::detail::FiberAlloc;

// Runs fn on a fresh thread (a fresh thread cache), which then exits (its cache goes back).
template <class Fn>
void on_fresh_thread(Fn fn) {
  std::thread t(fn);
  t.join();
}

TEST(FiberAlloc, ChunksAreAlignedWritableAndDistinct) {
  on_fresh_thread([] {
    std::vector<void*> got;
    std::set<void*> seen;
    for (int i = 0; i < 1000; ++i) {
      void* p = FiberAlloc::allocate();
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % FiberAlloc::kAlign, 0u);
      std::memset(p, i & 0xff, FiberAlloc::kChunk);
      ASSERT_TRUE(seen.insert(p).second) << "chunk handed out twice";
      got.push_back(p);
    }
    for (int i = 0; i < 1000; ++i) {
      const auto* b = static_cast<const unsigned char*>(got[static_cast<std::size_t>(i)]);
      ASSERT_EQ(b[0], i & 0xff);
      ASSERT_EQ(b[FiberAlloc::kChunk - 1], i & 0xff);
    }
    for (void* p : got) FiberAlloc::deallocate(p);
  });
  FiberAlloc::release_cached(0);
}

TEST(FiberAlloc, AThreadReusesWhatItFreedNewestFirst) {
  on_fresh_thread([] {
    void* a = FiberAlloc::allocate();
    void* b = FiberAlloc::allocate();
    FiberAlloc::deallocate(a);
    FiberAlloc::deallocate(b);
    EXPECT_EQ(FiberAlloc::allocate(), b);
    EXPECT_EQ(FiberAlloc::allocate(), a);
    FiberAlloc::deallocate(a);
    FiberAlloc::deallocate(b);
  });
  FiberAlloc::release_cached(0);
}

// 200 chunks freed on one thread: the cache spills batches to the global stack at 2 * kBatch and
// sheds down to 8; release_cached(0) then frees exactly what the thread gave away.
TEST(FiberAlloc, SpillAndShedReachTheGlobalStackAndReleaseFreesThem) {
  FiberAlloc::release_cached(0);
  std::size_t released = 0;
  on_fresh_thread([&] {
    std::vector<void*> got;
    for (int i = 0; i < 200; ++i) got.push_back(FiberAlloc::allocate());
    for (void* p : got) FiberAlloc::deallocate(p);
    FiberAlloc::shed_thread_cache(8);
    released = FiberAlloc::release_cached(0);
    // What stayed in this thread's cache is still handed out.
    for (int i = 0; i < 8; ++i) FiberAlloc::deallocate(FiberAlloc::allocate());
  });
  EXPECT_EQ(released, 192u);
  // The thread's exit gave its last 8 to malloc (fewer than a batch): nothing is cached now.
  EXPECT_EQ(FiberAlloc::release_cached(0), 0u);
}

// Fibers are created on one worker and freed on another: the freeing thread's batches serve the
// allocating thread (all but what the freeing thread kept, fewer than a batch, at its exit).
TEST(FiberAlloc, ChunksFreedOnOneThreadServeAnother) {
  FiberAlloc::release_cached(0);
  constexpr std::size_t kN = 1000;
  std::vector<void*> made;
  on_fresh_thread([&] {
    for (std::size_t i = 0; i < kN; ++i) made.push_back(FiberAlloc::allocate());
  });
  on_fresh_thread([&] {
    for (void* p : made) FiberAlloc::deallocate(p);
  });
  const std::set<void*> freed(made.begin(), made.end());
  std::size_t reused = 0;
  on_fresh_thread([&] {
    std::vector<void*> again;
    for (std::size_t i = 0; i < kN; ++i) again.push_back(FiberAlloc::allocate());
    for (void* p : again) reused += freed.count(p);
    for (void* p : again) FiberAlloc::deallocate(p);
  });
  EXPECT_GE(reused, kN / FiberAlloc::kBatch * FiberAlloc::kBatch);
  FiberAlloc::release_cached(0);
}

}  // namespace
