// Stack pool implementation; the design is in stack_pool.hpp.
#include "core/stack_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/vm_maps.hpp"
#include "weft/detail/assert.hpp"

namespace weft::detail {
namespace {

#ifndef MADV_GUARD_INSTALL
constexpr int MADV_GUARD_INSTALL = 102;
#endif

constexpr std::size_t kSlotsPerRegion = 256;
constexpr std::size_t kSharedHotStacks = 256;    // most shared stacks trim() keeps committed
constexpr std::size_t kSharedHotStacksMin = 16;  // what the hot set decays to when unused

// Capacity over twice the size (and past a few pages): fit it.
template <typename T>
void shrink_if_oversized(std::vector<T>& v) {
  if (v.capacity() * sizeof(T) > 4096 && v.capacity() > 2 * v.size()) v.shrink_to_fit();
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "weft: %s\n", msg.c_str());
  std::abort();
}

}  // namespace

StackPool::StackPool(std::size_t stack_size, bool guard_pages)
    : page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))), guard_(guard_pages) {
  auto round = [this](std::size_t n) {
    return (std::max(n, 2 * page_) + page_ - 1) / page_ * page_;
  };
  class_bytes_[0] = round(stack_size);
  for (unsigned c = 1; c < kClasses; ++c) class_bytes_[c] = round(std::size_t{8192} << (c - 1));
  for (SizeClass& sc : classes_) sc.hot_keep = kSharedHotStacks;
  if (guard_) {
    // Decided now, not at the first carve: the hibernator asks before any stack exists.
    void* probe = mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (probe != MAP_FAILED) {
      guard_by_mprotect_ = madvise(probe, page_, MADV_GUARD_INSTALL) != 0 && errno == EINVAL;
      munmap(probe, 2 * page_);
    }
  }
}

StackPool::~StackPool() {
  for (auto [base, len] : regions_) munmap(base, len);
}

unsigned StackPool::class_for(std::size_t bytes) const {
  if (bytes > kMaxClassBytes) {
    throw std::invalid_argument("weft: a fiber stack of " + std::to_string(bytes) +
                                " bytes was asked for; the largest is " +
                                std::to_string(kMaxClassBytes >> 20) + " MiB");
  }
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Sanitizers grow frames several times over (the default size has the same floor, in
  // resolve_options): sizes measured without them would overflow.
  bytes = std::max<std::size_t>(bytes, 256 * 1024);
#endif
  unsigned c = 1;
  while (c + 1 < kClasses && class_bytes_[c] < bytes) ++c;
  // The default class serves a request it fits when the power-of-two class would be no smaller,
  // so that asking for about the default costs no second set of regions.
  return bytes <= class_bytes_[0] && class_bytes_[0] <= class_bytes_[c] ? 0 : c;
}

void StackPool::map_region_locked(unsigned cls) {
  // About 16 MiB of address space per region (256 default-size stacks), at least 4 slots.
  const std::size_t slots =
      std::clamp<std::size_t>((std::size_t{16} << 20) / slot_size(cls), 4, kSlotsPerRegion);
  const std::size_t len = slot_size(cls) * slots;
  if (guard_by_mprotect_) {
    // Each mprotect'ed guard splits the mapping: about 2 VMAs per stack. Fail with the reason
    // instead of letting mmap/mprotect return a bare ENOMEM later.
    const long limit = vm_max_map_count();
    const long used = vm_map_count();
    if (used + 2 * static_cast<long>(slots) + 64 > limit) {
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
  classes_[cls].carve_next = static_cast<char*>(p);
  classes_[cls].carve_end = classes_[cls].carve_next + len;
}

std::size_t StackPool::carve_locked(unsigned cls, std::size_t max, char** first) {
  SizeClass& sc = classes_[cls];
  if (sc.carve_next == sc.carve_end) map_region_locked(cls);
  const std::size_t n =
      std::min(max, static_cast<std::size_t>(sc.carve_end - sc.carve_next) / slot_size(cls));
  *first = sc.carve_next;
  sc.carve_next += n * slot_size(cls);
  return n;
}

char* StackPool::install_guard(char* slot) const {
  if (!guard_) return slot;
  if (!guard_by_mprotect_ && madvise(slot, page_, MADV_GUARD_INSTALL) != 0) {
    die(std::string("madvise(MADV_GUARD_INSTALL) of a fiber stack guard page failed: ") +
        std::strerror(errno));
  }
  if (guard_by_mprotect_ && mprotect(slot, page_, PROT_NONE) != 0) {
    const int err = errno;
    die(std::string("mprotect of a fiber stack guard page failed: ") + std::strerror(err) +
        (err == ENOMEM ? " (likely vm.max_map_count; raise it with sysctl -w "
                         "vm.max_map_count=1048576 or set Options::guard_pages=false)"
                       : ""));
  }
  return slot + page_;
}

char* StackPool::acquire(StackCache& cache, unsigned cls) {
  std::vector<char*>& mine = cache.stacks[cls];
  if (!mine.empty()) {
    char* s = mine.back();
    mine.pop_back();
    return s;
  }
  char* first = nullptr;
  std::size_t n = 0;
  {
    ThreadMutexLock lock(mu_);
    SizeClass& sc = classes_[cls];
    // Prefer stacks whose pages are still committed: touching them costs no page faults.
    if (!sc.dirty.empty()) {
      const std::size_t k = std::min(kRefillBatch, sc.dirty.size());
      mine.insert(mine.end(), sc.dirty.end() - static_cast<std::ptrdiff_t>(k), sc.dirty.end());
      sc.dirty.resize(sc.dirty.size() - k);
      sc.dirty_low = std::min(sc.dirty_low, sc.dirty.size());
    } else if (sc.clean_stacks != 0) {
      take_clean_locked(cls, kRefillBatch, mine);
    }
    if (!mine.empty()) {
      char* s = mine.back();
      mine.pop_back();
      return s;
    }
    // Fresh slots, a batch at a time: their guards are installed below, outside the lock, so
    // workers spawning at once do not queue behind each other's madvise calls (the lock was
    // contended, and its futex waits and wakes were 15% of spawning 100k parked fibers).
    n = carve_locked(cls, kRefillBatch, &first);
  }
  // The cache pops from the back: the lowest slot goes first, as the slots were carved.
  for (std::size_t i = n; i-- > 1;) mine.push_back(install_guard(first + i * slot_size(cls)));
  return install_guard(first);
}

void StackPool::add_clean_locked(unsigned cls, const std::vector<char*>& stacks) {
  if (stacks.empty()) return;
  SizeClass& sc = classes_[cls];
  const std::size_t slot = slot_size(cls);
  WEFT_ASSERT(std::is_sorted(stacks.begin(), stacks.end()), "clean stacks added unsorted");
  std::vector<CleanRun> merged;
  merged.reserve(sc.clean.size() + 16);
  auto append = [&](char* first, std::size_t count) {
    if (!merged.empty() && merged.back().first + merged.back().count * slot == first) {
      merged.back().count += count;
    } else {
      merged.push_back({first, count});
    }
  };
  auto run = sc.clean.begin();
  for (char* s : stacks) {
    for (; run != sc.clean.end() && run->first < s; ++run) append(run->first, run->count);
    WEFT_ASSERT(run == sc.clean.end() || run->first != s, "a stack was trimmed twice");
    append(s, 1);
  }
  for (; run != sc.clean.end(); ++run) append(run->first, run->count);
  sc.clean.swap(merged);
  sc.clean_stacks += stacks.size();
}

void StackPool::take_clean_locked(unsigned cls, std::size_t max, std::vector<char*>& out) {
  SizeClass& sc = classes_[cls];
  CleanRun& run = sc.clean.back();
  const std::size_t k = std::min(max, run.count);
  // The cache pops from the back: the run's lowest stack goes first.
  run.count -= k;
  for (std::size_t i = k; i-- > 0;) out.push_back(run.first + (run.count + i) * slot_size(cls));
  sc.clean_stacks -= k;
  if (run.count == 0) sc.clean.pop_back();
}

void StackPool::release(StackCache& cache, char* stack, unsigned cls) {
  std::vector<char*>& mine = cache.stacks[cls];
  if (mine.size() < StackCache::kMax) {
    mine.push_back(stack);
    return;
  }
  // Keep the newest half (hottest), hand the older half to the shared pool.
  ThreadMutexLock lock(mu_);
  const auto half = static_cast<std::ptrdiff_t>(mine.size() / 2);
  add_dirty_locked(cls, mine.begin(), mine.begin() + half);
  mine.erase(mine.begin(), mine.begin() + half);
  mine.push_back(stack);
}

void StackPool::add_dirty_locked(unsigned cls, std::vector<char*>::const_iterator first,
                                 std::vector<char*>::const_iterator last) {
  SizeClass& sc = classes_[cls];
  sc.dirty.insert(sc.dirty.end(), first, last);
  sc.hot_shallow = false;  // stacks with deep pages committed again
}

void StackPool::drain(StackCache& cache) {
  ThreadMutexLock lock(mu_);
  for (unsigned c = 0; c < kClasses; ++c) {
    if (cache.stacks[c].empty()) continue;
    add_dirty_locked(c, cache.stacks[c].begin(), cache.stacks[c].end());
    cache.stacks[c].clear();
  }
}

void StackPool::shed_idle_surplus(StackCache& cache) {
  bool any = false;
  for (const auto& mine : cache.stacks) any |= mine.size() > StackCache::kIdleCacheKeep;
  if (!any) return;
  ThreadMutexLock lock(mu_);
  for (unsigned c = 0; c < kClasses; ++c) {
    std::vector<char*>& mine = cache.stacks[c];
    if (mine.size() <= StackCache::kIdleCacheKeep) continue;
    // The oldest go; the newest (hottest) stay for the next spawn.
    const auto surplus = static_cast<std::ptrdiff_t>(mine.size() - StackCache::kIdleCacheKeep);
    add_dirty_locked(c, mine.begin(), mine.begin() + surplus);
    mine.erase(mine.begin(), mine.begin() + surplus);
  }
}

void StackPool::trim() {
  for (unsigned c = 0; c < kClasses; ++c) trim_class(c);
}

void StackPool::trim_class(unsigned cls) {
  std::vector<char*> victims;
  bool shallow = false;  // victims are the hot set, keeping their top pages, not surplus
  {
    ThreadMutexLock lock(mu_);
    SizeClass& sc = classes_[cls];
    // Stacks that sat unused for the whole interval (the low water mark) are surplus. Keep a hot
    // set of them committed for the next burst, but halve it every interval that has surplus, so
    // that after a burst it decays to a few stacks within a second; an interval that used every
    // cached stack restores it.
    const std::size_t idle = std::min(sc.dirty_low, sc.dirty.size());
    sc.dirty_low = sc.dirty.size();
    if (idle == 0) {
      sc.hot_keep = kSharedHotStacks;
      return;
    }
    const std::size_t keep = sc.hot_keep;
    sc.hot_keep = std::max(kSharedHotStacksMin, sc.hot_keep / 2);
    if (idle <= keep) {
      // Quiet: the hot set is at its floor and none of it was used for a whole interval. Its
      // stacks keep their top page (a new fiber's first frames, what every spawn touches) and
      // give back the pages below, once: the deep frames of the burst that used them last
      // (8-12 KB each for a connection's fiber) are unlikely to be the next fiber's.
      if (keep > kSharedHotStacksMin || sc.hot_shallow || idle < sc.dirty.size()) return;
      victims.swap(sc.dirty);
      sc.hot_shallow = true;
      shallow = true;
    } else {
      // The oldest entries sit at the front; acquire() takes from the back.
      const std::size_t n = idle - keep;
      victims.assign(sc.dirty.begin(), sc.dirty.begin() + static_cast<std::ptrdiff_t>(n));
      sc.dirty.erase(sc.dirty.begin(), sc.dirty.begin() + static_cast<std::ptrdiff_t>(n));
      sc.dirty_low = sc.dirty.size();
    }
  }
  // Outside the lock: madvise can take a while for many stacks. The stacks are off the lists
  // meanwhile, so no fiber runs on them.
  const std::size_t len = class_bytes_[cls] - (shallow ? page_ : 0);
  for (char* s : victims) madvise(s, len, MADV_DONTNEED);
  if (!shallow) std::sort(victims.begin(), victims.end());  // add_clean_locked wants them sorted
  ThreadMutexLock lock(mu_);
  SizeClass& sc = classes_[cls];
  if (shallow) {
    // Back as the oldest: stacks freed meanwhile are hotter.
    sc.dirty.insert(sc.dirty.begin(), victims.begin(), victims.end());
    sc.dirty_low = sc.dirty.size();
  } else {
    add_clean_locked(cls, victims);
  }
  // A burst grew the dirty list (it held every stack of the burst on its way to clean), and
  // both lists are heap blocks: fit them to what they hold, or a burst's list stays resident.
  shrink_if_oversized(sc.dirty);
  shrink_if_oversized(sc.clean);
}

std::uint64_t StackPool::reserved_bytes() const noexcept {
  ThreadMutexLock lock(mu_);
  return reserved_;
}

std::uint64_t StackPool::cached() const noexcept {
  ThreadMutexLock lock(mu_);
  std::uint64_t n = 0;
  for (const SizeClass& sc : classes_) n += sc.dirty.size() + sc.clean_stacks;
  return n;
}

}  // namespace weft::detail
