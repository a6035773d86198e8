// The descriptor table; design in desc_table.hpp.
#include "desc_table.hpp"

#include <absl/base/thread_annotations.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <new>

#include "weft/detail/assert.hpp"
#include "weft/detail/memory_return.hpp"
#include "weft/detail/thread_mutex.hpp"

namespace weft::net::detail {

// ---- IndexBitmap ---------------------------------------------------------------------------

namespace {
constexpr std::uint64_t kAll = ~std::uint64_t{0};
std::uint64_t* zeroed_words(std::size_t n) {
  auto* p = static_cast<std::uint64_t*>(std::calloc(n, sizeof(std::uint64_t)));
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

IndexBitmap::IndexBitmap(std::uint32_t n)
    : n_(n),
      nwords_((n + 63) / 64),
      nsummary_((nwords_ + 63) / 64),
      used_(zeroed_words(nwords_)),
      full_(zeroed_words(nsummary_)) {
  WEFT_ASSERT(n_ > 0, "an empty IndexBitmap");
  // Bits past the end count as taken, so take() needs no bound checks.
  if (n_ % 64) used_[nwords_ - 1] = kAll << (n_ % 64);
  if (nwords_ % 64) full_[nsummary_ - 1] = kAll << (nwords_ % 64);
}

IndexBitmap::~IndexBitmap() {
  std::free(used_);
  std::free(full_);
}

std::int64_t IndexBitmap::take() noexcept {
  for (std::uint32_t s = hint_; s < nsummary_; ++s) {
    const std::uint64_t open = ~full_[s];
    if (open == 0) continue;
    hint_ = s;
    const std::uint32_t w = s * 64 + static_cast<std::uint32_t>(std::countr_zero(open));
    const int b = std::countr_zero(~used_[w]);
    used_[w] |= std::uint64_t{1} << b;
    if (used_[w] == kAll) full_[s] |= std::uint64_t{1} << (w % 64);
    return static_cast<std::int64_t>(w) * 64 + b;
  }
  hint_ = nsummary_;
  return -1;
}

void IndexBitmap::put(std::uint32_t i) noexcept {
  WEFT_ASSERT(i < n_ && taken(i), "IndexBitmap::put of a free index");
  const std::uint32_t w = i / 64;
  used_[w] &= ~(std::uint64_t{1} << (i % 64));
  full_[w / 64] &= ~(std::uint64_t{1} << (w % 64));
  hint_ = std::min(hint_, w / 64);
}

bool IndexBitmap::taken(std::uint32_t i) const noexcept { return (used_[i / 64] >> (i % 64)) & 1; }

bool IndexBitmap::any_taken(std::uint32_t lo, std::uint32_t hi) const noexcept {
  hi = std::min(hi, n_);
  while (lo < hi) {
    const std::uint32_t w = lo / 64;
    const std::uint32_t end = std::min(hi, (w + 1) * 64);  // this word's part of [lo, hi)
    const std::uint32_t width = end - lo;
    const std::uint64_t mask = (width == 64 ? kAll : ((std::uint64_t{1} << width) - 1))
                               << (lo % 64);
    if (used_[w] & mask) return true;
    lo = end;
  }
  return false;
}

// ---- the table -----------------------------------------------------------------------------

namespace {

weft::detail::ThreadMutex g_table_mu;
// Published once, under g_table_mu, before any descriptor is handed out; read without the lock.
std::atomic<char*> g_base{nullptr};
std::atomic<std::uint32_t> g_capacity{0};
IndexBitmap* g_used ABSL_GUARDED_BY(g_table_mu) = nullptr;
// Bit p: page p is committed (a descriptor on it was used since it was last given back).
std::uint64_t* g_committed ABSL_GUARDED_BY(g_table_mu) = nullptr;
std::size_t g_committed_pages ABSL_GUARDED_BY(g_table_mu) = 0;
std::uint32_t g_pages_built ABSL_GUARDED_BY(g_table_mu) = 0;  // pages whose PollDescs exist
std::uint32_t g_next_seq ABSL_GUARDED_BY(g_table_mu) = 1;     // odd: a live seq is never 0
std::atomic<std::size_t> g_in_use{0};

PollDesc* at(char* base, std::uint32_t index) noexcept {
  return reinterpret_cast<PollDesc*>(base + std::size_t{index / kPerPage} * kDescPage +
                                     std::size_t{index % kPerPage} * sizeof(PollDesc));
}

void release_memory() noexcept { desc_table_release(); }

// Reserves the mapping and the bitmaps. False (errno set) if it cannot.
bool reserve_table() ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_table_mu) {
  rlimit rl{};
  std::uint64_t cap = kMaxDescs;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY) {
    // Plus some: finish_close closes the fd before it frees the descriptor, so for a moment an
    // fd number may already serve a new descriptor while its old one is still in use.
    cap = std::clamp<std::uint64_t>(rl.rlim_max + kMinDescs, kMinDescs, kMaxDescs);
  }
  const auto capacity = static_cast<std::uint32_t>(cap);
  const std::size_t pages = (capacity + kPerPage - 1) / kPerPage;
  void* base = mmap(nullptr, pages * kDescPage, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return false;
  try {
    g_used = new IndexBitmap(capacity);
    g_committed = zeroed_words((pages + 63) / 64);
  } catch (const std::bad_alloc&) {
    delete g_used;
    g_used = nullptr;
    munmap(base, pages * kDescPage);
    errno = ENOMEM;
    return false;
  }
  g_capacity.store(capacity, std::memory_order_release);
  g_base.store(static_cast<char*>(base), std::memory_order_release);
  weft::detail::register_memory_returner(&release_memory);
  return true;
}

bool committed(std::uint32_t page) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_table_mu) {
  return (g_committed[page / 64] >> (page % 64)) & 1;
}

}  // namespace

PollDesc* desc_alloc() noexcept {
  weft::detail::ThreadMutexLock lock(g_table_mu);
  if (!g_used && !reserve_table()) return nullptr;
  const std::int64_t taken = g_used->take();
  if (taken < 0) {
    errno = EMFILE;
    return nullptr;
  }
  const auto index = static_cast<std::uint32_t>(taken);
  char* base = g_base.load(std::memory_order_relaxed);
  const std::uint32_t page = index / kPerPage;
  // Lowest first: a page is built only once every page below it was.
  WEFT_ASSERT(page <= g_pages_built, "descriptor table pages built out of order");
  if (page == g_pages_built) {
    for (std::uint32_t i = 0; i < kPerPage; ++i) new (at(base, page * kPerPage + i)) PollDesc;
    ++g_pages_built;
  }
  if (!committed(page)) {
    g_committed[page / 64] |= std::uint64_t{1} << (page % 64);
    ++g_committed_pages;
  }
  PollDesc* pd = at(base, index);
  pd->index = index;
  pd->seq.store(g_next_seq, std::memory_order_release);
  g_next_seq += 2;
  g_in_use.fetch_add(1, std::memory_order_relaxed);
  return pd;
}

void desc_free(PollDesc* pd) noexcept {
  weft::detail::ThreadMutexLock lock(g_table_mu);
  pd->seq.store(0, std::memory_order_release);
  g_used->put(pd->index);
  g_in_use.fetch_sub(1, std::memory_order_relaxed);
}

PollDesc* desc_at(std::uint32_t index) noexcept {
  if (index >= g_capacity.load(std::memory_order_acquire)) return nullptr;
  return at(g_base.load(std::memory_order_acquire), index);
}

std::size_t desc_table_release() noexcept {
  weft::detail::ThreadMutexLock lock(g_table_mu);
  if (!g_used) return 0;
  char* base = g_base.load(std::memory_order_relaxed);
  std::size_t given = 0;
  std::uint32_t run = 0, run_len = 0;  // pages [run, run + run_len) to give back
  auto flush = [&] {
    if (run_len == 0) return;
    // Cannot fail on a private anonymous mapping of ours; if it did, the pages stay committed.
    if (madvise(base + std::size_t{run} * kDescPage, std::size_t{run_len} * kDescPage,
                MADV_DONTNEED) == 0) {
      given += std::size_t{run_len} * kDescPage;
    }
    run_len = 0;
  };
  for (std::uint32_t page = kKeepPages; page < g_pages_built; ++page) {
    if (!committed(page) || g_used->any_taken(page * kPerPage, (page + 1) * kPerPage)) {
      flush();
      continue;
    }
    g_committed[page / 64] &= ~(std::uint64_t{1} << (page % 64));
    --g_committed_pages;
    if (run_len == 0) run = page;
    ++run_len;
  }
  flush();
  return given;
}

std::size_t desc_table_committed_pages() noexcept {
  weft::detail::ThreadMutexLock lock(g_table_mu);
  return g_committed_pages;
}

std::size_t desc_table_in_use() noexcept { return g_in_use.load(std::memory_order_relaxed); }

}  // namespace weft::net::detail
