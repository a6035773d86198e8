// The descriptor table: where PollDescs live, how an index (carried in epoll's data) finds one,
// and how their memory follows the load.
//
// Storage. One mapping, reserved once for `capacity` descriptors: the process's hard fd limit
// (a live descriptor holds an fd) plus kMinDescs, at most kMaxDescs. A process that raises its
// hard limit later than its first socket gets EMFILE past the capacity. It is virtual
// (MAP_NORESERVE): a page is committed when a descriptor on it is first used. kPerPage
// descriptors fill a 4 KiB page and none straddles two, so every page can be given back alone.
// Descriptors are type-stable: never unmapped and never destroyed, so a stale reader (an epoll
// event harvested just before its fd was closed, a select that outlived its socket) always reads
// a PollDesc, whose seq tells it the descriptor is no longer its own.
//
// Seqs. desc_alloc gives each descriptor it hands out a seq from one process-wide counter (odd
// numbers: never 0), and a freed descriptor's seq is 0. So a token (index, seq) names one use of
// one descriptor; no reuse of the index, and no page read back as zeros, can match it again.
//
// Allocation: the lowest free index first (IndexBitmap), so live descriptors stay packed at the
// bottom of the table and a burst's descriptors, once closed, leave whole pages free. (The
// table used to reuse the longest-freed descriptor, so that a stale event was less likely to
// find its descriptor in use again; with seqs that never repeat that no longer matters.)
//
// Giving memory back. desc_table_release() returns (MADV_DONTNEED) every committed page above
// the first kKeepPages whose descriptors are all free; the runtime's heap return calls it (on
// the monitor thread, once a burst is over and periodically: weft/detail/memory_return.hpp). The
// kernel reads such a page back as zeros, and zero bytes are a free descriptor for everything a
// stale reader touches -- seq 0 matches no token, refs 0 is refused by poll_io_begin, a slot 0
// is kEmpty -- and for the members nobody else touches (glibc's mutex, flags, counters);
// desc_alloc sets index and seq, and poll_open every other field a use depends on. A stale atomic
// write racing with the release (an edge for a closed fd) only commits that page again, and it
// lands in a free descriptor either way.
//
// Locking: g_table_mu (desc_table.cpp) guards the bitmaps, the page states and the seq counter;
// lookups by index (desc_at) take no lock: the mapping and the capacity are fixed once published.
#pragma once

#include <cstddef>
#include <cstdint>

#include "poll_desc.hpp"

namespace weft::net::detail {

// Which indexes of [0, n) are taken; take() returns the lowest free one. Two levels: a bit per
// index, and a bit per 64-index word saying the word is full, so take() passes full words 64 at
// a time, from a hint below which every summary word is full. The words are calloc'd: a large
// bitmap's untouched pages stay uncommitted. Not thread-safe: the table's lock guards it.
class IndexBitmap {
 public:
  explicit IndexBitmap(std::uint32_t n);  // all free; throws std::bad_alloc
  ~IndexBitmap();
  IndexBitmap(const IndexBitmap&) = delete;
  IndexBitmap& operator=(const IndexBitmap&) = delete;

  std::int64_t take() noexcept;        // the lowest free index, now taken; -1 if none is free
  void put(std::uint32_t i) noexcept;  // frees i, which was taken
  bool taken(std::uint32_t i) const noexcept;
  bool any_taken(std::uint32_t lo, std::uint32_t hi) const noexcept;  // in [lo, hi)
  std::uint32_t size() const noexcept { return n_; }

 private:
  std::uint32_t n_;
  std::uint32_t nwords_;    // words of used_
  std::uint32_t nsummary_;  // words of full_
  std::uint64_t* used_;     // bit i: index i taken (bits past n_ are set: never free)
  std::uint64_t* full_;     // bit w: used_[w] is all ones (bits past nwords_ are set)
  std::uint32_t hint_ = 0;  // full_ words below it are all ones
};

inline constexpr std::size_t kDescPage = 4096;
inline constexpr std::uint32_t kPerPage = kDescPage / sizeof(PollDesc);
static_assert(kPerPage >= 8, "a PollDesc grew past an eighth of a page");
inline constexpr std::uint32_t kMinDescs = 1024;
inline constexpr std::uint32_t kMaxDescs = 1u << 22;
inline constexpr std::uint32_t kKeepPages = 16;  // never given back: a small server's working set

// A free descriptor, with its index and a fresh seq set; null (errno EMFILE)
// when all `capacity` are in use, or ENOMEM when the table cannot be reserved.
PollDesc* desc_alloc() noexcept;
// Frees `pd` (its seq becomes 0): the last reference to it is gone.
void desc_free(PollDesc* pd) noexcept;
// The descriptor at a table index (whatever its state), or null past the table.
PollDesc* desc_at(std::uint32_t index) noexcept;
// Gives back the committed pages (beyond the first kKeepPages) whose descriptors are all free.
// Returns the bytes given back.
std::size_t desc_table_release() noexcept;
// Pages of the table committed (used since they were last given back), and descriptors in use.
std::size_t desc_table_committed_pages() noexcept;
std::size_t desc_table_in_use() noexcept;

}  // namespace weft::net::detail
