// Proves the runtime's fatal reports, each in a child process (gtest death tests, "threadsafe"
// style: the child re-executes this binary, so it has no thread but the runtime's own), under
// workers = 1, 2, 4 and 8: a fiber that overflows its stack dies with a report naming the fiber and
// its stack size (guard page + SIGSEGV handler); a runtime whose fibers are all parked with nothing
// to wake them aborts with Go's "all fibers are asleep - deadlock!" and a dump that shows main's
// wait reason, unless Options::detect_deadlock is false; an exception escaping a go() fiber aborts
// with the fiber's id, name and what().
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <regex>
#include <stdexcept>
#include <string>

#include "test_util.hpp"
#include "weft/runtime.hpp"
#include "weft/sync.hpp"

namespace {

using namespace weft_test;

class RuntimeDeathTest : public WorkersTest {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};
WEFT_INSTANTIATE_WORKERS(RuntimeDeathTest);

volatile int g_never = 0;

// Unbounded recursion the optimiser cannot remove: a volatile frame that is used after the call.
__attribute__((noinline)) int recurse_forever(int depth) {
  volatile char frame[256];
  frame[depth % 256] = static_cast<char>(depth);
  if (g_never == depth + 1000000000) return 0;
  return recurse_forever(depth + 1) + frame[depth % 256];
}

TEST_P(RuntimeDeathTest, StackOverflowIsReportedWithTheFibersName) {
  const weft::Options o = opts();
  EXPECT_DEATH(
      {
        weft::run(
            [] {
              auto t = weft::spawn([] {
                weft::this_fiber::set_name("deep");
                return recurse_forever(0);
              });
              return t.join();
            },
            o);
      },
      "weft: fiber [0-9]+ \"deep\" overflowed its [0-9]+ KiB stack; raise Options::stack_size "
      "or WEFT_STACK_SIZE");
}

TEST_P(RuntimeDeathTest, DeadlockIsDetected) {
  if (kTsan) {
    GTEST_SKIP() << "TSan's background thread counts as an outside thread that could wake "
                    "fibers, which disables deadlock detection";
  }
  const weft::Options o = opts();
  EXPECT_DEATH(
      {
        weft::run(
            [] {
              weft::this_fiber::set_name("main");
              auto other = weft::spawn([] { weft::Semaphore(0).acquire(); });
              weft::Semaphore nobody_releases(0);
              nobody_releases.acquire();
            },
            o);
      },
      "weft: all fibers are asleep - deadlock!.*fiber [0-9]+ \"main\" \\[parked: semaphore");
}

void exit_42(int) { _exit(42); }

TEST_P(RuntimeDeathTest, DeadlockDetectionCanBeDisabled) {
  // The child parks main forever with detection off; a timer signal ends it with exit code 42
  // long after the detector would have fired (it needs ~3 ticks of 10 ms).
  weft::Options o = opts();
  o.detect_deadlock = false;
  EXPECT_EXIT(
      {
        signal(SIGALRM, exit_42);
        itimerval it{};
        it.it_value.tv_usec = 500000;
        setitimer(ITIMER_REAL, &it, nullptr);
        weft::run([] { weft::Semaphore(0).acquire(); }, o);
        std::_Exit(1);
      },
      ::testing::ExitedWithCode(42), "");
}

// Checks that stderr names the fiber that threw: the child prints "thrower-id=<id>" first.
class NamesThrower : public ::testing::MatcherInterface<const std::string&> {
 public:
  explicit NamesThrower(std::string what) : what_(std::move(what)) {}
  bool MatchAndExplain(const std::string& err,
                       ::testing::MatchResultListener* listener) const override {
    std::smatch m;
    if (!std::regex_search(err, m, std::regex("thrower-id=([0-9]+)"))) {
      *listener << "the child did not print its fiber id";
      return false;
    }
    const std::string expected =
        "weft: fiber " + m[1].str() + " \"thrower\" ended by an uncaught exception: " + what_;
    if (err.find(expected) == std::string::npos) {
      *listener << "stderr lacks \"" << expected << "\"";
      return false;
    }
    return true;
  }
  void DescribeTo(std::ostream* os) const override {
    *os << "names the throwing fiber's id and name and says: " << what_;
  }

 private:
  std::string what_;
};

TEST_P(RuntimeDeathTest, ExceptionEscapingGoAborts) {
  const weft::Options o = opts();
  EXPECT_DEATH(
      {
        weft::run(
            [] {
              weft::go([] {
                weft::this_fiber::set_name("thrower");
                weft::this_fiber::yield();
                std::fprintf(stderr, "thrower-id=%llu\n",
                             static_cast<unsigned long long>(weft::this_fiber::id()));
                throw std::runtime_error("boom 1234");
              });
              weft::this_fiber::sleep_for(std::chrono::seconds(30));
            },
            o);
      },
      ::testing::MakeMatcher(new NamesThrower("boom 1234")));
}

TEST_P(RuntimeDeathTest, NonStdExceptionEscapingGoAborts) {
  const weft::Options o = opts();
  EXPECT_DEATH(
      {
        weft::run(
            [] {
              weft::go([] {
                weft::this_fiber::set_name("thrower");
                std::fprintf(stderr, "thrower-id=%llu\n",
                             static_cast<unsigned long long>(weft::this_fiber::id()));
                throw 17;
              });
              weft::this_fiber::sleep_for(std::chrono::seconds(30));
            },
            o);
      },
      ::testing::MakeMatcher(new NamesThrower("(an exception not derived from std::exception)")));
}

}  // namespace
