// ImageArena (runtime/src/services/image_arena.hpp), tested directly: allocations are aligned,
// distinct and keep their bytes; a block whose allocations are all freed gives its pages back and
// is reused; compact() moves the live allocations of sparse blocks, reports each move, keeps the
// bytes, and leaves only dense blocks; allocations above kLargest bypass the blocks.
#include "services/image_arena.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

namespace {

using weft::detail::ImageArena;

// Whether the page holding p is resident.
bool resident(const void* p) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  unsigned char v = 0;
  void* at = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~(page - 1));
  EXPECT_EQ(mincore(at, 1, &v), 0);
  return v & 1;
}

struct Alloc {
  void* p;
  std::size_t bytes;
  unsigned char fill;
};

void fill(const Alloc& a) { std::memset(a.p, a.fill, a.bytes); }
bool intact(const Alloc& a) {
  const auto* b = static_cast<const unsigned char*>(a.p);
  for (std::size_t i = 0; i < a.bytes; ++i) {
    if (b[i] != a.fill) return false;
  }
  return true;
}

TEST(ImageArena, AllocationsAreAlignedDistinctAndKeepTheirBytes) {
  ImageArena arena;
  std::vector<Alloc> all;
  std::mt19937 rng(1);
  for (int i = 0; i < 2000; ++i) {
    const std::size_t bytes = 1 + rng() % 3000;
    Alloc a{arena.allocate(bytes), bytes, static_cast<unsigned char>(i)};
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.p) % 8, 0u);
    fill(a);
    all.push_back(a);
  }
  for (const Alloc& a : all) EXPECT_TRUE(intact(a));
  for (const Alloc& a : all) arena.free(a.p, a.bytes);
  EXPECT_EQ(arena.live_bytes(), 0u);
  EXPECT_EQ(arena.blocks_in_use(), 0u);
}

TEST(ImageArena, AnEmptiedBlockGivesItsPagesBackAndIsReused) {
  ImageArena arena;
  std::vector<Alloc> all;
  // Three blocks' worth.
  const std::size_t bytes = 1000;
  while (arena.blocks_in_use() < 3) {
    Alloc a{arena.allocate(bytes), bytes, 0x5a};
    fill(a);
    all.push_back(a);
  }
  const void* first = all.front().p;
  EXPECT_TRUE(resident(first));
  // Free everything in the first block.
  std::size_t i = 0;
  for (; i < all.size() && arena.blocks_in_use() == 3; ++i) arena.free(all[i].p, all[i].bytes);
  EXPECT_EQ(arena.blocks_in_use(), 2u);
  EXPECT_FALSE(resident(first));
  for (std::size_t k = i; k < all.size(); ++k) EXPECT_TRUE(intact(all[k]));
  // The next block taken is the freed one.
  std::vector<Alloc> more;
  while (arena.blocks_in_use() < 3) {
    Alloc a{arena.allocate(bytes), bytes, 0x33};
    fill(a);
    more.push_back(a);
  }
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(more.back().p) / ImageArena::kBlockBytes,
            reinterpret_cast<std::uintptr_t>(first) / ImageArena::kBlockBytes);
  for (std::size_t k = i; k < all.size(); ++k) arena.free(all[k].p, all[k].bytes);
  for (const Alloc& a : more) arena.free(a.p, a.bytes);
  EXPECT_EQ(arena.blocks_in_use(), 0u);
}

TEST(ImageArena, CompactMovesSparseBlocksTogetherAndReportsEachMove) {
  ImageArena arena;
  std::map<void*, Alloc> live;  // by address, as an owner would track them
  std::mt19937 rng(7);
  for (int i = 0; i < 4000; ++i) {
    const std::size_t bytes = 200 + rng() % 1500;
    Alloc a{arena.allocate(bytes), bytes, static_cast<unsigned char>(rng())};
    fill(a);
    live.emplace(a.p, a);
  }
  const std::size_t blocks_full = arena.blocks_in_use();
  ASSERT_GT(blocks_full, 20u);
  // A burst's survivors: keep one in ten, scattered over every block.
  for (auto it = live.begin(); it != live.end();) {
    if (rng() % 10 != 0) {
      arena.free(it->second.p, it->second.bytes);
      it = live.erase(it);
    } else {
      ++it;
    }
  }
  ASSERT_GT(arena.blocks_in_use(), blocks_full / 2);  // nearly every block keeps a survivor
  std::size_t moved = 0;
  std::size_t emptied = 0;
  for (;;) {
    const std::size_t n = arena.compact(
        [&](void* from, void* to) {
          auto it = live.find(from);
          ASSERT_NE(it, live.end());
          Alloc a = it->second;
          live.erase(it);
          a.p = to;
          EXPECT_TRUE(intact(a));  // copied before the owner hears of it
          live.emplace(to, a);
          ++moved;
        },
        4);
    if (n == 0) break;
    emptied += n;
  }
  EXPECT_GT(moved, 0u);
  EXPECT_GT(emptied, 0u);
  std::size_t live_bytes = 0;
  for (const auto& [p, a] : live) {
    EXPECT_TRUE(intact(a));
    live_bytes += a.bytes;
  }
  // Every block but the current one is at least a quarter live now.
  EXPECT_LE(arena.blocks_in_use(), live_bytes * 4 / ImageArena::kBlockBytes + 2);
  for (const auto& [p, a] : live) arena.free(a.p, a.bytes);
  EXPECT_EQ(arena.blocks_in_use(), 0u);
  EXPECT_EQ(arena.live_bytes(), 0u);
}

TEST(ImageArena, LargeAllocationsBypassTheBlocks) {
  ImageArena arena;
  const std::size_t bytes = ImageArena::kLargest + 1;
  Alloc a{arena.allocate(bytes), bytes, 0x77};
  fill(a);
  EXPECT_EQ(arena.blocks_in_use(), 0u);
  EXPECT_TRUE(intact(a));
  arena.free(a.p, a.bytes);
}

}  // namespace
