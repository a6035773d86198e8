// Shared by the fuzz targets: a tiny deterministic PRNG for splitting inputs into chunks, and a
// check that fails loudly (abort, so libFuzzer saves the input) with a message.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace fuzz {

// xorshift64*: the chunk sizes come from the input's control byte, so every run of an input is
// the same run.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  // 1..max, mostly small: splits land inside headers and bulk strings alike.
  std::size_t chunk(std::size_t max) {
    const std::uint64_t r = next();
    const std::size_t n = (r & 3) == 0 ? 1 + (r >> 8) % max : 1 + (r >> 8) % 8;
    return n;
  }

 private:
  std::uint64_t s_;
};

[[noreturn]] inline void fail(const char* what, const char* file, int line) {
  std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", what, file, line);
  std::abort();
}

}  // namespace fuzz

#define FUZZ_CHECK(cond) ((cond) ? (void)0 : ::fuzz::fail(#cond, __FILE__, __LINE__))
