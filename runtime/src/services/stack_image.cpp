// Zero-eliding stack images; format and rules in stack_image.hpp.
#include "services/stack_image.hpp"

#include <algorithm>
#include <cstring>

namespace weft::detail {

std::size_t stack_image_bound(std::size_t len) noexcept {
  const std::size_t words = len / 8;
  // Each run holds at least one word and is followed by a gap of at least kMinGapWords.
  const std::size_t runs = words / (1 + kStackImageMinGapWords) + 1;
  return words * 8 + runs * sizeof(StackImageRun);
}

// Reads another fiber's stack: frames ASan poisoned, words TSan never saw ordered before us
// (the hibernator froze the stack with a write-protect first: services/hibernator.cpp).
namespace {
// Word i of the range, or 0 where its page must not be read. Uninstrumented, as the encoder.
__attribute__((no_sanitize("address", "thread"))) inline std::uint64_t word_at(
    const std::uint64_t* lo, std::size_t i, const std::uint8_t* readable, std::uintptr_t first_page,
    std::size_t page) noexcept {
  const auto addr = reinterpret_cast<std::uintptr_t>(lo + i);
  if (readable && !readable[(addr - first_page) / page]) return 0;
  return lo[i];
}
}  // namespace

__attribute__((no_sanitize("address", "thread"))) std::size_t stack_image_encode(
    const std::uint64_t* lo, std::size_t len, unsigned char* out, const std::uint8_t* readable,
    std::size_t page) noexcept {
  const std::size_t words = len / 8;
  const auto base = reinterpret_cast<std::uintptr_t>(lo);
  const std::uintptr_t first_page = base & ~(std::uintptr_t{page} - 1);
  auto word = [&](std::size_t i) { return word_at(lo, i, readable, first_page, page); };
  unsigned char* o = out;
  std::size_t i = 0;
  for (;;) {
    while (i < words && word(i) == 0) {
      if (readable && !readable[(base + i * 8 - first_page) / page]) {
        // Skip the rest of an unreadable page at once.
        const std::uintptr_t next = ((base + i * 8) & ~(std::uintptr_t{page} - 1)) + page;
        i = std::min(words, static_cast<std::size_t>((next - base) / 8));
      } else {
        ++i;
      }
    }
    if (i == words) break;
    // A run: from i to the last non-zero word before a gap of kMinGapWords zeros (or the end).
    std::size_t end = i + 1, last = i;
    while (end < words && end - last <= kStackImageMinGapWords) {
      if (word(end) != 0) last = end;
      ++end;
    }
    const StackImageRun run{static_cast<std::uint32_t>(i),
                            static_cast<std::uint32_t>(last - i + 1)};
    std::memcpy(o, &run, sizeof run);
    o += sizeof run;
    for (std::size_t k = i; k <= last; ++k, o += 8) {
      const std::uint64_t v = word(k);
      std::memcpy(o, &v, 8);
    }
    i = last + 1;
  }
  return static_cast<std::size_t>(o - out);
}

bool stack_image_decode(const unsigned char* image, std::size_t size, std::uintptr_t lo,
                        std::size_t page, unsigned char* scratch, StackImagePageFn emit,
                        void* ctx) noexcept {
  std::uintptr_t cur = 0;  // page being filled in scratch; 0: none
  const unsigned char* p = image;
  const unsigned char* end = image + size;
  while (p < end) {
    StackImageRun run;
    std::memcpy(&run, p, sizeof run);
    p += sizeof run;
    std::uintptr_t addr = lo + std::uintptr_t{run.offset_words} * 8;
    std::size_t left = std::size_t{run.words} * 8;
    while (left > 0) {
      const std::uintptr_t pg = addr & ~(std::uintptr_t{page} - 1);
      if (pg != cur) {
        if (cur && !emit(cur, scratch, ctx)) return false;
        std::memset(scratch, 0, page);
        cur = pg;
      }
      const std::size_t n = std::min<std::size_t>(left, pg + page - addr);
      std::memcpy(scratch + (addr - pg), p, n);
      p += n;
      addr += n;
      left -= n;
    }
  }
  return !cur || emit(cur, scratch, ctx);
}

}  // namespace weft::detail
