// Shared plumbing for the C++ benchmark programs (weft_bench, boostfiber_bench, rawctx_bench): the
// command line, the clock, RSS readings and the RESULT line format. The Go program
// (tools/bench/go/main.go) implements the very same interface and output by hand, so every number
// in the comparison is taken and printed the same way:
//
//   <binary> --bench=NAME [--workers=N] [--n=COUNT]
//   RESULT <bench> <variant> <metric> <value> <unit>
//
// workers=0 (the default) means all hardware threads; the variant names the worker count ("w1",
// "wall", "wN") for the benches that take one and is "-" for switch, which by definition runs on a
// single kernel thread. Peak RSS is getrusage(RUSAGE_SELF).ru_maxrss; current RSS is the resident
// field of /proc/self/statm.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

namespace bench {

struct Args {
  std::string bench;
  unsigned workers = 0;  // as given: 0 means all hardware threads
  bool workers_given = false;
  std::uint64_t n = 0;  // 0: the bench's default size
};

// Default sizes, as defined for every implementation (compare --quick shrinks them with --n).
inline constexpr std::uint64_t kSwitchN = 10'000'000;  // switches in total
inline constexpr std::uint64_t kSpawnN = 1'000'000;    // fibers spawned
inline constexpr std::uint64_t kSkynetN = 1'000'000;   // leaves (a power of 10)
inline constexpr std::uint64_t kParkN = 100'000;       // parked fibers
inline constexpr std::uint64_t kMutexN = 10'000'000;   // increments in total
inline constexpr std::uint64_t kSkynetDiv = 10;
inline constexpr std::uint64_t kChanPingPongN = 1'000'000;  // round trips
inline constexpr std::uint64_t kChanMpmcN = 10'000'000;     // items in total
inline constexpr std::uint64_t kSelect2N = 2'000'000;       // selects (items in total)
inline constexpr std::uint64_t kCtxN = 1'000'000;           // contexts created and cancelled
inline constexpr std::uint64_t kRwN = 8'000'000;            // read sections in total
inline constexpr std::uint64_t kRwWriteEvery = 100;         // one write section per 100 reads
inline constexpr unsigned kRwReaders = 8;
inline constexpr std::uint64_t kLocalN = 10'000'000;     // fiber-local reads
inline constexpr std::uint64_t kSelectCtxN = 2'000'000;  // selects
// The channel benches' fixed shapes.
inline constexpr unsigned kMpmcProducers = 4;
inline constexpr unsigned kMpmcConsumers = 4;
inline constexpr std::size_t kMpmcCapacity = 1024;
inline constexpr std::size_t kSelect2Capacity = 128;

[[noreturn]] inline void usage_error(const char* prog, const std::string& msg) {
  std::fprintf(stderr, "%s: %s\nusage: %s --bench=NAME [--workers=N] [--n=COUNT]\n", prog,
               msg.c_str(), prog);
  std::exit(2);
}

inline std::uint64_t parse_u64(const char* prog, std::string_view flag, std::string_view text) {
  if (text.empty()) usage_error(prog, std::string(flag) + " needs a value");
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      usage_error(prog, std::string(flag) + ": not a number: " + std::string(text));
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

inline Args parse_args(int argc, char** argv) {
  const char* prog = argc > 0 ? argv[0] : "bench";
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string_view s = argv[i];
    auto value_of = [&](std::string_view name) -> const char* {
      // Accepts --name=value and --name value (and -name, as Go's flag package does).
      for (std::string_view prefix : {"--", "-"}) {
        if (s.size() > prefix.size() + name.size() && s.substr(0, prefix.size()) == prefix &&
            s.substr(prefix.size(), name.size()) == name && s[prefix.size() + name.size()] == '=') {
          return argv[i] + prefix.size() + name.size() + 1;
        }
        if (s.size() == prefix.size() + name.size() && s.substr(0, prefix.size()) == prefix &&
            s.substr(prefix.size()) == name) {
          if (i + 1 >= argc) usage_error(prog, std::string(s) + " needs a value");
          return argv[++i];
        }
      }
      return nullptr;
    };
    if (const char* v = value_of("bench")) {
      a.bench = v;
    } else if (const char* v = value_of("workers")) {
      a.workers = static_cast<unsigned>(parse_u64(prog, "--workers", v));
      a.workers_given = true;
    } else if (const char* v = value_of("n")) {
      a.n = parse_u64(prog, "--n", v);
      if (a.n == 0) usage_error(prog, "--n must be positive");
    } else {
      usage_error(prog, "unknown argument: " + std::string(s));
    }
  }
  if (a.bench.empty()) usage_error(prog, "--bench is required");
  return a;
}

inline unsigned hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

// The worker count a bench runs with: --workers, where 0 means all hardware threads.
inline unsigned resolve_workers(const Args& a) {
  return a.workers == 0 ? hardware_threads() : a.workers;
}

inline std::string variant_of(const Args& a) {
  if (a.workers == 0) return "wall";
  return "w" + std::to_string(a.workers);
}

inline std::uint64_t size_or(const Args& a, std::uint64_t def) { return a.n != 0 ? a.n : def; }

using Clock = std::chrono::steady_clock;

inline double ns_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

inline double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

inline std::uint64_t current_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) {
    std::perror("/proc/self/statm");
    std::exit(1);
  }
  unsigned long long size = 0, resident = 0;
  int got = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (got != 2) {
    std::fprintf(stderr, "cannot parse /proc/self/statm\n");
    std::exit(1);
  }
  return resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

inline void result(std::string_view bench, std::string_view variant, std::string_view metric,
                   double value, std::string_view unit) {
  std::printf("RESULT %.*s %.*s %.*s %.2f %.*s\n", static_cast<int>(bench.size()), bench.data(),
              static_cast<int>(variant.size()), variant.data(), static_cast<int>(metric.size()),
              metric.data(), value, static_cast<int>(unit.size()), unit.data());
  std::fflush(stdout);
}

// skynet's size must be a power of the fan-out so that every leaf sits at the same depth.
inline void check_skynet_size(const char* prog, std::uint64_t n) {
  std::uint64_t m = n;
  while (m % kSkynetDiv == 0) m /= kSkynetDiv;
  if (m != 1) usage_error(prog, "skynet: --n must be a power of 10, not " + std::to_string(n));
}

inline std::uint64_t skynet_expected(std::uint64_t n) { return n * (n - 1) / 2; }

// 0 + 1 + ... + (n-1): what the channel benches send, so what their receivers must add up to.
inline std::uint64_t sum_below(std::uint64_t n) { return n * (n - 1) / 2; }

// Reports a failed verification and returns the exit status for it.
inline int verify(std::string_view bench, std::uint64_t got, std::uint64_t want) {
  if (got == want) return 0;
  std::fprintf(stderr, "%.*s: WRONG RESULT: got %llu, want %llu\n", static_cast<int>(bench.size()),
               bench.data(), static_cast<unsigned long long>(got),
               static_cast<unsigned long long>(want));
  return 1;
}

}  // namespace bench
