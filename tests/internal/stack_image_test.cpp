// StackImage (services/stack_image.hpp): zero-eliding encode and page-wise decode give back
// exactly the bytes of the range, for ranges that start mid-page, end on a page boundary, hold
// isolated words, runs separated by short and long zero gaps, and nothing at all; pages with
// only zeros are never produced; the image stays within stack_image_bound and is small when the
// range is mostly zeros.
#include "services/stack_image.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace {

using namespace weft::detail;

constexpr std::size_t kPage = 4096;

struct Decoded {
  std::map<std::uintptr_t, std::vector<unsigned char>> pages;
  static bool emit(std::uintptr_t addr, const unsigned char* scratch, void* ctx) {
    auto* d = static_cast<Decoded*>(ctx);
    EXPECT_EQ(addr % kPage, 0u);
    EXPECT_EQ(d->pages.count(addr), 0u) << "page emitted twice";
    d->pages[addr].assign(scratch, scratch + kPage);
    return true;
  }
};

// Encodes [offset, 4 pages) of a page-aligned buffer, decodes as if it had lived at `base`,
// and checks every byte of every page against the original (zeros where nothing came back).
void round_trip(const std::vector<std::uint64_t>& words_in, std::size_t offset_words,
                std::size_t* image_size = nullptr) {
  constexpr std::size_t kPages = 4;
  alignas(kPage) static std::uint64_t mem[kPages * kPage / 8];
  std::memset(mem, 0, sizeof mem);
  if (!words_in.empty()) std::memcpy(mem, words_in.data(), words_in.size() * 8);
  const std::size_t len = sizeof mem - offset_words * 8;
  std::vector<unsigned char> image(stack_image_bound(len));
  const std::size_t size = stack_image_encode(mem + offset_words, len, image.data());
  ASSERT_LE(size, image.size());
  if (image_size) *image_size = size;
  const std::uintptr_t base = 0x7f0000000000;  // where the stack "was": page-aligned
  std::vector<unsigned char> scratch(kPage);
  Decoded d;
  ASSERT_TRUE(stack_image_decode(image.data(), size, base + offset_words * 8, kPage, scratch.data(),
                                 &Decoded::emit, &d));
  const auto* bytes = reinterpret_cast<const unsigned char*>(mem);
  for (std::size_t p = 0; p < kPages; ++p) {
    const std::uintptr_t addr = base + p * kPage;
    bool any = false;
    for (std::size_t i = 0; i < kPage; ++i) {
      // Bytes below the encoded range are dead: the decoder produces zeros there.
      const unsigned char want = p * kPage + i < offset_words * 8 ? 0 : bytes[p * kPage + i];
      any = any || want != 0;
    }
    auto it = d.pages.find(addr);
    if (!any) {
      EXPECT_EQ(it, d.pages.end()) << "an all-zero page " << p << " was produced";
      continue;
    }
    ASSERT_NE(it, d.pages.end()) << "page " << p << " is missing";
    for (std::size_t i = 0; i < kPage; ++i) {
      const unsigned char want = p * kPage + i < offset_words * 8 ? 0 : bytes[p * kPage + i];
      ASSERT_EQ(it->second[i], want) << "page " << p << " byte " << i;
    }
  }
}

TEST(StackImage, AnEmptyRangeEncodesToNothing) {
  std::size_t size = 1;
  round_trip({}, 0, &size);
  EXPECT_EQ(size, 0u);
}

TEST(StackImage, IsolatedWordsAndRunsComeBackExactly) {
  std::vector<std::uint64_t> w(2048);
  w[0] = 1;
  w[3] = 0xffffffffffffffffull;                                               // gap of 2: one run
  w[100] = 42;                                                                // long gap: a new run
  for (int i = 500; i < 700; ++i) w[i] = 0x0101010101010101ull * (i & 0xff);  // crosses a page
  w[2047] = 7;                                                                // the very last word
  round_trip(w, 0);
}

TEST(StackImage, ARangeStartingMidPageAndEndingOnAPage) {
  std::vector<std::uint64_t> w(2048);
  for (int i = 0; i < 2048; i += 9) w[i] = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  round_trip(w, 301);
  round_trip(w, 512);   // exactly at the second page
  round_trip(w, 2047);  // one word
}

TEST(StackImage, AFullRangeRoundTripsAndStaysWithinTheBound) {
  std::vector<std::uint64_t> w(2048);
  std::uint64_t x = 88172645463325252ull;
  for (auto& v : w) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = x % 3 == 0 ? 0 : x;  // short zero gaps everywhere
  }
  round_trip(w, 0);
}

TEST(StackImage, AMostlyZeroBufferIsSmall) {
  // A 4 KiB read buffer that held a 64-byte message, under a few frames.
  std::vector<std::uint64_t> w(2048);
  for (int i = 1024; i < 1032; ++i) w[i] = 0x6f6c6c6568ull + i;
  for (int i = 1900; i < 2048; i += 8) w[i] = static_cast<std::uint64_t>(i);
  std::size_t size = 0;
  round_trip(w, 1000, &size);
  EXPECT_LT(size, 600u);
}

TEST(StackImage, PagesMarkedUnreadableAreNeverReadAndComeBackAsZeros) {
  // The second page is unmapped: reading it would crash, so the encoder must not.
  const std::size_t len = 3 * kPage;
  auto* mem = static_cast<unsigned char*>(
      mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(mem, MAP_FAILED);
  mem[100] = 1;
  mem[2 * kPage + 8] = 3;
  ASSERT_EQ(munmap(mem + kPage, kPage), 0);
  const std::uint8_t readable[3] = {1, 0, 1};
  std::vector<unsigned char> image(stack_image_bound(len - 96));
  const std::size_t size = stack_image_encode(reinterpret_cast<const std::uint64_t*>(mem + 96),
                                              len - 96, image.data(), readable, kPage);
  std::vector<unsigned char> scratch(kPage);
  Decoded d;
  const auto lo = reinterpret_cast<std::uintptr_t>(mem) + 96;
  ASSERT_TRUE(
      stack_image_decode(image.data(), size, lo, kPage, scratch.data(), &Decoded::emit, &d));
  ASSERT_EQ(d.pages.size(), 2u);
  const auto base = reinterpret_cast<std::uintptr_t>(mem);
  EXPECT_EQ(d.pages[base][100], 1);
  EXPECT_EQ(d.pages[base + 2 * kPage][8], 3);
  munmap(mem, kPage);
  munmap(mem + 2 * kPage, kPage);
}

TEST(StackImage, DecodeStopsWhenTheCallbackFails) {
  std::vector<std::uint64_t> w(2048);
  w[0] = 1;
  w[600] = 2;
  w[1100] = 3;
  alignas(kPage) static std::uint64_t mem[2048];
  std::memcpy(mem, w.data(), sizeof mem);
  std::vector<unsigned char> image(stack_image_bound(sizeof mem));
  const std::size_t size = stack_image_encode(mem, sizeof mem, image.data());
  std::vector<unsigned char> scratch(kPage);
  int calls = 0;
  EXPECT_FALSE(stack_image_decode(
      image.data(), size, 0x10000, kPage, scratch.data(),
      [](std::uintptr_t, const unsigned char*, void* c) { return ++*static_cast<int*>(c) < 2; },
      &calls));
  EXPECT_EQ(calls, 2);
}

}  // namespace
