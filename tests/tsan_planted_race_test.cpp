// Proves that ThreadSanitizer still checks weft's own code with tools/sanitizers/tsan.supp loaded:
// a race planted in fiber code that the global run queue carried must be reported. Registered in
// TSan builds only (tests/CMakeLists.txt).
//
// The child (this binary re-executed with --planted-race-child) runs two fibers on two workers.
// Each parks in weft::blocking(), so a blocking-pool thread wakes it through ready() from outside
// the workers, which queues it on the global run queue (Boost.Lockfree); each then waits at a
// barrier of relaxed atomics -- which give TSan no happens-before edge -- until both are running,
// and writes the same plain int. Nothing orders the two writes, so TSan must report them, on
// every run, whatever the interleaving. The child runs with the suppression file,
// halt_on_error=1 and exitcode=66; the parent expects exit code 66 and a data race report naming
// planted_race_write.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "weft/runtime.hpp"

namespace {

constexpr int kTsanExitCode = 66;   // TSAN_OPTIONS exitcode: a report was printed
constexpr int kNoRaceExitCode = 0;  // the child finished and TSan said nothing
constexpr int kBarrierTimeout = 3;  // the two fibers never ran at the same time
constexpr char kChildFlag[] = "--planted-race-child";

}  // namespace

// The planted race: written by two fibers with no ordering. External, and read at the end, so the
// compiler must keep both stores.
int planted_race_counter = 0;

[[gnu::noinline, gnu::noipa]] void planted_race_write(int value) { planted_race_counter = value; }

namespace {

int run_child() {
  weft::Options opts;
  opts.workers = 2;
  return weft::run(
      [] {
        std::atomic<int> arrived{0};
        std::atomic<bool> timed_out{false};
        auto racer = [&](int value) {
          weft::blocking([] {});  // back on a worker through the global run queue
          arrived.fetch_add(1, std::memory_order_relaxed);
          const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
          while (arrived.load(std::memory_order_relaxed) < 2) {
            if (std::chrono::steady_clock::now() > give_up) {
              timed_out.store(true, std::memory_order_relaxed);
              return;
            }
          }
          planted_race_write(value);
        };
        auto a = weft::spawn([&] { racer(1); });
        auto b = weft::spawn([&] { racer(2); });
        a.join();
        b.join();
        if (timed_out.load(std::memory_order_relaxed)) return kBarrierTimeout;
        std::printf("the last write left %d\n", planted_race_counter);
        return kNoRaceExitCode;
      },
      opts);
}

struct ChildResult {
  int exit_code = -1;  // -1: killed by a signal, or not run
  std::string stderr_text;
  std::string error;  // what went wrong running it, empty when it ran
};

ChildResult run_self_as_child() {
  ChildResult r;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    r.error = std::string("readlink /proc/self/exe: ") + std::strerror(errno);
    return r;
  }
  exe[n] = '\0';
  const std::string tsan_options = std::string("suppressions=") + WEFT_TSAN_SUPPRESSIONS +
                                   " halt_on_error=1 exitcode=" + std::to_string(kTsanExitCode);
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.error = std::string("pipe2: ") + std::strerror(errno);
    return r;
  }
  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  char* const argv[] = {exe, const_cast<char*>(kChildFlag), nullptr};
  const pid_t pid = fork();
  if (pid < 0) {
    r.error = std::string("fork: ") + std::strerror(errno);
    return r;
  }
  if (pid == 0) {
    dup2(err_pipe[1], STDERR_FILENO);
    setenv("TSAN_OPTIONS", tsan_options.c_str(), 1);
    execv(exe, argv);
    _exit(127);
  }
  close(err_pipe[1]);
  char buf[4096];
  for (;;) {
    const ssize_t got = read(err_pipe[0], buf, sizeof buf);
    if (got > 0) {
      r.stderr_text.append(buf, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

TEST(TsanPlantedRace, RaceInFibersWokenThroughTheGlobalQueueIsReported) {
  const ChildResult r = run_self_as_child();
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_NE(r.exit_code, kBarrierTimeout)
      << "the two racing fibers never ran at the same time on the two workers:\n"
      << r.stderr_text;
  EXPECT_EQ(r.exit_code, kTsanExitCode)
      << "TSan did not report the planted race (exit code " << r.exit_code
      << "): tools/sanitizers/tsan.supp suppresses weft's own code. Child's stderr:\n"
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("WARNING: ThreadSanitizer: data race"), std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("planted_race_write"), std::string::npos) << r.stderr_text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == kChildFlag) return run_child();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
