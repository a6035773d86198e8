// Fiber header allocator; design in fiber_alloc.hpp.
#include "core/fiber_alloc.hpp"

#include <algorithm>
#include <mutex>
#include <new>

namespace weft::detail {
namespace {

// kBatch chunk addresses (fewer from an idle thread's shed_thread_cache), on the global stack.
// A node of its own, allocated when a thread hands the batch over and freed when one takes it,
// so that the global stack's memory follows the batches on it: a vector of batches would keep
// its capacity, 520 bytes per batch of the largest burst, for the life of the process.
struct Batch {
  Batch* next;
  std::size_t count;
  void* chunks[FiberAlloc::kBatch];
};

struct Global {
  std::mutex mu;
  Batch* top = nullptr;  // guarded by mu
  std::size_t size = 0;  // batches on the stack; guarded by mu
};

Global& global() {
  static auto* g = new Global;  // immortal: threads may free chunks during static destruction
  return *g;
}

// Asks for every line of a chunk in exclusive state: its next user writes them (the Fiber
// header), and another core most likely wrote them last. A read prefetch (all that
// __builtin_prefetch(p, 1) emits for plain x86-64) brings them shared, and the first store then
// still waits for that core to give them up. A chunk is 16-byte aligned, so it may span five
// lines: the last byte's line is asked for too (the same line as c + 192 when it spans four).
inline void prefetch_for_write(const void* p) noexcept {
  static_assert(FiberAlloc::kChunk > 192 && FiberAlloc::kChunk <= 256,
                "prefetch every line of a chunk");
  const char* c = static_cast<const char*>(p);
#if defined(__x86_64__)
  // PREFETCHW: AMD since K6-2, Intel since Broadwell; a no-op on older Intel cores.
  asm volatile("prefetchw %0" ::"m"(*c));
  asm volatile("prefetchw %0" ::"m"(*(c + 64)));
  asm volatile("prefetchw %0" ::"m"(*(c + 128)));
  asm volatile("prefetchw %0" ::"m"(*(c + 192)));
  asm volatile("prefetchw %0" ::"m"(*(c + FiberAlloc::kChunk - 1)));
#else
  for (std::size_t off = 0; off < FiberAlloc::kChunk; off += 64) __builtin_prefetch(c + off, 1);
  __builtin_prefetch(c + FiberAlloc::kChunk - 1, 1);
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
  // The n (1..kBatch) chunks on top go to the global stack; without memory for the batch's node
  // they go back to malloc instead.
  void give_batch(std::size_t n) noexcept {
    count -= n;
    auto* b = new (std::nothrow) Batch;
    if (!b) {
      for (std::size_t i = 0; i < n; ++i) {
        ::operator delete(chunks[count + i], std::align_val_t(FiberAlloc::kAlign));
      }
      return;
    }
    b->count = n;
    std::copy_n(chunks + count, n, b->chunks);
    Global& g = global();
    std::lock_guard lock(g.mu);
    b->next = g.top;
    g.top = b;
    ++g.size;
  }
};

thread_local ThreadCache t_cache;

// Takes the batch on top of the global stack (null if none); the caller frees the node.
Batch* take_batch() noexcept {
  Global& g = global();
  std::lock_guard lock(g.mu);
  Batch* b = g.top;
  if (b) {
    g.top = b->next;
    --g.size;
  }
  return b;
}

}  // namespace

void* FiberAlloc::allocate() {
  ThreadCache& c = t_cache;
  if (c.count == 0) {
    Batch* b = take_batch();
    if (!b) return ::operator new(kChunk, std::align_val_t(kAlign));
    std::copy_n(b->chunks, b->count, c.chunks);
    c.count = b->count;
    delete b;
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
  Batch* victims;
  {
    Global& g = global();
    std::lock_guard lock(g.mu);
    // allocate() takes from the top: release from there too, keeping the bottom.
    if (g.size <= keep_batches) return 0;
    victims = g.top;
    Batch* last = g.top;
    for (std::size_t i = 1; i < g.size - keep_batches; ++i) last = last->next;
    g.top = last->next;
    last->next = nullptr;
    g.size = keep_batches;
  }
  std::size_t freed = 0;
  while (victims) {
    Batch* b = victims;
    victims = b->next;
    for (std::size_t i = 0; i < b->count; ++i) {
      ::operator delete(b->chunks[i], std::align_val_t(kAlign));
    }
    freed += b->count;
    delete b;
  }
  return freed;
}

}  // namespace weft::detail
