// Runs every program of examples/go_by_example (the Go by Example and Go Tour chapters in weft)
// and checks what it prints. Where the output is deterministic it must equal
// examples/go_by_example/expected/NAME.txt exactly. Where fibers interleave, the lines must be
// the expected ones in some order, with the orders the program does guarantee (a fiber's own lines
// in sequence, a send before the receive it feeds). Where timers decide the output (tickers, rate
// limiting, ping-pong), the lines must match their pattern and the times must respect the periods
// (a tick never comes early). Every program must exit with status 0 (a TSan or ASan report fails
// it), and programs that sleep must take at least their sleeps' total.
//
// Each example runs twice: with the default workers (all cores) and with WEFT_WORKERS=1 (only the
// first under the sanitizers, which slow fibers down a lot). The test lists the example sources,
// so an example added without a check here fails. Under TSan, where starting a fiber costs
// milliseconds, the two programs that start hundreds of fibers and then sleep a fixed time get
// only their output's form checked.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#ifndef WEFT_GBE_BIN_DIR
#error "WEFT_GBE_BIN_DIR (the directory of the built examples) must be defined"
#endif
#ifndef WEFT_GBE_SRC_DIR
#error "WEFT_GBE_SRC_DIR (examples/go_by_example) must be defined"
#endif

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
constexpr int kTimeoutS = 100;
#else
constexpr bool kSanitized = false;
constexpr int kTimeoutS = 60;
#endif
#if defined(__SANITIZE_THREAD__)
// Under TSan every new fiber costs milliseconds (TSan sets up a context for each), so programs
// that start hundreds of fibers and then sleep a fixed time see only some of them run.
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif

using Lines = std::vector<std::string>;

struct Output {
  std::string name;
  std::string out;  // stdout
  Lines lines;      // stdout, split at '\n'
  double ms = 0;    // wall time of the process
};

Lines split_lines(const std::string& s) {
  Lines lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string expected(const std::string& name) {
  const auto path = std::filesystem::path(WEFT_GBE_SRC_DIR) / "expected" / (name + ".txt");
  EXPECT_TRUE(std::filesystem::exists(path)) << path;
  return read_file(path);
}

Lines sorted(Lines v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::string join(const Lines& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

// Runs the example, returns its stdout; fails the test unless it exits with status 0.
Output run_example(const std::string& name, const std::string& env) {
  Output o{name, {}, {}, 0};
  const std::string bin = std::string(WEFT_GBE_BIN_DIR) + "/" + name;
  const std::string err_file = ::testing::TempDir() + "weft_example_" + name + ".stderr";
  const std::string cmd = env + " timeout -k 5 " + std::to_string(kTimeoutS) + " '" + bin +
                          "' 2>'" + err_file + "' </dev/null";
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "popen failed: " << cmd;
    return o;
  }
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) o.out.append(buf, n);
  const int status = ::pclose(p);
  o.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  o.lines = split_lines(o.out);
  const std::string err = read_file(err_file);
  std::filesystem::remove(err_file);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << cmd << "\nexit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
      << (WIFEXITED(status) && WEXITSTATUS(status) == 124 ? " (timed out)" : "") << "\nstdout:\n"
      << o.out << "stderr:\n"
      << err;
  return o;
}

// --- checks -------------------------------------------------------------------------------------

void exact(const Output& o) { EXPECT_EQ(o.out, expected(o.name)); }

// The expected lines, in any order.
void same_lines(const Output& o) {
  EXPECT_EQ(join(sorted(o.lines)), join(sorted(split_lines(expected(o.name))))) << o.out;
}

// Each of `want` occurs in `lines`, in this order.
void in_order(const Output& o, const Lines& want) {
  std::size_t from = 0;
  for (const auto& w : want) {
    auto it = std::find(o.lines.begin() + static_cast<std::ptrdiff_t>(from), o.lines.end(), w);
    ASSERT_NE(it, o.lines.end()) << "\"" << w << "\" missing, or out of order in:\n" << o.out;
    from = static_cast<std::size_t>(it - o.lines.begin()) + 1;
  }
}

void took_at_least(const Output& o, double ms) {
  EXPECT_GE(o.ms, ms) << o.name << " returned before its sleeps could have finished";
}

// Matches `line` against `pattern`, where each '#' stands for a decimal number and every other
// character must be there exactly; returns the numbers, or nullopt if the line does not match.
std::optional<std::vector<long>> fields(std::string_view line, std::string_view pattern) {
  std::vector<long> out;
  std::size_t i = 0;
  for (char p : pattern) {
    if (p != '#') {
      if (i >= line.size() || line[i] != p) return std::nullopt;
      ++i;
      continue;
    }
    const std::size_t start = i;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
    if (i == start || i - start > 12) return std::nullopt;
    out.push_back(std::stol(std::string(line.substr(start, i - start))));
  }
  if (i != line.size()) return std::nullopt;
  return out;
}

using Check = std::function<void(const Output&)>;

const std::map<std::string, Check>& checks() {
  static const std::map<std::string, Check> m = {
      // --- Go by Example -------------------------------------------------------------------------
      {"goroutines",
       [](const Output& o) {
         same_lines(o);
         ASSERT_EQ(o.lines.size(), 8u);
         EXPECT_EQ(join(Lines(o.lines.begin(), o.lines.begin() + 3)),
                   "direct : 0\ndirect : 1\ndirect : 2\n");
         EXPECT_EQ(o.lines.back(), "done");
         in_order(o, {"goroutine : 0", "goroutine : 1", "goroutine : 2"});
         took_at_least(o, 100);
       }},
      {"channels", exact},
      {"channel_buffering", exact},
      {"channel_synchronization",
       [](const Output& o) {
         exact(o);
         took_at_least(o, 100);
       }},
      {"channel_directions", exact},
      {"select",
       [](const Output& o) {
         exact(o);
         took_at_least(o, 200);
       }},
      {"timeouts",
       [](const Output& o) {
         exact(o);
         took_at_least(o, 300);
       }},
      {"non_blocking_channel_operations", exact},
      {"closing_channels",
       [](const Output& o) {
         same_lines(o);
         in_order(o, {"sent job 1", "sent job 2", "sent job 3", "sent all jobs"});
         in_order(o, {"received job 1", "received job 2", "received job 3", "received all jobs"});
         in_order(o, {"sent job 3", "received all jobs"});
         EXPECT_EQ(o.lines.back(), "received more jobs: false");
       }},
      {"range_over_channels", exact},
      {"timers",
       [](const Output& o) {
         exact(o);
         took_at_least(o, 400);
       }},
      {"tickers",
       [](const Output& o) {
         // 350 ms of a 100 ms ticker: normally 3 ticks. A late receiver may miss one, a late stop
         // may see more; but the k-th tick received fired no earlier than k periods after the
         // start, so no more ticks than the run had periods.
         ASSERT_GE(o.lines.size(), 2u) << o.out;
         EXPECT_LE(static_cast<double>(o.lines.size() - 1), o.ms / 100) << o.out;
         EXPECT_EQ(o.lines.back(), "Ticker stopped");
         for (std::size_t k = 0; k + 1 < o.lines.size(); ++k) {
           const auto f = fields(o.lines[k], "Tick at #ms");
           ASSERT_TRUE(f) << o.out;
           EXPECT_GE((*f)[0], 100 * static_cast<long>(k + 1)) << o.out;
         }
         took_at_least(o, 350);
       }},
      {"worker_pools",
       [](const Output& o) {
         ASSERT_EQ(o.lines.size(), 10u) << o.out;
         std::map<long, long> started_by, finished_by;  // job -> worker
         std::map<long, long> busy_with;                // worker -> job in progress
         for (const auto& line : o.lines) {
           const auto started = fields(line, "worker # started  job #");
           const auto finished = fields(line, "worker # finished job #");
           ASSERT_TRUE(started || finished) << "unexpected \"" << line << "\" in\n" << o.out;
           const long w = (started ? *started : *finished)[0];
           const long job = (started ? *started : *finished)[1];
           EXPECT_TRUE(w >= 1 && w <= 3 && job >= 1 && job <= 5) << line;
           if (started) {
             EXPECT_FALSE(started_by.count(job)) << "job " << job << " started twice\n" << o.out;
             EXPECT_FALSE(busy_with.count(w)) << "worker " << w << " took two jobs\n" << o.out;
             started_by[job] = w;
             busy_with[w] = job;
           } else {
             EXPECT_EQ(started_by.count(job), 1u) << "job " << job << " finished first\n" << o.out;
             EXPECT_EQ(started_by[job], w) << o.out;
             EXPECT_FALSE(finished_by.count(job)) << o.out;
             finished_by[job] = w;
             busy_with.erase(w);
           }
         }
         EXPECT_EQ(finished_by.size(), 5u) << o.out;
         took_at_least(o, 200);
       }},
      {"waitgroups",
       [](const Output& o) {
         same_lines(o);
         for (int i = 1; i <= 5; ++i) {
           const std::string w = "Worker " + std::to_string(i);
           in_order(o, {w + " starting", w + " done"});
         }
         took_at_least(o, 100);
       }},
      {"rate_limiting",
       [](const Output& o) {
         ASSERT_EQ(o.lines.size(), 10u) << o.out;
         std::vector<long> t;
         for (int i = 0; i < 10; ++i) {
           const auto f = fields(o.lines[i], "request # at #ms");
           ASSERT_TRUE(f) << o.out;
           EXPECT_EQ((*f)[0], i % 5 + 1) << o.out;
           t.push_back((*f)[1]);
         }
         // One request per 20 ms tick: the i-th no earlier than i ticks after the start.
         for (int i = 0; i < 5; ++i) EXPECT_GE(t[i], 20 * (i + 1)) << o.out;
         // Bursts: requests 1-3 use the 3 buffered tokens; 4 and 5 wait for the refilling
         // ticker, started after request 5 of the first round.
         EXPECT_GE(t[8], t[4] + 20) << o.out;
         EXPECT_GE(t[9], t[4] + 40) << o.out;
       }},
      {"atomic_counters", exact},
      {"mutexes", exact},
      {"stateful_goroutines",
       [](const Output& o) {
         ASSERT_EQ(o.lines.size(), 2u) << o.out;
         const auto reads = fields(o.lines[0], "readOps: #");
         const auto writes = fields(o.lines[1], "writeOps: #");
         ASSERT_TRUE(reads && writes) << o.out;
         // Normally thousands of reads and about a tenth as many writes; on a loaded machine
         // (sanitizers, parallel tests) the fibers may barely have started in 100 ms.
         if (!kTsan) {
           EXPECT_GT((*reads)[0] + (*writes)[0], 0) << o.out;
         }
         took_at_least(o, 100);
       }},

      // --- A Tour of Go --------------------------------------------------------------------------
      {"tour_goroutines",
       [](const Output& o) {
         // main's say("hello") prints 5 times; the other fiber's "world" lines race with main's
         // end, as in Go.
         const auto n = [&](const std::string& s) {
           return std::count(o.lines.begin(), o.lines.end(), s);
         };
         EXPECT_EQ(n("hello"), 5) << o.out;
         EXPECT_GE(n("world"), 1) << o.out;
         EXPECT_LE(n("world"), 5) << o.out;
         EXPECT_EQ(n("hello") + n("world"), static_cast<long>(o.lines.size())) << o.out;
         took_at_least(o, 100);
       }},
      {"tour_channels",
       [](const Output& o) {
         // The halves' sums arrive in either order.
         EXPECT_TRUE(o.out == "-5 17 12\n" || o.out == "17 -5 12\n") << o.out;
       }},
      {"tour_buffered_channels", exact},
      {"tour_range_and_close", exact},
      {"tour_select", exact},
      {"tour_default_selection",
       [](const Output& o) {
         // Polls every 25 ms, a tick every 50 ms, BOOM! at 250 ms.
         ASSERT_FALSE(o.lines.empty());
         EXPECT_EQ(o.lines.back(), "BOOM!");
         const Lines body(o.lines.begin(), o.lines.end() - 1);
         const auto ticks = std::count(body.begin(), body.end(), "tick.");
         const auto polls = std::count(body.begin(), body.end(), "    .");
         EXPECT_EQ(ticks + polls, static_cast<long>(body.size())) << o.out;
         EXPECT_LE(static_cast<double>(ticks), o.ms / 50) << o.out;  // never early
         EXPECT_GE(polls, 1) << o.out;
         took_at_least(o, 250);
       }},
      {"tour_mutex_counter",
       [](const Output& o) {
         if (!kTsan) return exact(o);
         const auto n = fields(o.out, "#\n");  // how many of the 1000 fibers ran in 200 ms
         ASSERT_TRUE(n) << o.out;
         EXPECT_LE((*n)[0], 1000) << o.out;
       }},
      {"tour_equivalent_binary_trees", exact},
      {"tour_web_crawler",
       [](const Output& o) {
         same_lines(o);
         ASSERT_FALSE(o.lines.empty());
         EXPECT_EQ(o.lines[0], "found: https://golang.org/ \"The Go Programming Language\"");
         in_order(o, {"found: https://golang.org/pkg/ \"Packages\"",
                      "found: https://golang.org/pkg/fmt/ \"Package fmt\""});
         in_order(o, {"found: https://golang.org/pkg/ \"Packages\"",
                      "found: https://golang.org/pkg/os/ \"Package os\""});
       }},

      // --- Classics ------------------------------------------------------------------------------
      {"prime_sieve", exact},
      {"ping_pong",
       [](const Output& o) {
         // The players alternate, each hit counted once: "ping 1", "pong 2", "ping 3", ... (or
         // pong first). 200 ms of 20 ms rallies: about 11 hits, never more than the run allows.
         ASSERT_GE(o.lines.size(), 1u) << o.out;
         EXPECT_LE(static_cast<double>(o.lines.size()), o.ms / 20 + 1) << o.out;
         bool prev_ping = false;
         for (std::size_t i = 0; i < o.lines.size(); ++i) {
           const auto ping = fields(o.lines[i], "ping #");
           const auto pong = fields(o.lines[i], "pong #");
           ASSERT_TRUE(ping || pong) << o.out;
           EXPECT_EQ((ping ? *ping : *pong)[0], static_cast<long>(i + 1)) << o.out;
           if (i > 0) {
             EXPECT_NE(bool(ping), prev_ping) << "the same player hit twice\n" << o.out;
           }
           prev_ping = bool(ping);
         }
         took_at_least(o, 200);
       }},
      {"pipelines",
       [](const Output& o) {
         ASSERT_EQ(o.lines.size(), 4u) << o.out;
         EXPECT_EQ(join(sorted(Lines(o.lines.begin(), o.lines.begin() + 2))), "4\n9\n") << o.out;
         EXPECT_TRUE(o.lines[2] == "first: 4" || o.lines[2] == "first: 9") << o.out;
         EXPECT_EQ(o.lines[3], "every stage has returned");
       }},
      {"bounded_parallelism", exact},
  };
  return m;
}

// --- the tests ----------------------------------------------------------------------------------

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(WEFT_GBE_SRC_DIR)) {
    if (e.path().extension() == ".cpp") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class GoByExample : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

// Examples whose output depends on a fiber getting to run within a sleep of the main fiber (as
// their Go originals do): a stall of 100 ms or more on a loaded machine changes it. Each may run a
// second time if its first output fails the check; the first failure is printed.
const std::set<std::string> kTimingSensitive = {
    "goroutines",          "select",  "timeouts",        "timers",
    "stateful_goroutines", "tickers", "tour_goroutines", "tour_default_selection",
    "tour_mutex_counter",
};

TEST_P(GoByExample, Output) {
  const auto& [name, one_worker] = GetParam();
  auto it = checks().find(name);
  ASSERT_NE(it, checks().end()) << "examples/go_by_example/" << name
                                << ".cpp has no output check in tests/examples_test.cpp";
  const std::string env = one_worker ? "WEFT_WORKERS=1" : "";
  if (kTimingSensitive.count(name)) {
    ::testing::TestPartResultArray failures;
    {
      ::testing::ScopedFakeTestPartResultReporter intercept(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
      const Output o = run_example(name, env);
      it->second(o);
      std::printf("%s: %.0f ms\n", name.c_str(), o.ms);
    }
    if (failures.size() == 0) return;
    std::printf("%s: the first run failed its check, running it again:\n", name.c_str());
    for (int i = 0; i < failures.size(); ++i) {
      std::printf("%s\n", failures.GetTestPartResult(i).message());
    }
  }
  const Output o = run_example(name, env);
  it->second(o);
  std::printf("%s: %.0f ms\n", name.c_str(), o.ms);
}

INSTANTIATE_TEST_SUITE_P(
    Examples, GoByExample,
    ::testing::Combine(::testing::ValuesIn(example_names()),
                       ::testing::ValuesIn(kSanitized ? std::vector<bool>{false}
                                                      : std::vector<bool>{false, true})),
    [](const auto& info) {
      return std::get<0>(info.param) + (std::get<1>(info.param) ? "_w1" : "");
    });

TEST(GoByExampleChecks, EveryCheckHasItsExample) {
  const auto names = example_names();
  for (const auto& [name, check] : checks()) {
    EXPECT_TRUE(std::binary_search(names.begin(), names.end(), name))
        << "a check for " << name << " but no examples/go_by_example/" << name << ".cpp";
  }
}

}  // namespace
