// gdb_test: tools/gdb/weft_gdb.py against a live process and a core file, with gdb in batch mode.
//
// gdb runs tests/gdb_fixture (which parks fibers in fixture_* functions and stops at
// fixture_checkpoint), lists the fibers, prints backtraces of parked fibers (by name and by id)
// and of running ones, and writes a core file with `weft gcore`; a second gdb then does the same
// on that core, and a third on a core written by the kernel when the fixture aborts.
// Skipped when gdb is missing or ptrace is not allowed here; sanitizer builds check the live
// process only (see kNoCoreWhySanitized).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

const char kMarker[] = "==weft-gdb-test== ";

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

struct Result {
  int status = -1;
  std::string output;
};

Result run_shell(const std::string& cmd) {
  Result r;
  FILE* p = popen((cmd + " </dev/null 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  r.status = pclose(p);
  return r;
}

// One gdb -batch session: `steps` are (label, gdb command) pairs; each command's output is
// delimited by a marker line so that it can be checked on its own.
struct Session {
  std::vector<std::pair<std::string, std::string>> steps;
  void add(const std::string& label, const std::string& command) {
    steps.emplace_back(label, command);
  }
  std::string command_line(const std::string& gdb_args) const {
    std::string cmd = quote(WEFT_GDB) +
                      " -batch -nx -iex 'set debuginfod enabled off' -iex 'set pagination off'"
                      " -iex 'set width 0' -ex " +
                      quote(std::string("source ") + WEFT_GDB_SCRIPT);
    for (const auto& [label, command] : steps) {
      cmd += " -ex " + quote(std::string("echo ") + kMarker + label + "\\n");
      cmd += " -ex " + quote(command);
    }
    cmd += " -ex " + quote(std::string("echo ") + kMarker + "end\\n");
    return cmd + " " + gdb_args;
  }
};

// The output of the step called `label` (up to the next marker).
std::string section(const std::string& output, const std::string& label) {
  const std::string start = std::string(kMarker) + label + "\n";
  const std::size_t at = output.find(start);
  if (at == std::string::npos) return "<no output for step " + label + ">";
  const std::size_t from = at + start.size();
  const std::size_t end = output.find(kMarker, from);
  return output.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// The commands both sessions run, after the process is stopped at fixture_checkpoint or the core
// is loaded.
void add_inspection(Session& s) {
  s.add("fibers", "weft fibers");
  s.add("bt-named", "weft bt named-fiber");
  s.add("bt-id", "eval \"weft bt %d\", (int) fixture_channel_fiber_id");
  s.add("bt-spinner", "weft bt spinner");
  s.add("bt-main", "weft bt fixture-main");
  s.add("bt-small", "weft bt small-stack");
  s.add("bt-all", "weft bt all");
  s.add("bt-missing", "weft bt no-such-fiber");
  s.add("help", "weft");
}

// Checks the output of add_inspection's commands; `where` names the session in failures.
void check_inspection(const std::string& out, const std::string& where) {
  SCOPED_TRACE(where);
  const std::string fibers = section(out, "fibers");
  EXPECT_TRUE(contains(fibers, "weft: 7 fibers")) << fibers;
  EXPECT_TRUE(contains(fibers, "\"named-fiber\"")) << fibers;
  EXPECT_TRUE(contains(fibers, "\"fixture-main\"")) << fibers;
  EXPECT_TRUE(contains(fibers, "\"spinner\"")) << fibers;
  for (const char* reason : {"chan recv", "chan send", "sleep", "mutex"}) {
    EXPECT_TRUE(std::regex_search(fibers, std::regex(std::string("parked +") + reason + " ")))
        << reason << "\n"
        << fibers;
  }
  EXPECT_TRUE(std::regex_search(fibers, std::regex("parked +io read fd [0-9]+ "))) << fibers;
  // The two running fibers are found on their threads.
  const std::regex running_re("running +thread [0-9]+ ");
  EXPECT_EQ(std::distance(std::sregex_iterator(fibers.begin(), fibers.end(), running_re),
                          std::sregex_iterator()),
            2)
      << fibers;
  // Parked fibers have waited a while and have a stack in use.
  EXPECT_TRUE(std::regex_search(fibers, std::regex("chan recv +[0-9]+ ms +[0-9.]+ (B|KiB) ")))
      << fibers;

  const std::string named = section(out, "bt-named");
  EXPECT_TRUE(contains(named, "\"named-fiber\" [parked: chan send]:")) << named;
  EXPECT_TRUE(contains(named, "fixture_named_sends")) << named;
  EXPECT_TRUE(std::regex_search(named, std::regex("\n#0 "))) << named;

  const std::string by_id = section(out, "bt-id");
  EXPECT_TRUE(std::regex_search(by_id, std::regex("^fiber [0-9]+ \\[parked: chan recv\\]:")))
      << by_id;
  EXPECT_TRUE(contains(by_id, "fixture_waits_on_channel")) << by_id;
  // Only the fiber's frames: none of the stopped thread's.
  EXPECT_FALSE(contains(by_id, "fixture_checkpoint")) << by_id;

  const std::string spinner = section(out, "bt-spinner");
  EXPECT_TRUE(std::regex_search(spinner, std::regex("\\[running\\] on thread [0-9]+"))) << spinner;
  EXPECT_TRUE(contains(spinner, "fixture_spins")) << spinner;

  // A fiber on a stack of another size class: listed with both sizes, and its frames found.
  if (!kSanitized) {
    EXPECT_TRUE(contains(fibers, "stacks of 16.0 KiB and 64.0 KiB")) << fibers;
  }
  const std::string small = section(out, "bt-small");
  EXPECT_TRUE(contains(small, "\"small-stack\" [parked: sleep]")) << small;
  EXPECT_TRUE(contains(small, "fixture_sleeps")) << small;

  const std::string main_bt = section(out, "bt-main");
  EXPECT_TRUE(contains(main_bt, "fixture_checkpoint")) << main_bt;

  const std::string all = section(out, "bt-all");
  for (const char* fn :
       {"fixture_waits_on_channel", "fixture_sleeps", "fixture_waits_on_mutex",
        "fixture_named_sends", "fixture_reads_pipe", "fixture_spins", "fixture_checkpoint"}) {
    EXPECT_TRUE(contains(all, fn)) << fn << "\n" << all;
  }

  EXPECT_TRUE(contains(section(out, "bt-missing"), "no fiber with name no-such-fiber"))
      << section(out, "bt-missing");
  EXPECT_TRUE(contains(section(out, "help"), "weft bt ID|NAME")) << section(out, "help");
}

// Why the gdb tests cannot run here ("" if they can).
std::string no_gdb() {
  if (std::string(WEFT_GDB).empty() || access(WEFT_GDB, X_OK) != 0) {
    return "gdb not found (install it: scripts/install-deps.sh)";
  }
  return "";
}

// Sanitizer builds inspect the live process only (Fiber's layout differs there, which the
// descriptor must describe), and write no core file: ASan/TSan processes map terabytes of shadow
// memory, so `generate-core-file` of the fixture writes a ~6 TB sparse file and takes minutes
// (measured with ASan), and ASan turns kernel core dumps off (disable_coredump=1).
constexpr const char* kNoCoreWhySanitized =
    "core files are not written in sanitizer builds (terabytes of shadow memory)";

std::filesystem::path scratch_dir(const char* what) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      ("weft-gdb-test-" + std::string(what) + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// gdb runs the fixture to fixture_checkpoint, inspects it, writes a core with `weft gcore`; a
// second gdb inspects the core.
TEST(Gdb, LiveProcessAndGcoreFile) {
  if (const std::string why = no_gdb(); !why.empty()) GTEST_SKIP() << why;
  const std::filesystem::path dir = scratch_dir("gcore");
  const std::string core = (dir / "gdb_fixture.core").string();

  Session live;
  live.add("break", "break fixture_checkpoint");
  live.add("run", "run");
  add_inspection(live);
  if (!kSanitized) live.add("gcore", "weft gcore " + core);
  live.add("kill", "kill");
  const Result r1 = run_shell(live.command_line(quote(WEFT_GDB_FIXTURE)));
  if (contains(r1.output, "ptrace: Operation not permitted") ||
      contains(r1.output, "Could not trace the inferior")) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "ptrace is not permitted here:\n" << r1.output;
  }
  ASSERT_TRUE(contains(section(r1.output, "run"), "fixture_checkpoint"))
      << "the fixture did not stop at fixture_checkpoint:\n"
      << r1.output;
  check_inspection(r1.output, "live process");
  if (kSanitized) {
    if (HasFailure()) std::printf("---- live gdb session ----\n%s\n", r1.output.c_str());
    std::printf("note: live process checked; %s\n", kNoCoreWhySanitized);
    std::filesystem::remove_all(dir);
    return;
  }
  EXPECT_TRUE(contains(section(r1.output, "gcore"), "weft: copied the stacks in use of 7 fibers"))
      << section(r1.output, "gcore");
  ASSERT_TRUE(std::filesystem::exists(core)) << r1.output;

  Session post;
  add_inspection(post);
  const Result r2 = run_shell(post.command_line(quote(WEFT_GDB_FIXTURE) + " " + quote(core)));
  check_inspection(r2.output, "core file from weft gcore");
  if (HasFailure()) {
    std::printf("---- live gdb session ----\n%s\n---- core gdb session ----\n%s\n",
                r1.output.c_str(), r2.output.c_str());
  }
  std::filesystem::remove_all(dir);
}

// The fixture aborts at fixture_checkpoint and the kernel writes the core (the crash case).
// Needs core_pattern to write a plain file into the working directory and RLIMIT_CORE to be
// raisable; skipped otherwise (e.g. cores piped to systemd-coredump or apport).
TEST(Gdb, KernelCoreFile) {
  if (const std::string why = no_gdb(); !why.empty()) GTEST_SKIP() << why;
  if (kSanitized) GTEST_SKIP() << kNoCoreWhySanitized;
  std::string pattern;
  if (FILE* f = std::fopen("/proc/sys/kernel/core_pattern", "r")) {
    char buf[256] = {};
    if (std::fgets(buf, sizeof buf, f)) pattern = buf;
    std::fclose(f);
  }
  if (pattern.empty() || pattern[0] == '|' || contains(pattern, "/")) {
    GTEST_SKIP() << "kernel core_pattern does not write into the working directory: " << pattern;
  }
  const std::filesystem::path dir = scratch_dir("kcore");
  const Result crash = run_shell("cd " + quote(dir.string()) + " && ulimit -c unlimited && exec " +
                                 quote(WEFT_GDB_FIXTURE) + " --abort >/dev/null");
  std::string core;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file()) core = entry.path().string();
  }
  if (core.empty()) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "the kernel wrote no core file (core_pattern " << pattern
                 << ", RLIMIT_CORE not raisable?): " << crash.output;
  }
  Session post;
  add_inspection(post);
  const Result r = run_shell(post.command_line(quote(WEFT_GDB_FIXTURE) + " " + quote(core)));
  check_inspection(r.output, "kernel core file");
  if (HasFailure()) std::printf("---- core gdb session ----\n%s\n", r.output.c_str());
  std::filesystem::remove_all(dir);
}

}  // namespace
