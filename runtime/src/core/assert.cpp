// The failure path of WEFT_ASSERT (weft/detail/assert.hpp): debug builds only call it.
#include "weft/detail/assert.hpp"

#include <cstdio>
#include <cstdlib>

namespace weft::detail {

void assert_fail(const char* expr, const char* msg, const char* file, int line) noexcept {
  std::fprintf(stderr, "weft: assertion failed: %s (%s) at %s:%d\n", expr, msg, file, line);
  std::abort();
}

}  // namespace weft::detail
