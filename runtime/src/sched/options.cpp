// Option resolution (design in options.hpp).
#include "sched/options.hpp"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
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
  std::size_t n = 0;
  if (!parse_stack_size(v, &n)) {
    throw std::invalid_argument(
        std::string("weft: $") + name + "=\"" + v +
        "\" is not a stack size between 4K and 1G (examples: 65536, 128K, 1M)");
  }
  return n;
}

std::chrono::milliseconds env_millis(const char* name, std::chrono::milliseconds fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  if (std::string_view(v) == "off") return std::chrono::milliseconds(0);
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (end == v || (*end != '\0' && std::string_view(end) != "ms") || n > (1ull << 40)) {
    throw std::invalid_argument(std::string("weft: $") + name + "=\"" + v +
                                "\" is not a duration in milliseconds (examples: 1000, 250ms; 0 "
                                "or off disables)");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(n));
}

NetPoll env_netpoll(const char* name, NetPoll fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  const std::string_view t(v);
  if (t == "auto") return NetPoll::kAuto;
  if (t == "epoll") return NetPoll::kEpoll;
  if (t == "io_uring" || t == "iouring" || t == "uring") return NetPoll::kIoUring;
  throw std::invalid_argument(std::string("weft: $") + name + "=\"" + v +
                              "\" is not a netpoller backend (epoll, io_uring or auto)");
}

}  // namespace

bool parse_stack_size(std::string_view text, std::size_t* out) noexcept {
  unsigned long long n = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (n > (1ull << 40)) return false;
    n = n * 10 + static_cast<unsigned>(text[i] - '0');
  }
  if (i == 0) return false;
  std::string_view unit = text.substr(i);
  if (!unit.empty() && (unit[0] == 'k' || unit[0] == 'K')) {
    n <<= 10;
    unit.remove_prefix(1);
  } else if (!unit.empty() && (unit[0] == 'm' || unit[0] == 'M')) {
    n <<= 20;
    unit.remove_prefix(1);
  }
  if (unit == "i" || unit == "iB" || unit == "B" || unit == "b") unit = {};
  if (!unit.empty() || n < 4096 || n > (1ull << 30)) return false;
  *out = static_cast<std::size_t>(n);
  return true;
}

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
  if (o.hibernate_after == Options{}.hibernate_after)
    o.hibernate_after = env_millis("WEFT_HIBERNATE_AFTER", o.hibernate_after);
  if (o.netpoll == NetPoll::kAuto) o.netpoll = env_netpoll("WEFT_NETPOLL", o.netpoll);
  if (o.stack_profile.empty()) {
    if (const char* path = std::getenv("WEFT_STACK_PROFILE")) o.stack_profile = path;
  }
  if (o.stack_sizes.empty()) {
    if (const char* path = std::getenv("WEFT_STACK_SIZES")) o.stack_sizes = path;
  }
  return o;
}

}  // namespace weft::detail
