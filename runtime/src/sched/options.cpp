// Option resolution (design in options.hpp).
#include "sched/options.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace weft::detail {
namespace {

unsigned env_unsigned(const char* name, unsigned fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const unsigned long n = std::strtoul(v, &end, 10);
  if (*end != '\0' || n == 0 || n > 4096) {
    throw std::invalid_argument(std::string("weft: $") + name + "=\"" + v +
                                "\" is not a worker count between 1 and 4096");
  }
  return static_cast<unsigned>(n);
}

std::size_t env_size(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (*end == 'k' || *end == 'K') {
    n <<= 10;
    ++end;
  } else if (*end == 'm' || *end == 'M') {
    n <<= 20;
    ++end;
  }
  if (*end == 'i' || *end == 'B' || *end == 'b') ++end;
  if (*end == 'B') ++end;
  if (*end != '\0' || n < 4096 || n > (1ull << 30)) {
    throw std::invalid_argument(
        std::string("weft: $") + name + "=\"" + v +
        "\" is not a stack size between 4K and 1G (examples: 65536, 128K, 1M)");
  }
  return static_cast<std::size_t>(n);
}

}  // namespace

Options resolve_options(const Options& in) {
  Options o = in;
  if (o.workers == 0) {
    const unsigned hw = std::thread::hardware_concurrency();
    o.workers = env_unsigned("WEFT_WORKERS", hw ? hw : 1);
  }
  if (o.stack_size == Options{}.stack_size)
    o.stack_size = env_size("WEFT_STACK_SIZE", o.stack_size);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Sanitizers grow frames several times over; keep the programs that fit normally fitting.
  if (o.stack_size < 256 * 1024) o.stack_size = 256 * 1024;
#endif
  if (o.stack_profile.empty()) {
    if (const char* path = std::getenv("WEFT_STACK_PROFILE")) o.stack_profile = path;
  }
  return o;
}

}  // namespace weft::detail
