// StackPool: fiber stacks carved from large MAP_NORESERVE regions, in size classes.
//
// Layout of one slot: [guard page][stack bytes], stacks grow down towards the guard. Pages
// commit lazily, so an idle 64 KiB stack costs the one or two pages it touched. Guards use
// madvise(MADV_GUARD_INSTALL) (Linux >= 6.13), which adds no VMA, so 100k guarded stacks stay far
// below vm.max_map_count; older kernels fall back to mprotect(PROT_NONE), 2 VMAs per stack, and
// we check the map count before the kernel refuses.
//
// Size classes: class 0 is Options::stack_size (every fiber's stack unless it asked for another);
// classes 1..kClasses-1 are powers of two from 8 KiB to 128 MiB, for fibers given a size
// (FiberOptions::stack_size, or by name from a stack-size table). A class has its own regions
// and free lists, so a stack never changes size; a fiber records its class (Fiber::stack_class).
//
// Freed stacks go to the freeing worker's cache for their class (no lock, hot pages stay
// committed), overflow to the class's shared pool (mutex). trim() -- called by the monitor thread
// every 100 ms -- releases, with MADV_DONTNEED, the pages of shared stacks that sat unused for
// the whole interval (the pool's low water mark) beyond a hot set, so RSS follows the live fibers
// without thrashing stacks that are about to be reused. The hot set (256 stacks per class)
// halves every interval that had surplus, down to 16, and is restored by an interval that used
// every cached stack: a burst's stacks go back within about a second of it ending. Once the hot
// set has sat at its floor, unused, for a whole interval, trim releases its stacks' pages below
// the top one (what a new fiber touches first), once until stacks come back into the pool.
// Trimmed stacks are kept as runs of neighbours (CleanRun), not a pointer each: a burst's stacks
// were carved side by side, so its thousands of trimmed stacks fold into a few runs per region.
// A pointer each was itself burst-sized heap that stayed (28,960 pointers, 226 KB resident in
// the monitor thread's malloc arena, after 10,000 chat clients had come and gone).
// A worker about to block (idle) keeps kIdleCacheKeep stacks per class in its cache and hands
// the rest to the shared pool (shed_idle_surplus): otherwise a burst's last 64 stacks per worker
// stay committed for as long as it sleeps, where no trim can reach them.
// A worker whose cache and the shared lists are empty carves a batch of fresh slots (pointer
// arithmetic under mu_) and installs their guards after releasing it, so that workers spawning
// at once do not queue behind each other's madvise calls.
// Threads: acquire/release on a worker's own cache only by that worker; everything else under mu_
// (guard_by_mprotect_ is written by the constructor alone).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "weft/detail/thread_mutex.hpp"

namespace weft::detail {

class StackCache;

class StackPool {
 public:
  static constexpr unsigned kClasses = 16;
  static constexpr std::size_t kMaxClassBytes = std::size_t{128} << 20;
  // Stacks an empty cache takes in one lock round trip: from the shared lists, or fresh slots.
  static constexpr std::size_t kRefillBatch = 16;

  StackPool(std::size_t stack_size, bool guard_pages);
  ~StackPool();  // unmaps every region; all stacks must have been returned
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  // The default stack size (class 0), usable bytes.
  std::size_t stack_size() const noexcept { return class_bytes_[0]; }
  // Usable bytes of a class's stacks.
  std::size_t class_size(unsigned cls) const noexcept { return class_bytes_[cls]; }
  // The smallest class holding `bytes` (0 when that is the default size's class). Throws
  // std::invalid_argument above kMaxClassBytes.
  unsigned class_for(std::size_t bytes) const;
  // For debuggers: kClasses sizes, indexed by class.
  const std::uint64_t* class_sizes() const noexcept { return class_bytes_; }
  std::size_t page_size() const noexcept { return page_; }
  bool guard_pages() const noexcept { return guard_; }
  // Guards are mprotect'ed pages (no MADV_GUARD_INSTALL): each stack is its own VMA.
  bool guards_split_vmas() const noexcept { return guard_by_mprotect_; }

  char* acquire(StackCache& cache, unsigned cls);  // lowest usable byte; aborts if out of memory
  void release(StackCache& cache, char* stack, unsigned cls);  // its fiber has finished
  void drain(StackCache& cache);  // moves a worker's caches to the shared pool
  // The worker is going idle: moves the oldest stacks beyond kIdleCacheKeep per class to the
  // shared pool (no lock taken unless there are any).
  void shed_idle_surplus(StackCache& cache);
  void trim();  // see the header comment

  std::uint64_t reserved_bytes() const noexcept;
  std::uint64_t cached() const noexcept;  // stacks in the shared pool (not worker caches)

 private:
  // Stacks first, first + slot_size, ... (count of them), freed and trimmed.
  struct CleanRun {
    char* first;
    std::size_t count;
  };
  struct SizeClass {
    std::vector<char*> dirty;      // freed, pages still committed
    std::vector<CleanRun> clean;   // freed and trimmed; sorted by address, neighbours merged
    std::size_t clean_stacks = 0;  // stacks in `clean`
    char* carve_next = nullptr;    // next unused slot of the newest region
    char* carve_end = nullptr;
    std::size_t dirty_low = 0;  // fewest dirty stacks since the last trim
    std::size_t hot_keep;       // surplus stacks the next trim keeps
    bool hot_shallow = false;   // no stack came into dirty since trim released its deep pages
  };
  std::size_t slot_size(unsigned cls) const noexcept {
    return class_bytes_[cls] + (guard_ ? page_ : 0);
  }
  // Takes up to `max` fresh slots (at least one) of the class's newest region, mapping one if
  // it is used up; returns how many, their first slot in *first (slot_size apart, no guards yet).
  std::size_t carve_locked(unsigned cls, std::size_t max, char** first)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void map_region_locked(unsigned cls) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends freed stacks (pages committed) to the class's dirty list.
  void add_dirty_locked(unsigned cls, std::vector<char*>::const_iterator first,
                        std::vector<char*>::const_iterator last) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds trimmed stacks, sorted by address (the caller sorts them outside mu_), to the class's
  // clean runs.
  void add_clean_locked(unsigned cls, const std::vector<char*>& stacks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves up to `max` clean stacks (at least one; the class must have some) into `out`.
  void take_clean_locked(unsigned cls, std::size_t max, std::vector<char*>& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  char* install_guard(char* slot) const;  // returns the stack's lowest usable byte
  void trim_class(unsigned cls);

  const std::size_t page_;
  std::uint64_t class_bytes_[kClasses];  // set once by the constructor, multiples of page_
  const bool guard_;
  // The kernel lacks MADV_GUARD_INSTALL. Set by the constructor (a probe), read-only after.
  bool guard_by_mprotect_ = false;

  mutable ThreadMutex mu_;
  std::vector<std::pair<char*, std::size_t>> regions_ ABSL_GUARDED_BY(mu_);
  SizeClass classes_[kClasses] ABSL_GUARDED_BY(mu_);
  std::uint64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
};

// A worker's private stack caches, one per class. Only its worker touches them.
class StackCache {
 public:
  static constexpr std::size_t kMax = 64;
  static constexpr std::size_t kIdleCacheKeep = 2;
  std::vector<char*> stacks[StackPool::kClasses];
};

}  // namespace weft::detail
