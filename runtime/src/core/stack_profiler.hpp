// StackProfiler: records how much stack each fiber really used, for sizing Options::stack_size
// (Options::stack_profile / $WEFT_STACK_PROFILE; report with tools/stackprof/weft-stackprof).
//
// Method: zero is the paint. Stacks start as fresh anonymous memory (all zero, mostly not even
// resident). When a fiber ends, mincore() finds the deepest resident page of its stack (stacks
// grow down; pages below were never touched), and a scan upward from there finds the lowest
// non-zero word: the high-water mark. The profiler then zeroes what the fiber dirtied, so the
// next fiber on that stack starts from all-zero memory again (pages trimmed by the pool come
// back zero from the kernel).
// Why not painting with a pattern: painting writes every page of every stack, committing memory
// the fibers never need (a 64 KiB stack per fiber instead of the one page most use) and costing
// a full stack of writes per fiber. Why not dropping pages (MADV_DONTNEED) per fiber and counting
// resident pages: each drop is a TLB shootdown across the workers, about 100x slower,
// and it is page-granular. The zero scan can under-report by the bytes of a frame that only ever
// stored zeros at its very bottom: far below the page-sized margins stacks are sized with.
// Fibers that end by shutdown unwinding are recorded too (they are the fibers alive at exit).
//
// Cost: nothing when off (one pointer test when a fiber ends; nothing on the switch path). When
// on: one mincore, a short scan and a memset of the used bytes per finished fiber, and a
// mutex-protected histogram update.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "weft/detail/thread_mutex.hpp"

namespace weft::detail {

class StackProfiler {
 public:
  StackProfiler(std::string path, std::size_t stack_size);
  ~StackProfiler();  // writes the profile
  StackProfiler(const StackProfiler&) = delete;
  StackProfiler& operator=(const StackProfiler&) = delete;

  // A fiber that ran on `stack` (`size` usable bytes) has finished (any worker); the stack is
  // not reused yet. Also zeroes what the fiber dirtied.
  void record(const std::string* name, char* stack, std::size_t size, bool unwound) noexcept;

 private:
  struct PerName {
    std::uint64_t count = 0;
    std::uint64_t unwound = 0;
    std::size_t max = 0;
    std::size_t stack_size = 0;                 // the largest stack a fiber of this name ran on
    std::map<std::size_t, std::uint64_t> used;  // bytes rounded up to 64 -> fibers
  };
  // Bytes used below the top; the lowest dirty address in *low.
  std::size_t high_water(char* stack, std::size_t size, char** low) const noexcept;
  void write() const;

  const std::string path_;
  const std::size_t stack_size_;  // the default (Options::stack_size)
  const std::size_t page_;
  mutable ThreadMutex mu_;
  std::map<std::string, PerName> by_name_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft::detail
