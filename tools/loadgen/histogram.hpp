// LatencyHistogram: log-linear buckets (HdrHistogram's idea, 1/32 relative precision) from 1 ns
// to ~18 min, fixed size (10 KiB), no allocation and no lock on record(): counters are relaxed
// atomics, so connection fibers on any worker share a few histograms (sharded by connection to
// keep cache-line contention low; 100k connections cannot afford one each) and merge at the end.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

namespace loadgen {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 5;  // 32 sub-buckets per power of two: ~3% error
  static constexpr int kSub = 1 << kSubBits;
  static constexpr int kMaxExp = 40;  // up to 2^40 ns, ~18 minutes
  static constexpr int kBuckets = (kMaxExp + 1) * kSub;

  void record(std::uint64_t ns) noexcept {
    counts_[index_of(ns)].fetch_add(1, std::memory_order_relaxed);
  }
  void merge(const LatencyHistogram& o) noexcept {
    for (int i = 0; i < kBuckets; ++i) {
      const std::uint64_t c = o.counts_[i].load(std::memory_order_relaxed);
      counts_[i].fetch_add(c, std::memory_order_relaxed);
      total_ += c;
    }
  }
  // Valid on a histogram that received merge()s only.
  std::uint64_t count() const noexcept { return total_; }
  // Calls f(value_ns, count) for every non-empty bucket, in increasing value (bucket midpoint).
  template <class F>
  void for_each_bucket(F f) const {
    for (int i = 0; i < kBuckets; ++i) {
      const std::uint64_t c = counts_[i].load(std::memory_order_relaxed);
      if (c) f(value_of(i), c);
    }
  }
  // The value below which a fraction q (0..1) of the samples lie (bucket midpoint).
  std::uint64_t quantile(double q) const noexcept {
    if (total_ == 0) return 0;
    auto rank = static_cast<std::uint64_t>(q * static_cast<double>(total_));
    if (rank >= total_) rank = total_ - 1;
    std::uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts_[i].load(std::memory_order_relaxed);
      if (seen > rank) return value_of(i);
    }
    return value_of(kBuckets - 1);
  }

 private:
  static int index_of(std::uint64_t ns) noexcept {
    if (ns < kSub) return static_cast<int>(ns);
    const int exp = 63 - std::countl_zero(ns);  // ns in [2^exp, 2^(exp+1))
    if (exp > kMaxExp) return kBuckets - 1;
    const int shift = exp - kSubBits;
    const int sub = static_cast<int>((ns >> shift) & (kSub - 1));
    return (exp - kSubBits + 1) * kSub + sub;
  }
  static std::uint64_t value_of(int index) noexcept {
    if (index < kSub) return static_cast<std::uint64_t>(index);
    const int exp = index / kSub + kSubBits - 1;
    const int sub = index % kSub;
    const int shift = exp - kSubBits;
    const std::uint64_t lo = (std::uint64_t{1} << exp) | (static_cast<std::uint64_t>(sub) << shift);
    return lo + (std::uint64_t{1} << shift) / 2;
  }

  std::array<std::atomic<std::uint64_t>, kBuckets> counts_{};
  std::uint64_t total_ = 0;
};

}  // namespace loadgen
