// Fiber header allocator; design in fiber_alloc.hpp.
#include "core/fiber_alloc.hpp"

#include <algorithm>
#include <mutex>
#include <new>
#include <vector>

namespace weft::detail {
namespace {

// kBatch chunk addresses, or fewer from an idle thread's shed_thread_cache.
struct Batch {
  void* chunks[FiberAlloc::kBatch];
  std::size_t count;
};

struct Global {
  std::mutex mu;
  std::vector<Batch> batches;
};

Global& global() {
  static auto* g = new Global;  // immortal: threads may free chunks during static destruction
  return *g;
}

// Asks for every line of a chunk in exclusive state: its next user writes them (the Fiber
// header), and another core most likely wrote them last. A read prefetch (all that
// __builtin_prefetch(p, 1) emits for plain x86-64) brings them shared, and the first store then
// still waits for that core to give them up.
inline void prefetch_for_write(const void* p) noexcept {
  static_assert(FiberAlloc::kChunk <= 256, "prefetch every line of a chunk");
  const char* c = static_cast<const char*>(p);
#if defined(__x86_64__)
  // PREFETCHW: AMD since K6-2, Intel since Broadwell; a no-op on older Intel cores.
  asm volatile("prefetchw %0" ::"m"(*c));
  asm volatile("prefetchw %0" ::"m"(*(c + 64)));
  asm volatile("prefetchw %0" ::"m"(*(c + 128)));
  asm volatile("prefetchw %0" ::"m"(*(c + 192)));
#else
  for (int off = 0; off < 256; off += 64) __builtin_prefetch(c + off, 1);
#endif
}

struct ThreadCache {
  void* chunks[2 * FiberAlloc::kBatch];  // a stack: [0, count) are free, the top is reused first
  std::size_t count = 0;
  ~ThreadCache() {
    // Give everything back, in batches, so other threads can reuse it.
    while (count >= FiberAlloc::kBatch) give_batch(FiberAlloc::kBatch);
    while (count > 0) ::operator delete(chunks[--count], std::align_val_t(FiberAlloc::kAlign));
  }
  // The n chunks on top go to the global stack.
  void give_batch(std::size_t n) noexcept {
    Batch b;
    b.count = n;
    count -= n;
    std::copy_n(chunks + count, n, b.chunks);
    Global& g = global();
    std::lock_guard lock(g.mu);
    g.batches.push_back(b);
  }
};

thread_local ThreadCache t_cache;

}  // namespace

void* FiberAlloc::allocate() {
  ThreadCache& c = t_cache;
  if (c.count == 0) {
    Global& g = global();
    std::unique_lock lock(g.mu);
    if (g.batches.empty()) {
      lock.unlock();
      return ::operator new(kChunk, std::align_val_t(kAlign));
    }
    const Batch& b = g.batches.back();
    std::copy_n(b.chunks, b.count, c.chunks);
    c.count = b.count;
    g.batches.pop_back();
    lock.unlock();
    for (std::size_t i = 1; i <= std::min(kPrefetchAhead, c.count); ++i) {
      prefetch_for_write(c.chunks[c.count - i]);
    }
  }
  void* chunk = c.chunks[--c.count];
  if (c.count >= kPrefetchAhead) prefetch_for_write(c.chunks[c.count - kPrefetchAhead]);
  return chunk;
}

void FiberAlloc::deallocate(void* p) noexcept {
  ThreadCache& c = t_cache;
  c.chunks[c.count++] = p;
  if (c.count == 2 * kBatch) c.give_batch(kBatch);
}

void FiberAlloc::shed_thread_cache(std::size_t keep) noexcept {
  ThreadCache& c = t_cache;
  while (c.count > keep) c.give_batch(std::min(c.count - keep, kBatch));
}

std::size_t FiberAlloc::release_cached(std::size_t keep_batches) noexcept {
  std::size_t freed = 0;
  for (;;) {
    Batch b;
    {
      Global& g = global();
      std::lock_guard lock(g.mu);
      // allocate() takes from the back: release from there too (no shifting), keeping the front.
      if (g.batches.size() <= keep_batches) return freed;
      b = g.batches.back();
      g.batches.pop_back();
    }
    for (std::size_t i = 0; i < b.count; ++i) {
      ::operator delete(b.chunks[i], std::align_val_t(kAlign));
    }
    freed += b.count;
  }
}

}  // namespace weft::detail
