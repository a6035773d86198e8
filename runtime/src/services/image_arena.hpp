// ImageArena: the memory of hibernated stacks' images (services/hibernator.hpp), kept apart
// from malloc so that it goes back to the kernel when the fibers wake.
//
// Why not malloc: the hibernator thread allocates an image; whichever thread restores it --
// usually a worker, when the connection's fiber wakes -- frees it. glibc's per-thread cache
// (tcache) keeps up to 7 freed chunks of each size below 1,032 bytes per thread, and no call
// empties another thread's cache. After 10,000 idle chat clients left, the two workers' caches
// held 112 image-sized chunks, each pinning an otherwise free page of the hibernator's arena:
// 300-400 KB that malloc_trim could not give back (found by walking the arenas with gdb).
//
// Design: a log-structured arena. Blocks of kBlockBytes, carved from MAP_NORESERVE regions of
// kRegionBytes (one VMA each). allocate() bumps in the current block; free() marks the
// allocation dead and takes its bytes off its block's live count. A block with nothing live
// gives its pages back (MADV_DONTNEED) and waits on the free list. Images are movable -- the
// hibernator alone holds pointers to them, all under its lock -- so compact() evacuates blocks
// that are less than a quarter live into the current one and tells the owner each new address:
// memory follows the live images, however the survivors of a burst are scattered.
// Allocations above kLargest go to operator new: glibc keeps chunks that large out of its
// per-thread caches, and they would waste most of a block.
//
// Layout: a block starts with its BlockHeader; each allocation is an 8-byte AllocHeader (its
// rounded size and whether it is live) and the payload, 8-byte aligned. Blocks are
// kBlockBytes-aligned, so a payload finds its block by masking.
//
// Threads: none of its own. The owner serializes every call (the hibernator's mu_).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace weft::detail {

class ImageArena {
 public:
  static constexpr std::size_t kBlockBytes = std::size_t{64} << 10;
  static constexpr std::size_t kRegionBytes = std::size_t{64} << 20;
  static constexpr std::size_t kLargest = kBlockBytes / 4;  // larger: operator new

  ImageArena() = default;
  ~ImageArena();  // unmaps the regions; outstanding allocations die with them
  ImageArena(const ImageArena&) = delete;
  ImageArena& operator=(const ImageArena&) = delete;

  // `bytes` of storage, 8-byte aligned. Aborts with a message if no region can be mapped, as
  // the stack pool does: the caller has already given the stack's pages back.
  void* allocate(std::size_t bytes);
  // Frees what allocate(bytes) returned; `bytes` must be the size asked for.
  void free(void* p, std::size_t bytes) noexcept;
  // Moves the live allocations of up to `max_blocks` blocks that are less than a quarter live
  // into the current block, calling relocated(old, new) after each copy (the owner repoints its
  // reference; `old` is freed right after). Returns the blocks emptied.
  template <typename Relocated>
  std::size_t compact(Relocated&& relocated, std::size_t max_blocks);

  std::size_t live_bytes() const noexcept { return live_bytes_; }  // block allocations + headers
  std::size_t blocks_in_use() const noexcept { return blocks_.size(); }

 private:
  struct BlockHeader {
    std::uint32_t used;   // bytes carved, this header included
    std::uint32_t live;   // bytes of live allocations, their headers included
    std::uint32_t count;  // live allocations
    std::uint32_t index;  // in blocks_
  };
  struct AllocHeader {
    std::uint32_t bytes;  // payload bytes, rounded up to 8
    std::uint32_t live;
  };
  static constexpr std::size_t kFirst = (sizeof(BlockHeader) + 7) & ~std::size_t{7};
  static std::size_t rounded(std::size_t bytes) noexcept { return (bytes + 7) & ~std::size_t{7}; }
  static BlockHeader* block_of(const void* p) noexcept {
    return reinterpret_cast<BlockHeader*>(reinterpret_cast<std::uintptr_t>(p) &
                                          ~(std::uintptr_t{kBlockBytes} - 1));
  }
  BlockHeader* take_block();                    // a fresh block, from the free list or a new region
  void release_block(BlockHeader* b) noexcept;  // nothing live in it any more
  // The first live payload of b at or after *off (b has one), moving *off past it.
  static void* next_live(BlockHeader* b, std::uint32_t* off) noexcept;

  std::vector<std::pair<char*, std::size_t>> regions_;  // each mapping: its base and length
  char* carve_next_ = nullptr;  // next never-used block of the newest region
  char* carve_end_ = nullptr;
  std::vector<BlockHeader*> free_blocks_;  // pages given back
  std::vector<BlockHeader*> blocks_;       // holding live allocations, or current_
  BlockHeader* current_ = nullptr;
  std::size_t live_bytes_ = 0;
};

template <typename Relocated>
std::size_t ImageArena::compact(Relocated&& relocated, std::size_t max_blocks) {
  std::vector<BlockHeader*> sparse;
  for (BlockHeader* b : blocks_) {
    if (sparse.size() == max_blocks) break;
    if (b != current_ && b->live * 4 < kBlockBytes) sparse.push_back(b);
  }
  for (BlockHeader* b : sparse) {
    std::uint32_t off = kFirst;
    for (bool last = false; !last;) {
      void* from = next_live(b, &off);
      const std::size_t bytes = reinterpret_cast<const AllocHeader*>(from)[-1].bytes;
      last = b->count == 1;  // its free releases b: its header is not read again
      void* to = allocate(bytes);
      std::memcpy(to, from, bytes);
      relocated(from, to);
      free(from, bytes);
    }
  }
  return sparse.size();
}

}  // namespace weft::detail
