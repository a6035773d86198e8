// HeapReturn; design in heap_return.hpp.
#include "services/heap_return.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/fiber_alloc.hpp"
#include "weft/detail/memory_return.hpp"

namespace weft::detail {
namespace {

std::int64_t rss_from_statm() {
  const int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[128];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  long long size = 0, resident = 0;
  if (std::sscanf(buf, "%lld %lld", &size, &resident) != 2) return -1;
  return resident * sysconf(_SC_PAGESIZE);
}

std::atomic<MemoryReturner> g_returners[kMaxMemoryReturners];

void release_free_memory() {
  run_memory_returners();
  // Fiber headers cached beyond a few batches go back to malloc first, or they would pin the
  // arena pages they sit in.
  FiberAlloc::release_cached(HeapReturn::kKeepFiberBatches);
  malloc_trim(0);
}

}  // namespace

void register_memory_returner(MemoryReturner fn) noexcept {
  for (auto& slot : g_returners) {
    MemoryReturner cur = nullptr;
    if (slot.compare_exchange_strong(cur, fn, std::memory_order_acq_rel) || cur == fn) return;
  }
  std::fprintf(stderr, "weft: more than %d memory returners registered\n", kMaxMemoryReturners);
  std::abort();
}

void run_memory_returners() noexcept {
  for (auto& slot : g_returners) {
    if (MemoryReturner fn = slot.load(std::memory_order_acquire)) fn();
  }
}

bool HeapReturn::tune_allocator() noexcept {
  static const bool tuned = [] {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    const bool user_set = std::getenv("MALLOC_TRIM_THRESHOLD_") || std::getenv("MALLOC_TOP_PAD_") ||
                          std::getenv("MALLOC_MMAP_THRESHOLD_") ||
                          (tunables && (std::strstr(tunables, "glibc.malloc.trim_threshold") ||
                                        std::strstr(tunables, "glibc.malloc.top_pad") ||
                                        std::strstr(tunables, "glibc.malloc.mmap_threshold")));
    if (user_set) return false;
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
    mallopt(M_TOP_PAD, 0);
    return true;
  }();
  return tuned;
}

HeapReturn::Hooks HeapReturn::real_hooks() noexcept {
  return Hooks{&rss_from_statm, &release_free_memory};
}

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
  const bool periodic = now - last_trim_ >= period_ns_;
  if (!burst_over && !follow_up && !periodic) return false;
  if (burst_over) {
    follow_ups_ = kFollowUps;
  } else if (follow_up) {
    --follow_ups_;
  }
  const std::int64_t before = hooks_.rss_bytes();
  hooks_.release();
  const std::int64_t returned = before - hooks_.rss_bytes();
  if (burst_over || follow_up || returned >= std::max(kWorthwhileBytes, before / 16)) {
    period_ns_ = interval_ns_;
  } else {
    period_ns_ = std::min(period_ns_ * 2, interval_ns_ * kMaxBackoff);
  }
  last_trim_ = now;
  peak_ = live;
  ++trims_;
  return true;
}

}  // namespace weft::detail
