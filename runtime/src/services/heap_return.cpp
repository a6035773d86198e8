// HeapReturn; design in heap_return.hpp.
#include "services/heap_return.hpp"

#include <malloc.h>

#include <algorithm>

#include "core/fiber_alloc.hpp"

namespace weft::detail {

bool HeapReturn::tick(std::int64_t now, std::uint64_t live) {
  if (interval_ns_ <= 0) return false;
  if (last_trim_ == 0) last_trim_ = now;
  if (live > last_live_) last_rise_ = now;
  last_live_ = live;
  peak_ = std::max(peak_, live);
  const std::uint64_t drop = peak_ - live;
  const bool fallen = drop >= kMinDrop && drop * 4 >= peak_;
  if (!fallen) {
    fell_at_ = 0;
  } else if (fell_at_ == 0) {
    fell_at_ = now;
  }
  const bool burst_over = fallen && now - fell_at_ >= kSettleNs && now - last_rise_ >= kSettleNs;
  const bool follow_up = follow_ups_ > 0 && now - last_trim_ >= kSettleNs;
  if (!burst_over && !follow_up && now - last_trim_ < interval_ns_) return false;
  if (burst_over) {
    follow_ups_ = kFollowUps;
  } else if (follow_up) {
    --follow_ups_;
  }
  // Fiber headers cached beyond a few batches go back to malloc first, or they would pin the
  // arena pages they sit in.
  FiberAlloc::release_cached(kKeepFiberBatches);
  malloc_trim(0);
  last_trim_ = now;
  peak_ = live;
  ++trims_;
  return true;
}

}  // namespace weft::detail
