// FiberAlloc: memory for fiber headers + small closures, recycled through per-thread caches.
//
// Fibers are usually created on one worker and freed on another (the one that ran them last).
// With malloc, every such free locks the creating thread's arena, and a spawn storm spread over
// several workers spends its time in that lock. Here each thread keeps a cache of free chunks;
// a cache that grows past two batches hands one batch to a global stack under a mutex, and an
// empty cache takes a batch back: one lock per kBatch fibers.
// Caches and batches hold chunk addresses (arrays), not lists threaded through the chunks: the
// chunks a thread takes were mostly written last by another core (the fibers they held ran and
// ended there), so a list would make every allocation wait for the next chunk's line just to
// find it. With addresses, allocate() asks for the lines of the chunk kPrefetchAhead allocations
// ahead in exclusive state (PREFETCHW), and they arrive while this one is filled in: spawn on two
// workers of a 2-vCPU host went from about 244 to 197 ns per fiber. A read prefetch would bring
// the lines shared, so the first store would still wait for the other core: asking for them
// exclusive is about half of that gain, looking further ahead the rest.
// One size class (kChunk bytes, 16-byte aligned); bigger or over-aligned closures use operator new.
// Process-wide and immortal: a Task may free its fiber after run() returned. Chunks are reused;
// after a burst, release_cached() (the monitor's HeapReturn) gives the global stack's batches
// back to malloc, so the peak number of fiber headers does not stay allocated. A worker going
// idle first hands its cache beyond a few chunks to the global stack (shed_thread_cache), in
// batches of at most kBatch. Why it matters: chunks come from malloc one at a time, so the
// ones cached after a burst sit scattered through the heap and each pins its page: ~340 of them
// kept ~1.3 MB resident in chat_server after 10,000 clients left, against 0.6 MB of live heap.
#pragma once

#include <cstddef>

namespace weft::detail {

class FiberAlloc {
 public:
  static constexpr std::size_t kChunk = 224;  // a 168-byte Fiber + 56 bytes of closure
  static constexpr std::size_t kAlign = 16;
  static constexpr std::size_t kBatch = 64;
  // How many allocations ahead allocate() prefetches. Spawn on two workers (with kMaxStealBatch
  // 64, four lines prefetched per chunk): 1, 2, 4 and 8 ahead took about 162, 154, 147 and
  // 147 ns per fiber.
  static constexpr std::size_t kPrefetchAhead = 4;

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
  // The calling thread's cache beyond `keep` chunks goes to the global stack (a worker going
  // idle: what it caches, no trim can reach).
  static void shed_thread_cache(std::size_t keep) noexcept;
  // Frees the batches on the global stack beyond `keep_batches` (threads' caches stay as they
  // are). Returns the number of chunks freed. Any thread.
  static std::size_t release_cached(std::size_t keep_batches) noexcept;
};

}  // namespace weft::detail
