// HeapReturn: gives the C allocator's free pages back to the kernel once a burst is over, so that
// RSS follows the load (Go's background scavenger does this for Go's heap).
//
// Why: glibc keeps what a program frees in its arenas for reuse. Fiber stacks are trimmed by the
// stack pool, but a burst of connections also allocates channel rings, strings, socket buffers'
// user-space copies and the like on the workers' arenas; freed, they stay resident (an example
// server measured 6 MB before 8,000 idle clients came and went and 560 MB ten seconds after).
// malloc_trim(0) returns every free page of every arena (MADV_DONTNEED), and brought that server
// back to 17 MB. Before it, the fiber-header allocator's global cache beyond a few batches goes
// back to malloc (FiberAlloc::release_cached): cached headers would pin their arena pages.
//
// When: the monitor calls tick() every 100 ms with the number of live fibers. A trim runs
//  - kSettleNs after the live fibers fell from their peak since the last trim by a quarter (and
//    at least kMinDrop), if they stayed that low and did not rise meanwhile: a burst of
//    connections has ended. The
//    burst's teardown may still be freeing (queued messages, buffers released as the last
//    handles go), so kFollowUps more trims follow, kSettleNs apart;
//  - and, so that memory freed without fibers ending (a cache emptied, a big request done) also
//    goes back, every `interval` (Options::heap_return_interval).
// Never on a worker: the monitor runs it. Its cost is a walk over the arenas' free lists, with each
// arena's lock held in turn (allocations in that arena wait), so it runs rarely, not per tick.
// Owned by the monitor thread alone.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::detail {

class HeapReturn {
 public:
  // interval_ns 0: never (neither trigger).
  explicit HeapReturn(std::int64_t interval_ns) noexcept : interval_ns_(interval_ns) {}
  // Trims if one of the triggers above holds. Returns whether it trimmed.
  bool tick(std::int64_t now, std::uint64_t live_fibers);
  std::uint64_t trims() const noexcept { return trims_; }

  static constexpr std::uint64_t kMinDrop = 256;
  static constexpr std::int64_t kSettleNs = 1'000'000'000;
  static constexpr std::size_t kKeepFiberBatches = 4;  // FiberAlloc batches kept (256 headers)
  static constexpr int kFollowUps = 4;

 private:
  const std::int64_t interval_ns_;
  std::int64_t last_trim_ = 0;
  std::int64_t last_rise_ = 0;  // when the live count last went up
  std::int64_t fell_at_ = 0;    // when it fell a quarter below the peak (0: it has not)
  std::uint64_t last_live_ = 0;
  std::uint64_t peak_ = 0;  // most live fibers since the last trim
  int follow_ups_ = 0;      // trims still due after a burst
  std::uint64_t trims_ = 0;
};

}  // namespace weft::detail
