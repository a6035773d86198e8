// HeapReturn: gives the C allocator's free pages back to the kernel once a burst is over, so that
// RSS follows the load (Go's background scavenger does this for Go's heap).
//
// Why: glibc keeps what a program frees in its arenas for reuse. Fiber stacks are trimmed by the
// stack pool, but a burst of connections also allocates channel rings, strings, socket buffers'
// user-space copies and the like on the workers' arenas; freed, they stay resident (an example
// server measured 6 MB before 8,000 idle clients came and went and 560 MB ten seconds after).
// malloc_trim(0) returns every free page of every arena (MADV_DONTNEED), and brought that server
// back to 17 MB. Before it, the fiber-header allocator's global cache beyond a few batches goes
// back to malloc (FiberAlloc::release_cached): cached headers would pin their arena pages. And
// before both, the layers above give back what they hold (weft/detail/memory_return.hpp: the
// netpoller's descriptor table).
//
// Cost: malloc_trim walks every free chunk of every arena with that arena's lock held, and
// allocations in that arena wait meanwhile. On a fragmented heap that is long: 1.5M free chunks
// in a 540 MB heap took 100-300 ms per call on a 2-vCPU host, whether or not anything was left
// to return. So it runs on the monitor, never on a worker, and rarely:
//
// When: the monitor calls tick() every 100 ms with the number of live fibers. A trim runs
//  - kSettleNs after the live fibers fell from their peak since the last trim by a quarter (and
//    at least kMinDrop), if they stayed that low and did not rise meanwhile: a burst of
//    connections has ended, and the load with it. The teardown may still be freeing (queued
//    messages, buffers released as the last handles go), so kFollowUps more trims follow,
//    kSettleNs apart;
//  - and, so that memory freed without fibers ending (a cache emptied) also goes back, once a
//    period, which starts at `interval` (Options::heap_return_interval). A periodic trim that
//    gave back little (under kWorthwhileBytes and 1/16 of RSS) doubles the period, up to
//    kMaxBackoff times the interval, so a steady, fragmented heap is not walked every interval;
//    one that gave back more, or a burst's trim, resets it.
// The tops of the arenas: malloc_trim gives back free chunks inside every arena, but the free top
// of a thread's arena (not the main one) shrinks only in free(), when the top outgrows glibc's
// trim threshold, down to its top pad (128 KiB). glibc also raises that threshold, up to 64 MiB,
// each time a program frees a large mmap'ed block: one 230 KB list freed on the monitor thread
// left that thread's arena with 256 KB of free top resident for good, and each worker's arena
// 100-250 KB more after 10,000 chat clients left. So tune_allocator() (called once the heap
// return is on) holds the threshold at glibc's own default, 128 KiB, which also keeps blocks from
// 128 KiB up in their own mappings, and drops the top pad to 0, so a free top past the threshold
// goes back whole. Settings made through the environment (MALLOC_TRIM_THRESHOLD_,
// MALLOC_TOP_PAD_, MALLOC_MMAP_THRESHOLD_, or GLIBC_TUNABLES) win: it then changes nothing. A
// program's own earlier mallopt calls cannot be seen (glibc has no call to read them back), so
// docs/api.md asks it to make them after the runtime has started.
// Owned by the monitor thread alone.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::detail {

class HeapReturn {
 public:
  struct Hooks {
    std::int64_t (*rss_bytes)();  // the process's resident bytes now
    void (*release)();  // the memory returners, FiberAlloc::release_cached, then malloc_trim(0)
  };
  static Hooks real_hooks() noexcept;
  // The mallopt settings above, once per process; false when the environment had its own.
  static bool tune_allocator() noexcept;

  // interval_ns 0: never (neither trigger).
  explicit HeapReturn(std::int64_t interval_ns, Hooks hooks = real_hooks()) noexcept
      : interval_ns_(interval_ns), period_ns_(interval_ns), hooks_(hooks) {}
  // Trims if one of the triggers above holds. Returns whether it trimmed.
  bool tick(std::int64_t now, std::uint64_t live_fibers);
  std::uint64_t trims() const noexcept { return trims_; }
  std::int64_t period_ns() const noexcept { return period_ns_; }

  static constexpr std::uint64_t kMinDrop = 256;
  static constexpr std::int64_t kSettleNs = 1'000'000'000;
  // FiberAlloc batches kept: none, as each cached header pins a page of the heap (fiber_alloc.hpp).
  static constexpr std::size_t kKeepFiberBatches = 0;
  static constexpr int kFollowUps = 4;
  static constexpr std::int64_t kWorthwhileBytes = 1 << 20;
  static constexpr std::int64_t kMaxBackoff = 32;

 private:
  const std::int64_t interval_ns_;
  std::int64_t period_ns_;  // the periodic trigger's current period
  const Hooks hooks_;
  std::int64_t last_trim_ = 0;
  std::int64_t last_rise_ = 0;  // when the live count last went up
  std::int64_t fell_at_ = 0;    // when it fell a quarter below the peak (0: it has not)
  std::uint64_t last_live_ = 0;
  std::uint64_t peak_ = 0;  // most live fibers since the last trim
  int follow_ups_ = 0;      // trims still due after a burst
  std::uint64_t trims_ = 0;
};

}  // namespace weft::detail
