// StackImage: the compact copy of a hibernated fiber's live stack (services/hibernator.hpp).
//
// A parked fiber's live stack is the range from its saved context up to the stack's top. Most of
// it is zeros: a 4 KiB read buffer that held one short message, frames' padding, the unused
// tail of a large local. The image keeps only the non-zero words, as runs:
//   [Run{offset in words from the range's start, length in words}][the run's words] ...
// in ascending order. Zero gaps shorter than kMinGapWords stay inside a run (a run's header
// costs as much as two words). Encoding reads memory another thread wrote and whose frames
// ASan may have poisoned, so it is built without sanitizer instrumentation; nothing else here
// touches foreign memory. Decoding hands each page that holds a non-zero word to a callback,
// in ascending order; pages without one are never produced (they come back as fresh zero pages).
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::detail {

struct StackImageRun {
  std::uint32_t offset_words;  // from the encoded range's start
  std::uint32_t words;
};

inline constexpr std::size_t kStackImageMinGapWords = 4;

// Bytes an image of `len` bytes may take at most (every run separated by a minimal gap).
std::size_t stack_image_bound(std::size_t len) noexcept;

// Encodes [lo, lo + len) -- lo and len multiples of 8 -- into out (stack_image_bound(len)
// bytes); returns the image's size. With `readable` (one flag per page of `page` bytes, from the
// page holding lo), pages whose flag is 0 are taken as zeros and never read: in a range
// registered with userfaultfd, reading a page that was never touched would fault to the
// hibernator, the thread doing the reading.
std::size_t stack_image_encode(const std::uint64_t* lo, std::size_t len, unsigned char* out,
                               const std::uint8_t* readable = nullptr,
                               std::size_t page = 4096) noexcept;

// Rebuilds the pages of an image whose range started at address `lo`. For every page that holds
// a non-zero word: fills `scratch` (page bytes) with that page's contents and calls
// emit(page_address, scratch, ctx), stopping at the first emit that returns false (then returns
// false). page must be a power of two.
using StackImagePageFn = bool (*)(std::uintptr_t page_address, const unsigned char* scratch,
                                  void* ctx);
bool stack_image_decode(const unsigned char* image, std::size_t size, std::uintptr_t lo,
                        std::size_t page, unsigned char* scratch, StackImagePageFn emit,
                        void* ctx) noexcept;

}  // namespace weft::detail
