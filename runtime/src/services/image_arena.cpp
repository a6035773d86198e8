// ImageArena; design in image_arena.hpp.
#include "services/image_arena.hpp"

#include <sanitizer/asan_interface.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "weft/detail/assert.hpp"

namespace weft::detail {

ImageArena::~ImageArena() {
  for (auto [base, len] : regions_) munmap(base, len);
}

ImageArena::BlockHeader* ImageArena::take_block() {
  BlockHeader* b = nullptr;
  if (!free_blocks_.empty()) {
    b = free_blocks_.back();
    free_blocks_.pop_back();
  } else {
    if (carve_next_ == carve_end_) {
      // One extra block of address space, so that the blocks can start kBlockBytes-aligned.
      const std::size_t len = kRegionBytes + kBlockBytes;
      void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) {
        std::fprintf(stderr,
                     "weft: cannot map %zu MiB for hibernated stack images (%zu MiB so far): "
                     "%s. Set Options::hibernate_after to 0 (or WEFT_HIBERNATE_AFTER=0) to keep "
                     "idle fibers' stacks resident instead.\n",
                     kRegionBytes >> 20, regions_.size() * (kRegionBytes >> 20),
                     std::strerror(errno));
        std::abort();
      }
      regions_.emplace_back(static_cast<char*>(p), len);
      const auto aligned = (reinterpret_cast<std::uintptr_t>(p) + kBlockBytes - 1) &
                           ~(std::uintptr_t{kBlockBytes} - 1);
      carve_next_ = reinterpret_cast<char*>(aligned);
      carve_end_ = carve_next_ + kRegionBytes;
    }
    b = reinterpret_cast<BlockHeader*>(carve_next_);
    carve_next_ += kBlockBytes;
    // ASan keeps no shadow of its own for mapped memory, and a fresh address may carry a dead
    // fiber stack's poison (the first copy into a block hit a stale stack redzone). Per block,
    // as carved: unpoisoning a whole region writes 8 MiB of shadow.
    ASAN_UNPOISON_MEMORY_REGION(b, kBlockBytes);
  }
  *b = BlockHeader{static_cast<std::uint32_t>(kFirst), 0, 0,
                   static_cast<std::uint32_t>(blocks_.size())};
  blocks_.push_back(b);
  return b;
}

void ImageArena::release_block(BlockHeader* b) noexcept {
  WEFT_ASSERT(b->count == 0 && b->live == 0, "an image block released with live images");
  BlockHeader* moved = blocks_.back();
  blocks_[b->index] = moved;
  moved->index = b->index;
  blocks_.pop_back();
  if (b == current_) current_ = nullptr;
  // Zero pages from here: the header is rewritten when the block is taken again.
  madvise(b, kBlockBytes, MADV_DONTNEED);
  free_blocks_.push_back(b);
}

void* ImageArena::allocate(std::size_t bytes) {
  if (bytes > kLargest) return ::operator new(bytes);
  const std::size_t need = sizeof(AllocHeader) + rounded(bytes);
  if (!current_ || current_->used + need > kBlockBytes) current_ = take_block();
  char* const at = reinterpret_cast<char*>(current_) + current_->used;
  *reinterpret_cast<AllocHeader*>(at) = AllocHeader{static_cast<std::uint32_t>(rounded(bytes)), 1};
  current_->used += static_cast<std::uint32_t>(need);
  current_->live += static_cast<std::uint32_t>(need);
  ++current_->count;
  live_bytes_ += need;
  return at + sizeof(AllocHeader);
}

void ImageArena::free(void* p, std::size_t bytes) noexcept {
  if (bytes > kLargest) {
    ::operator delete(p);
    return;
  }
  auto* h = reinterpret_cast<AllocHeader*>(static_cast<char*>(p) - sizeof(AllocHeader));
  WEFT_ASSERT(h->live == 1 && h->bytes == rounded(bytes), "an image freed twice or resized");
  h->live = 0;
  const std::size_t need = sizeof(AllocHeader) + h->bytes;
  BlockHeader* const b = block_of(p);
  b->live -= static_cast<std::uint32_t>(need);
  --b->count;
  live_bytes_ -= need;
  if (b->count == 0) release_block(b);
}

void* ImageArena::next_live(BlockHeader* b, std::uint32_t* off) noexcept {
  for (;;) {
    WEFT_ASSERT(*off < b->used, "an image block's live count exceeds its allocations");
    auto* h = reinterpret_cast<AllocHeader*>(reinterpret_cast<char*>(b) + *off);
    *off += static_cast<std::uint32_t>(sizeof(AllocHeader) + h->bytes);
    if (h->live) return h + 1;
  }
}

}  // namespace weft::detail
