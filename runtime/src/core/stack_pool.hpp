// StackPool: fiber stacks carved from large MAP_NORESERVE regions.
//
// Layout of one slot: [guard page][stack_size bytes], stacks grow down towards the guard. Pages
// commit lazily, so an idle 64 KiB stack costs the one or two pages it touched. Guards use
// madvise(MADV_GUARD_INSTALL) (Linux >= 6.13), which adds no VMA, so 100k guarded stacks stay far
// below vm.max_map_count; older kernels fall back to mprotect(PROT_NONE), 2 VMAs per stack, and
// we check the map count before the kernel refuses.
//
// Freed stacks go to the freeing worker's cache (no lock, hot pages stay committed), overflow to
// a shared pool (mutex). trim() -- called by the monitor thread every 100 ms -- releases, with
// MADV_DONTNEED, the pages of shared stacks that sat unused for the whole interval (the pool's low
// water mark) beyond a hot set, so RSS follows the live fibers without thrashing stacks that are
// about to be reused. The hot set (256 stacks) halves every interval that had surplus, down to
// 16, and is restored by an interval that used every cached stack: a burst's stacks go back
// within about a second of it ending.
// Threads: acquire/release on a worker's own cache only by that worker; everything else under mu_.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/thread_mutex.hpp"

namespace weft::detail {

class StackCache;

class StackPool {
 public:
  StackPool(std::size_t stack_size, bool guard_pages);
  ~StackPool();  // unmaps every region; all stacks must have been returned
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  std::size_t stack_size() const noexcept { return stack_size_; }
  std::size_t page_size() const noexcept { return page_; }
  bool guard_pages() const noexcept { return guard_; }

  char* acquire(StackCache& cache);              // lowest usable byte; aborts if out of memory
  void release(StackCache& cache, char* stack);  // the stack's fiber has finished
  void drain(StackCache& cache);                 // moves a worker's cache to the shared pool
  void trim();                                   // see the header comment

  std::uint64_t reserved_bytes() const noexcept;
  std::uint64_t cached() const noexcept;  // stacks in the shared pool (not worker caches)

 private:
  char* carve_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void map_region_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::size_t page_;
  const std::size_t stack_size_;  // usable bytes, a multiple of page_
  const std::size_t slot_size_;   // stack_size_ + guard
  const bool guard_;
  bool guard_by_mprotect_ = false;  // kernel lacks MADV_GUARD_INSTALL

  mutable ThreadMutex mu_;
  std::vector<std::pair<char*, std::size_t>> regions_ ABSL_GUARDED_BY(mu_);
  char* carve_next_ ABSL_GUARDED_BY(mu_) = nullptr;  // next unused slot
  char* carve_end_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<char*> dirty_ ABSL_GUARDED_BY(mu_);   // freed, pages still committed
  std::vector<char*> clean_ ABSL_GUARDED_BY(mu_);   // freed and trimmed
  std::size_t dirty_low_ ABSL_GUARDED_BY(mu_) = 0;  // fewest dirty stacks since the last trim
  std::size_t hot_keep_ ABSL_GUARDED_BY(mu_);       // surplus stacks the next trim keeps
  std::uint64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
};

// A worker's private stack cache. Only its worker touches it.
class StackCache {
 public:
  static constexpr std::size_t kMax = 64;
  std::vector<char*> stacks;
};

}  // namespace weft::detail
