// Shared helpers for the weft test suite: the worker-count parameterisation every suite uses,
// sanitizer-aware scaling of iteration counts, bounded waiting helpers (no test may wait without
// a bound: a runtime bug must fail a test, not hang CI), and the death-test child's hang alarm
// and exit.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>
#include <weft/chan.hpp>
#include <weft/runtime.hpp>
#include <weft/select.hpp>

// Functions that must really be called (never inlined, never analysed as pure/const by IPA), so
// that thread-local addresses and errno are looked up again after a fiber may have migrated.
#if defined(__clang__)
#define WEFT_TEST_OPAQUE __attribute__((noinline, optnone))
#else
#define WEFT_TEST_OPAQUE __attribute__((noinline, noipa))
#endif

namespace weft_test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kTsan = true;
#else
inline constexpr bool kTsan = false;
#endif

// Iteration counts shrink under the sanitizers, which slow every switch by 10-50x.
constexpr std::int64_t scaled(std::int64_t n, std::int64_t divisor = 10) {
  return kSanitized ? std::max<std::int64_t>(1, n / divisor) : n;
}

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Base fixture: every parameterised suite runs each test with workers = 1, 2, 4 and 8.
class WorkersTest : public ::testing::TestWithParam<unsigned> {
 protected:
  unsigned workers() const { return GetParam(); }
  weft::Options opts() const { return weft::Options{.workers = GetParam()}; }
};

inline std::string WorkersName(const ::testing::TestParamInfo<unsigned>& info) {
  std::string name = "w";
  name += std::to_string(info.param);
  return name;
}

// Fiber `id`'s line in a fiber dump ("" if the dump has none).
inline std::string line_of(const std::string& dump, std::uint64_t id) {
  const std::size_t at = dump.find("\nfiber " + std::to_string(id) + " ");
  if (at == std::string::npos) return "";
  return dump.substr(at + 1, dump.find('\n', at + 1) - (at + 1));
}

// The fiber dump's line for fiber `id` now ("" if the dump has none).
inline std::string dump_line(std::uint64_t id) {
  std::ostringstream os;
  weft::dump_fibers(os);
  return line_of(os.str(), id);
}

// True once every fiber in `ids` is parked with a wait reason starting with `reason` ("rwmutex",
// "chan recv", "io "), as the fiber dump shows ("[parked: REASON ..."): what a test waits for
// before it acts on a blocked call, instead of sleeping and hoping the call got there.
inline bool parked_on(std::string_view reason, std::initializer_list<std::uint64_t> ids) {
  std::ostringstream os;
  weft::dump_fibers(os);
  const std::string dump = os.str();
  std::string needle = "[parked: ";
  needle += reason;
  for (const std::uint64_t id : ids) {
    if (line_of(dump, id).find(needle) == std::string::npos) return false;
  }
  return true;
}

// From a fiber: polls `pred` (sleeping 1 ms between tries) until it holds or `timeout` passed.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return pred();
    weft::this_fiber::sleep_for(1ms);
  }
  return true;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

inline std::size_t count_occurrences(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

// Joins `task` from a fiber, waiting at most `limit`; false if it had not finished by then (the
// caller fails the test, and aborts if the task may still use its frame, rather than hang CI).
inline bool join_within(weft::Task<void>& task, std::chrono::nanoseconds limit) {
  weft::Chan<int> done(1);
  weft::go([&task, done] {
    task.join();
    done.close();
  });
  return weft::select(weft::case_recv(done), weft::case_timeout(limit)) == 0;
}

// Death-test children (EXPECT_EXIT), which run a scenario that could hang or crash in a child
// so that it fails one test instead of the suite. exit_on_hang arms SIGALRM: after `seconds` the
// child writes "hung: <what> did not finish in time" to stderr and exits with status 3.
// exit_with_result ends the child with the test's verdict (0 passed, 1 failed), first repeating
// its gtest failures on stderr, since they go to the child's stdout, which the parent does not
// show.
inline const char* g_hang_what = "the death-test scenario";

inline void on_hang(int) {
  // Async-signal-safe: write(2) and _exit(2) only.
  constexpr char kHung[] = "hung: ";
  constexpr char kNotFinished[] = " did not finish in time\n";
  [[maybe_unused]] ssize_t n = write(STDERR_FILENO, kHung, sizeof kHung - 1);
  n = write(STDERR_FILENO, g_hang_what, std::strlen(g_hang_what));
  n = write(STDERR_FILENO, kNotFinished, sizeof kNotFinished - 1);
  _exit(3);
}

inline void exit_on_hang(const char* what, unsigned seconds) {
  g_hang_what = what;
  signal(SIGALRM, on_hang);
  alarm(seconds);
}

[[noreturn]] inline void exit_with_result() {
  const ::testing::TestResult* r =
      ::testing::UnitTest::GetInstance()->current_test_info()->result();
  for (int i = 0; i < r->total_part_count(); ++i) {
    const ::testing::TestPartResult& part = r->GetTestPartResult(i);
    if (part.failed()) {
      std::fprintf(stderr, "%s:%d: %s\n", part.file_name() ? part.file_name() : "?",
                   part.line_number(), part.message());
    }
  }
  std::fflush(stderr);
  _exit(r->Failed() ? 1 : 0);
}

}  // namespace weft_test

// Instantiates a WorkersTest-derived suite with workers = 1, 2, 4 and 8 (names end in /w1 ... /w8).
#define WEFT_INSTANTIATE_WORKERS(Suite)                                       \
  INSTANTIATE_TEST_SUITE_P(Workers, Suite, ::testing::Values(1u, 2u, 4u, 8u), \
                           ::weft_test::WorkersName)
