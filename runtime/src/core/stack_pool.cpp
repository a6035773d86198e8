// Stack pool implementation; the design is in stack_pool.hpp.
#include "core/stack_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace weft::detail {
namespace {

#ifndef MADV_GUARD_INSTALL
constexpr int MADV_GUARD_INSTALL = 102;
#endif

constexpr std::size_t kSlotsPerRegion = 256;
constexpr std::size_t kSharedHotStacks = 256;    // most shared stacks trim() keeps committed
constexpr std::size_t kSharedHotStacksMin = 16;  // what the hot set decays to when unused
constexpr std::size_t kRefillBatch = 16;

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "weft: %s\n", msg.c_str());
  std::abort();
}

long read_max_map_count() {
  std::ifstream f("/proc/sys/vm/max_map_count");
  long v = 65530;
  f >> v;
  return v;
}

long count_maps() {
  std::ifstream f("/proc/self/maps");
  long n = 0;
  std::string line;
  while (std::getline(f, line)) ++n;
  return n;
}

}  // namespace

StackPool::StackPool(std::size_t stack_size, bool guard_pages)
    : page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))),
      stack_size_((std::max<std::size_t>(stack_size, 2 * page_) + page_ - 1) / page_ * page_),
      slot_size_(stack_size_ + (guard_pages ? page_ : 0)),
      guard_(guard_pages),
      hot_keep_(kSharedHotStacks) {}

StackPool::~StackPool() {
  for (auto [base, len] : regions_) munmap(base, len);
}

void StackPool::map_region_locked() {
  const std::size_t len = slot_size_ * kSlotsPerRegion;
  if (guard_by_mprotect_) {
    // Each mprotect'ed guard splits the mapping: about 2 VMAs per stack. Fail with the reason
    // instead of letting mmap/mprotect return a bare ENOMEM later.
    const long limit = read_max_map_count();
    const long used = count_maps();
    if (used + 2 * static_cast<long>(kSlotsPerRegion) + 64 > limit) {
      die("cannot map more fiber stacks: guard pages made with mprotect (this kernel lacks "
          "MADV_GUARD_INSTALL, Linux >= 6.13) cost 2 memory mappings per stack and the process "
          "has " +
          std::to_string(used) + " of vm.max_map_count=" + std::to_string(limit) +
          ". Raise it (sysctl -w vm.max_map_count=1048576), run fewer fibers at once, or set "
          "weft::Options::guard_pages=false.");
    }
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    die("cannot reserve " + std::to_string(len >> 20) + " MiB for fiber stacks (" +
        std::to_string(reserved_ >> 20) + " MiB reserved so far): " + std::strerror(err) +
        ". Lower Options::stack_size or run fewer fibers at once.");
  }
  regions_.emplace_back(static_cast<char*>(p), len);
  reserved_ += len;
  carve_next_ = static_cast<char*>(p);
  carve_end_ = carve_next_ + len;
}

char* StackPool::carve_locked() {
  if (carve_next_ == carve_end_) map_region_locked();
  char* slot = carve_next_;
  carve_next_ += slot_size_;
  if (guard_) {
    if (!guard_by_mprotect_ && madvise(slot, page_, MADV_GUARD_INSTALL) != 0) {
      if (errno != EINVAL)
        die(std::string("madvise(MADV_GUARD_INSTALL) failed: ") + std::strerror(errno));
      guard_by_mprotect_ = true;
    }
    if (guard_by_mprotect_ && mprotect(slot, page_, PROT_NONE) != 0) {
      const int err = errno;
      die(std::string("mprotect of a fiber stack guard page failed: ") + std::strerror(err) +
          (err == ENOMEM ? " (likely vm.max_map_count; raise it with sysctl -w "
                           "vm.max_map_count=1048576 or set Options::guard_pages=false)"
                         : ""));
    }
    slot += page_;
  }
  return slot;
}

char* StackPool::acquire(StackCache& cache) {
  if (!cache.stacks.empty()) {
    char* s = cache.stacks.back();
    cache.stacks.pop_back();
    return s;
  }
  ThreadMutexLock lock(mu_);
  // Prefer stacks whose pages are still committed: touching them costs no page faults.
  for (auto* list : {&dirty_, &clean_}) {
    if (list->empty()) continue;
    const std::size_t n = std::min(kRefillBatch, list->size());
    cache.stacks.insert(cache.stacks.end(), list->end() - static_cast<std::ptrdiff_t>(n),
                        list->end());
    list->resize(list->size() - n);
    if (list == &dirty_ && dirty_.size() < dirty_low_) dirty_low_ = dirty_.size();
    char* s = cache.stacks.back();
    cache.stacks.pop_back();
    return s;
  }
  return carve_locked();
}

void StackPool::release(StackCache& cache, char* stack) {
  if (cache.stacks.size() < StackCache::kMax) {
    cache.stacks.push_back(stack);
    return;
  }
  // Keep the newest half (hottest), hand the older half to the shared pool.
  ThreadMutexLock lock(mu_);
  const std::size_t half = cache.stacks.size() / 2;
  dirty_.insert(dirty_.end(), cache.stacks.begin(),
                cache.stacks.begin() + static_cast<std::ptrdiff_t>(half));
  cache.stacks.erase(cache.stacks.begin(),
                     cache.stacks.begin() + static_cast<std::ptrdiff_t>(half));
  cache.stacks.push_back(stack);
}

void StackPool::drain(StackCache& cache) {
  ThreadMutexLock lock(mu_);
  dirty_.insert(dirty_.end(), cache.stacks.begin(), cache.stacks.end());
  cache.stacks.clear();
}

void StackPool::trim() {
  std::vector<char*> victims;
  {
    ThreadMutexLock lock(mu_);
    // Stacks that sat unused for the whole interval (the low water mark) are surplus. Keep a hot
    // set of them committed for the next burst, but halve it every interval that has surplus, so
    // that after a burst it decays to a few stacks within a second; an interval that used every
    // cached stack restores it.
    const std::size_t idle = std::min(dirty_low_, dirty_.size());
    dirty_low_ = dirty_.size();
    if (idle == 0) {
      hot_keep_ = kSharedHotStacks;
      return;
    }
    const std::size_t keep = hot_keep_;
    hot_keep_ = std::max(kSharedHotStacksMin, hot_keep_ / 2);
    if (idle <= keep) return;
    // The oldest entries sit at the front; acquire() takes from the back.
    const std::size_t n = idle - keep;
    victims.assign(dirty_.begin(), dirty_.begin() + static_cast<std::ptrdiff_t>(n));
    dirty_.erase(dirty_.begin(), dirty_.begin() + static_cast<std::ptrdiff_t>(n));
    dirty_low_ = dirty_.size();
  }
  // Outside the lock: madvise can take a while for many stacks.
  for (char* s : victims) madvise(s, stack_size_, MADV_DONTNEED);
  ThreadMutexLock lock(mu_);
  clean_.insert(clean_.end(), victims.begin(), victims.end());
}

std::uint64_t StackPool::reserved_bytes() const noexcept {
  ThreadMutexLock lock(mu_);
  return reserved_;
}

std::uint64_t StackPool::cached() const noexcept {
  ThreadMutexLock lock(mu_);
  return dirty_.size() + clean_.size();
}

}  // namespace weft::detail
