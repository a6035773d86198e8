// Stack hibernation (Options::hibernate_after, $WEFT_HIBERNATE_AFTER): a fiber parked longer
// than the threshold gives its stack pages back and gets every byte back before it runs again,
// and whatever another fiber or the kernel reads or writes through a pointer into a hibernated
// stack sees and changes the real bytes, never zeros:
//  - a fiber's locals and a 4 KiB buffer on its stack survive hibernation unchanged;
//  - a sender hands values to receivers parked (hibernated) in chan recv: the value goes into a
//    waiter record on the receiver's stack;
//  - a WaitGroup on a hibernated fiber's stack is completed by other fibers;
//  - another fiber reads and writes through pointers into hibernated stacks;
//  - a read() syscall writes into a hibernated stack's buffer (a kernel-mode fault);
//  - the stress test mixes all of it with hibernations racing wake-ups, and checks every byte.
// Also: stats() counts hibernations and restores, the dump marks hibernated fibers, 0 turns it
// off, a malformed $WEFT_HIBERNATE_AFTER is a clear error, and a program run under Valgrind (whose
// one-thread-at-a-time lock a userfaultfd fault would deadlock) runs with it off and says so,
// instead of hanging. The parameterized tests run at 1, 2, 4 and 8 workers. Where userfaultfd is
// unavailable (seccomp, no permission) the tests skip.
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <weft/weft.hpp>

#include "test_util.hpp"

namespace {

using namespace weft_test;
using namespace std::chrono_literals;

bool userfaultfd_usable() {
  const long fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0) {
    close(static_cast<int>(fd));
    return true;
  }
  const int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
  if (dev >= 0) close(dev);
  return dev >= 0;
}

#define SKIP_WITHOUT_USERFAULTFD() \
  if (!userfaultfd_usable()) GTEST_SKIP() << "userfaultfd is unavailable here"

// From a fiber: waits until at least n fibers are hibernated (the hibernator's scan is sure to
// take every fiber parked past the threshold; the wait bounds a broken build, not a slow one).
bool hibernated_at_least(std::uint64_t n) {
  return eventually([n] { return weft::stats().fibers_hibernated >= n; }, 120s);
}

// Fills a buffer with a pattern that depends on the seed and the index (no zero words).
void fill(unsigned char* p, std::size_t n, unsigned seed) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>((i * 131 + seed) | 1);
}
bool check(const unsigned char* p, std::size_t n, unsigned seed) {
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != static_cast<unsigned char>((i * 131 + seed) | 1)) return false;
  }
  return true;
}

class HibernationTest : public WorkersTest {
 protected:
  weft::Options hib_opts() const {
    weft::Options o = opts();
    o.hibernate_after = 20ms;
    return o;
  }
};
WEFT_INSTANTIATE_WORKERS(HibernationTest);

TEST_P(HibernationTest, ParkedFibersKeepTheirLocalsAndStackBuffers) {
  SKIP_WITHOUT_USERFAULTFD();
  weft::run(
      [] {
        constexpr int kFibers = 64;
        weft::Chan<int> gate;
        std::vector<weft::Task<bool>> tasks;
        for (int i = 0; i < kFibers; ++i) {
          tasks.push_back(weft::spawn([gate, i] {
            unsigned char buf[4096];
            fill(buf, sizeof buf, static_cast<unsigned>(i));
            volatile std::uint64_t local = 0x0123456789abcdefull ^ static_cast<std::uint64_t>(i);
            const int v = gate.recv().value_or(-1);
            return v == 1 && local == (0x0123456789abcdefull ^ static_cast<std::uint64_t>(i)) &&
                   check(buf, sizeof buf, static_cast<unsigned>(i));
          }));
        }
        ASSERT_TRUE(hibernated_at_least(kFibers));
        const weft::Stats before = weft::stats();
        EXPECT_GE(before.hibernations, static_cast<std::uint64_t>(kFibers));
        EXPECT_GT(before.hibernated_stack_bytes, before.hibernated_image_bytes);
        for (int i = 0; i < kFibers; ++i) gate.send(1);
        for (auto& t : tasks) EXPECT_TRUE(t.join());
        const weft::Stats after = weft::stats();
        EXPECT_GE(after.hibernation_restores, static_cast<std::uint64_t>(kFibers));
        EXPECT_EQ(after.fibers_hibernated, 0u);
        EXPECT_EQ(after.hibernated_image_bytes, 0u);
      },
      hib_opts());
}

// Images live in blocks that are compacted once most of a crowd has woken: the survivors'
// images move (the hibernator scans every 10 ms here, and the test sleeps through many scans),
// and each survivor still gets its own bytes back. The buffers are incompressible, so that the
// images fill many blocks.
TEST_P(HibernationTest, TheSurvivorsOfAWokenCrowdGetTheirBytesBackAfterTheirImagesMove) {
  SKIP_WITHOUT_USERFAULTFD();
  weft::run(
      [] {
        constexpr int kFibers = 1000;
        constexpr std::size_t kBytes = 1500;
        auto noise = [](unsigned char* p, unsigned seed, bool write) {
          std::uint32_t x = seed * 2654435761u + 1;
          for (std::size_t i = 0; i < kBytes; ++i) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            const auto b = static_cast<unsigned char>(x | 1);
            if (write) {
              p[i] = b;
            } else if (p[i] != b) {
              return false;
            }
          }
          return true;
        };
        std::vector<weft::Chan<int>> gates(kFibers);
        std::vector<weft::Task<bool>> tasks;
        for (int i = 0; i < kFibers; ++i) {
          tasks.push_back(weft::spawn([gate = gates[i], i, noise] {
            unsigned char buf[kBytes];
            noise(buf, static_cast<unsigned>(i), true);
            const int v = gate.recv().value_or(-1);
            return v == 1 && noise(buf, static_cast<unsigned>(i), false);
          }));
        }
        ASSERT_TRUE(hibernated_at_least(kFibers));
        for (int i = 0; i < kFibers; ++i) {
          if (i % 10 != 0) gates[i].send(1);
        }
        for (int i = 0; i < kFibers; ++i) {
          if (i % 10 != 0) {
            EXPECT_TRUE(tasks[i].join());
          }
        }
        weft::this_fiber::sleep_for(300ms);  // about 30 scans, each compacting up to 16 blocks
        for (int i = 0; i < kFibers; i += 10) gates[i].send(1);
        for (int i = 0; i < kFibers; i += 10) EXPECT_TRUE(tasks[i].join()) << "fiber " << i;
        EXPECT_EQ(weft::stats().hibernated_image_bytes, 0u);
      },
      hib_opts());
}

TEST_P(HibernationTest, SendersHandValuesToHibernatedReceivers) {
  SKIP_WITHOUT_USERFAULTFD();
  weft::run(
      [] {
        constexpr int kReceivers = 100;
        weft::Chan<std::string> ch;  // unbuffered: each value goes straight to a waiter
        std::vector<weft::Task<std::string>> rx;
        for (int i = 0; i < kReceivers; ++i) {
          rx.push_back(weft::spawn([ch] { return ch.recv().value_or("closed"); }));
        }
        ASSERT_TRUE(hibernated_at_least(kReceivers + 0u));
        for (int i = 0; i < kReceivers; ++i) {
          ch.send("value " + std::to_string(i) + std::string(100, 'x'));
        }
        std::vector<bool> seen(kReceivers);
        for (auto& t : rx) {
          const std::string v = t.join();
          ASSERT_EQ(v.substr(v.size() - 100), std::string(100, 'x')) << v;
          const int k = std::stoi(v.substr(6));
          ASSERT_TRUE(k >= 0 && k < kReceivers && !seen[k]) << v;
          seen[k] = true;
        }
        // A send fills the waiter record on the receiver's stack: a touch, not a switch-in.
        EXPECT_GT(weft::stats().hibernation_fault_restores, 0u);
      },
      hib_opts());
}

TEST_P(HibernationTest, AWaitGroupOnAHibernatedStackIsCompleted) {
  SKIP_WITHOUT_USERFAULTFD();
  weft::run(
      [] {
        constexpr int kWorkers = 32;
        weft::Chan<int> go_on;
        std::atomic<int> finished{0};
        // The waiter parks in wg.wait() with the WaitGroup on its own stack and is hibernated;
        // the workers, hibernated too, then call done() on it.
        weft::Task<int> waiter = weft::spawn([go_on, &finished] {
          weft::WaitGroup wg;
          wg.add(kWorkers);
          for (int i = 0; i < kWorkers; ++i) {
            weft::go([&wg, go_on, &finished] {
              go_on.recv();
              finished.fetch_add(1);
              wg.done();
            });
          }
          wg.wait();
          return finished.load();
        });
        ASSERT_TRUE(hibernated_at_least(kWorkers + 1));
        go_on.close();
        EXPECT_EQ(waiter.join(), kWorkers);
      },
      hib_opts());
}

TEST_P(HibernationTest, PointersIntoHibernatedStacksReadAndWriteTheRealBytes) {
  SKIP_WITHOUT_USERFAULTFD();
  weft::run(
      [] {
        constexpr int kFibers = 32;
        constexpr std::size_t kBytes = 3000;
        struct Slot {
          unsigned char* buf = nullptr;
        };
        std::vector<Slot> slots(kFibers);
        weft::WaitGroup ready;
        ready.add(kFibers);
        weft::Chan<int> gate;
        std::vector<weft::Task<bool>> tasks;
        for (int i = 0; i < kFibers; ++i) {
          tasks.push_back(weft::spawn([&slots, &ready, gate, i] {
            unsigned char buf[kBytes];
            fill(buf, kBytes, static_cast<unsigned>(i));
            slots[i].buf = buf;
            ready.done();
            gate.recv();
            // The other fiber rewrote it with seed i + 1000 while this one was hibernated.
            return check(buf, kBytes, static_cast<unsigned>(i + 1000));
          }));
        }
        ready.wait();
        ASSERT_TRUE(hibernated_at_least(kFibers));
        for (int i = 0; i < kFibers; ++i) {
          // Reading first: a read of a hibernated page must see the saved bytes, not zeros.
          ASSERT_TRUE(check(slots[i].buf, kBytes, static_cast<unsigned>(i))) << i;
          fill(slots[i].buf, kBytes, static_cast<unsigned>(i + 1000));
        }
        // Hibernated again (they are still parked), then woken.
        for (int i = 0; i < kFibers; ++i) gate.send(1);
        for (auto& t : tasks) EXPECT_TRUE(t.join());
      },
      hib_opts());
}

TEST_P(HibernationTest, ASyscallWritesIntoAHibernatedStack) {
  SKIP_WITHOUT_USERFAULTFD();
  weft::run(
      [] {
        int fds[2];
        ASSERT_EQ(pipe(fds), 0);
        unsigned char* where = nullptr;
        weft::Chan<int> gate;
        weft::Chan<int> placed(1);
        weft::Task<bool> owner = weft::spawn([&where, gate, placed] {
          unsigned char buf[2048];
          fill(buf, sizeof buf, 7);
          where = buf;
          placed.send(1);
          gate.recv();
          // The first half came from the pipe; the second kept its pattern (1024 * 131 is 0 mod
          // 256).
          return check(buf, 1024, 9) && check(buf + 1024, 1024, 7);
        });
        placed.recv();
        ASSERT_TRUE(hibernated_at_least(1));
        unsigned char src[1024];
        fill(src, sizeof src, 9);
        ASSERT_EQ(write(fds[1], src, sizeof src), 1024);
        // The kernel copies into the hibernated page: the fault waits for the restore.
        ASSERT_EQ(read(fds[0], where, 1024), 1024);
        gate.send(1);
        EXPECT_TRUE(owner.join());
        close(fds[0]);
        close(fds[1]);
      },
      hib_opts());
}

TEST_P(HibernationTest, TheDumpMarksHibernatedFibers) {
  SKIP_WITHOUT_USERFAULTFD();
  weft::run(
      [] {
        weft::Chan<int> gate;
        weft::Task<int> t = weft::spawn([gate] { return gate.recv().value_or(-1); });
        ASSERT_TRUE(hibernated_at_least(1));
        const std::string line = dump_line(t.id());
        EXPECT_NE(line.find("chan recv"), std::string::npos) << line;
        EXPECT_NE(line.find(", hibernated]"), std::string::npos) << line;
        gate.send(5);
        EXPECT_EQ(t.join(), 5);
      },
      hib_opts());
}

// The job owns its caller's frame (it may pin a buffer there for I/O): never hibernated.
TEST_P(HibernationTest, AFiberInABlockingCallKeepsItsStack) {
  SKIP_WITHOUT_USERFAULTFD();
  weft::run(
      [] {
        // On the heap: the job polls them, and main's own stack is hibernated while it sleeps.
        static std::atomic<bool> release, started;
        release = false;
        started = false;
        weft::Task<int> t = weft::spawn([] {
          char frame[2048];
          std::memset(frame, 7, sizeof frame);
          weft::blocking([&frame] {
            started = true;
            while (!release) usleep(1000);
            frame[0] = 8;  // the job writes its caller's frame
          });
          return frame[0] + frame[2047];
        });
        ASSERT_TRUE(eventually([] { return started.load(); }));
        // Many scans past the 20 ms threshold: its dump line never says hibernated (main's may).
        for (int i = 0; i < 30; ++i) {
          weft::this_fiber::sleep_for(10ms);
          const std::string line = dump_line(t.id());
          ASSERT_NE(line.find("blocking call"), std::string::npos) << line;
          ASSERT_EQ(line.find("hibernated"), std::string::npos) << line;
        }
        release = true;
        EXPECT_EQ(t.join(), 15);
      },
      hib_opts());
}

TEST_P(HibernationTest, ZeroTurnsItOff) {
  weft::Options o = opts();
  o.hibernate_after = 0ms;
  weft::run(
      [] {
        weft::Chan<int> gate;
        weft::Task<int> t = weft::spawn([gate] { return gate.recv().value_or(-1); });
        weft::this_fiber::sleep_for(300ms);
        const weft::Stats s = weft::stats();
        EXPECT_EQ(s.hibernations, 0u);
        EXPECT_EQ(s.fibers_hibernated, 0u);
        gate.send(1);
        EXPECT_EQ(t.join(), 1);
      },
      o);
}

// Many fibers that park for random short times and, while parked, have their stacks read and
// rewritten by others: hibernations race wake-ups and touches all the time. Every fiber checks
// its own buffer after each wait; every visitor checks what it reads.
TEST_P(HibernationTest, StressNothingIsLost) {
  SKIP_WITHOUT_USERFAULTFD();
  weft::Options o = opts();
  o.hibernate_after = 1ms;
  weft::run(
      [] {
        constexpr int kFibers = 48;
        constexpr int kRounds = 30;
        constexpr std::size_t kBytes = 1536;
        struct Shared {
          weft::Mutex mu;
          unsigned char* buf = nullptr;  // guarded by mu while the owner is parked
          unsigned seed = 0;
          bool parked = false;
        };
        std::vector<Shared> shared(kFibers);
        std::atomic<int> bad{0};
        weft::WaitGroup wg;
        wg.add(kFibers);
        for (int i = 0; i < kFibers; ++i) {
          weft::go([&shared, &bad, &wg, i] {
            unsigned char buf[kBytes];
            unsigned seed = static_cast<unsigned>(i);
            fill(buf, kBytes, seed);
            std::uint64_t rng = 0x9E3779B97F4A7C15ull * (i + 1);
            for (int r = 0; r < kRounds; ++r) {
              {
                std::lock_guard lock(shared[i].mu);
                shared[i].buf = buf;
                shared[i].seed = seed;
                shared[i].parked = true;
              }
              rng ^= rng << 13;
              rng ^= rng >> 7;
              rng ^= rng << 17;
              weft::this_fiber::sleep_for(std::chrono::milliseconds(rng % 25));
              {
                std::lock_guard lock(shared[i].mu);
                shared[i].parked = false;
                seed = shared[i].seed;  // a visitor may have rewritten it
              }
              if (!check(buf, kBytes, seed)) bad.fetch_add(1);
              // Visit another fiber's stack while it may be hibernated.
              Shared& other = shared[(i + 1 + rng % (kFibers - 1)) % kFibers];
              std::lock_guard lock(other.mu);
              if (other.parked) {
                if (!check(other.buf, kBytes, other.seed)) bad.fetch_add(1);
                other.seed += 1;
                fill(other.buf, kBytes, other.seed);
              }
            }
            {
              std::lock_guard lock(shared[i].mu);
              shared[i].parked = false;
            }
            wg.done();
          });
        }
        wg.wait();
        EXPECT_EQ(bad.load(), 0);
        const weft::Stats st = weft::stats();
        std::printf("hibernations %llu, restores %llu (by a touch %llu)\n",
                    static_cast<unsigned long long>(st.hibernations),
                    static_cast<unsigned long long>(st.hibernation_restores),
                    static_cast<unsigned long long>(st.hibernation_fault_restores));
      },
      o);
}

TEST(HibernationEnv, AMalformedValueIsAClearError) {
  setenv("WEFT_HIBERNATE_AFTER", "soon", 1);
  try {
    weft::run([] {});
    ADD_FAILURE() << "run() accepted WEFT_HIBERNATE_AFTER=soon";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("WEFT_HIBERNATE_AFTER"), std::string::npos) << e.what();
  }
  unsetenv("WEFT_HIBERNATE_AFTER");
}

TEST(HibernationEnv, OffDisablesIt) {
  setenv("WEFT_HIBERNATE_AFTER", "off", 1);
  weft::run([] {
    weft::Chan<int> gate;
    weft::Task<int> t = weft::spawn([gate] { return gate.recv().value_or(-1); });
    weft::this_fiber::sleep_for(1500ms);  // past the 1 s default
    EXPECT_EQ(weft::stats().hibernations, 0u);
    gate.send(1);
    t.join();
  });
  unsetenv("WEFT_HIBERNATE_AFTER");
}

// Valgrind runs one thread at a time under its own lock, and a thread that faults on a hibernated
// stack keeps that lock while it waits for the hibernator thread: the program would hang. The
// child below is the case that hung: the main fiber waits on a WaitGroup on its own stack, parked
// (hibernated, were hibernation on) while another fiber sleeps, then that fiber's done() writes
// into the main fiber's stack.
TEST(HibernationUnderValgrindChild, DISABLED_AWaitGroupOnAnIdleStack) {
  weft::Options o;
  o.hibernate_after = 20ms;
  weft::run(
      [] {
        weft::WaitGroup wg;
        wg.add(1);
        weft::go([&wg] {
          weft::this_fiber::sleep_for(1s);
          wg.done();
        });
        wg.wait();
        std::printf("waited; hibernations %llu\n",
                    static_cast<unsigned long long>(weft::stats().hibernations));
      },
      o);
}

TEST(HibernationUnderValgrind, IsOffAndSaysWhy) {
  if (kSanitized) GTEST_SKIP() << "a sanitized program cannot run under Valgrind";
  if (access("/usr/bin/valgrind", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/valgrind";
  SKIP_WITHOUT_USERFAULTFD();
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(len, 0);
  self[len] = 0;
  // `timeout` turns the old hang into a failure; Valgrind's own start-up takes a few seconds.
  const std::string cmd = std::string("timeout -s KILL 300 /usr/bin/valgrind --tool=none -q ") +
                          self +
                          " --gtest_also_run_disabled_tests"
                          " --gtest_filter=HibernationUnderValgrindChild.* 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "status " << status << " (137: killed after 300 s, the hang)\n"
      << out;
  EXPECT_NE(out.find("stack hibernation is off: the program runs under Valgrind"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("waited; hibernations 0"), std::string::npos) << out;
}

}  // namespace
