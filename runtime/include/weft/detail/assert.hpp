// WEFT_ASSERT: invariant checks on hot paths. Debug builds (no NDEBUG) check and abort with the
// failed expression and a message; release builds compile the check away entirely.
#pragma once

namespace weft::detail {
[[noreturn]] void assert_fail(const char* expr, const char* msg, const char* file,
                              int line) noexcept;
}

#ifdef NDEBUG
#define WEFT_ASSERT(expr, msg) static_cast<void>(0)
#else
#define WEFT_ASSERT(expr, msg) \
  ((expr) ? static_cast<void>(0) : ::weft::detail::assert_fail(#expr, msg, __FILE__, __LINE__))
#endif
