// Proves that deadlock detection (Options::detect_deadlock, Go's "all goroutines are asleep")
// sees fibers blocked on channels for good, each in a child process (gtest death tests,
// "threadsafe" style) under workers = 1, 2, 4 and 8: a select over nil cases only, select() with
// no cases, receive and send on a nil channel, a send nobody receives; and that timer channels
// release their runtime timer, so that a runtime left with only a stopped Ticker or a dropped
// after() is idle and its deadlock is reported (a timer still armed would count as a possible
// wake-up and hide it). Every child has an alarm, so a missed report fails instead of hanging.
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "test_util.hpp"
#include "weft/weft.hpp"

namespace {

using namespace weft_test;
using weft::Chan;

class ChanDeathTest : public WorkersTest {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (kTsan) {
      GTEST_SKIP() << "TSan's background thread counts as an outside thread that could wake "
                      "fibers, which disables deadlock detection";
    }
  }
};
WEFT_INSTANTIATE_WORKERS(ChanDeathTest);

void exit_42(int) { _exit(42); }

// The child exits with 42 if the deadlock was not reported within 3 s (detection needs ~30 ms).
void arm_alarm() {
  signal(SIGALRM, exit_42);
  itimerval it{};
  it.it_value.tv_sec = 3;
  setitimer(ITIMER_REAL, &it, nullptr);
}

#define WEFT_EXPECT_DEADLOCK(body, reason_regex)                          \
  do {                                                                    \
    const weft::Options o = opts();                                       \
    EXPECT_DEATH(                                                         \
        {                                                                 \
          arm_alarm();                                                    \
          weft::run(                                                      \
              [] {                                                        \
                weft::this_fiber::set_name("main");                       \
                body;                                                     \
              },                                                          \
              o);                                                         \
          std::_Exit(3);                                                  \
        },                                                                \
        "weft: all fibers are asleep - deadlock!.*fiber [0-9]+ \"main\" " \
        "\\[parked: " reason_regex);                                      \
  } while (0)

TEST_P(ChanDeathTest, SelectOverNilCasesOnlyIsADeadlock) {
  WEFT_EXPECT_DEADLOCK(
      {
        Chan<int> a = nullptr;
        Chan<int> b = nullptr;
        weft::select(weft::case_recv(a), weft::case_send(b, 1));
      },
      "select");
}

TEST_P(ChanDeathTest, EmptySelectIsADeadlock) {
  WEFT_EXPECT_DEADLOCK({ weft::select(); }, "forever");
}

TEST_P(ChanDeathTest, RecvOnNilChannelIsADeadlock) {
  WEFT_EXPECT_DEADLOCK(
      {
        Chan<int> nil = nullptr;
        (void)nil.recv();
      },
      "chan recv");
}

TEST_P(ChanDeathTest, SendOnNilChannelIsADeadlock) {
  WEFT_EXPECT_DEADLOCK(
      {
        Chan<int> nil = nullptr;
        nil.send(1);
      },
      "chan send");
}

TEST_P(ChanDeathTest, SendNobodyReceivesIsADeadlock) {
  WEFT_EXPECT_DEADLOCK(
      {
        Chan<int> ch;
        auto other = weft::spawn([ch] { (void)Chan<int>().recv(); });
        ch.send(1);
      },
      "chan send");
}

TEST_P(ChanDeathTest, SelectOnChannelsNobodyUsesIsADeadlock) {
  WEFT_EXPECT_DEADLOCK(
      {
        Chan<int> a;
        Chan<int> b(1);
        b.send(0);  // full
        weft::select(weft::case_recv(a), weft::case_send(b, 1));
      },
      "select");
}

TEST_P(ChanDeathTest, StoppedTickerReleasesItsTimer) {
  WEFT_EXPECT_DEADLOCK(
      {
        weft::Ticker t(std::chrono::milliseconds(1));
        auto c = t.chan();
        (void)c.recv();
        t.stop();
        (void)c.try_recv();
        (void)c.recv();  // no tick will ever come, and no timer is armed
      },
      "chan recv");
}

TEST_P(ChanDeathTest, DroppedAfterReleasesItsTimer) {
  WEFT_EXPECT_DEADLOCK(
      {
        for (int i = 0; i < 10; ++i) (void)weft::after(std::chrono::hours(1));
        (void)Chan<int>().recv();
      },
      "chan recv");
}

TEST_P(ChanDeathTest, FiredAfterLeavesNoTimer) {
  WEFT_EXPECT_DEADLOCK(
      {
        auto c = weft::after(std::chrono::milliseconds(1));
        (void)c.recv();
        (void)c.recv();  // fired once; nothing more will come
      },
      "chan recv");
}

}  // namespace
