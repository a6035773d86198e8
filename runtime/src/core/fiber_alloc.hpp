// FiberAlloc: memory for fiber headers + small closures, recycled through per-thread caches.
//
// Fibers are usually created on one worker and freed on another (the one that ran them last).
// With malloc, every such free locks the creating thread's arena, and a spawn storm spread over
// several workers spends its time in that lock. Here each thread keeps a cache of free chunks;
// a cache that grows past two batches hands one batch (a linked list) to a global stack under a
// mutex, and an empty cache takes a batch back: one lock per kBatch fibers.
// One size class (kChunk bytes, 16-byte aligned); bigger or over-aligned closures use operator new.
// Process-wide and immortal: a Task may free its fiber after run() returned. Chunks are reused;
// after a burst, release_cached() (the monitor's HeapReturn) gives the global stack's batches
// beyond a few back to malloc, so the peak number of fiber headers does not stay allocated.
#pragma once

#include <cstddef>

namespace weft::detail {

class FiberAlloc {
 public:
  static constexpr std::size_t kChunk = 224;  // a 168-byte Fiber + 56 bytes of closure
  static constexpr std::size_t kAlign = 16;
  static constexpr std::size_t kBatch = 64;

  static bool fits(std::size_t size, std::size_t align) noexcept {
#if defined(__SANITIZE_ADDRESS__)
    (void)size;
    (void)align;
    return false;  // ASan sees use-after-free of fibers only if they go back to malloc
#else
    return size <= kChunk && align <= kAlign;
#endif
  }
  static void* allocate();  // a kChunk-byte chunk
  static void deallocate(void* p) noexcept;
  // Frees the batches on the global stack beyond `keep_batches` (threads' caches stay as they
  // are). Returns the number of chunks freed. Any thread.
  static std::size_t release_cached(std::size_t keep_batches) noexcept;
};

}  // namespace weft::detail
