// Per-fiber stack sizes (FiberOptions, Options::stack_sizes / $WEFT_STACK_SIZES): a fiber started
// with a name carries it from its first instruction; an explicit size, else its name's size in
// the table, else Options::stack_size decides its stack (rounded up to a size class, as the fiber
// dump shows); a deep fiber given a large stack runs where the default would overflow; a fiber
// that overflows its own small stack dies with a report naming that size; a malformed table, a
// missing one or a size above the largest class is a clear error; the stack profile records the
// size each name ran with. Every runtime test runs at 1, 2, 4 and 8 workers.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <weft/weft.hpp>

#include "test_util.hpp"

namespace {

using namespace weft_test;

// What a stack of `bytes` becomes: sanitizer builds raise every size to 256 KiB.
std::size_t effective(std::size_t bytes) {
  return kSanitized && bytes < 256 * 1024 ? 256 * 1024 : bytes;
}

std::string temp_file(const char* tag, const std::string& text) {
  const std::string path =
      testing::TempDir() + "weft_stack_sizes_" + tag + "_" + std::to_string(getpid()) + ".txt";
  std::ofstream(path) << text;
  return path;
}

// Uses `kb` KiB of its own stack (a frame the optimiser must keep).
WEFT_TEST_OPAQUE int use_stack_kib(int kb) {
  volatile char frame[1024];
  frame[kb % 1024] = static_cast<char>(kb);
  if (kb <= 1) return frame[kb % 1024];
  return use_stack_kib(kb - 1) + frame[kb % 1024];
}

class StackSizeTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(StackSizeTest);

TEST_P(StackSizeTest, FiberOptionsNameAndSizeShowInTheDumpBeforeTheFiberRuns) {
  weft::run(
      [] {
        weft::Chan<int> gate;
        weft::Task<int> t =
            weft::spawn(weft::FiberOptions{.name = "small-one", .stack_size = 16384},
                        [gate] { return gate.recv().value_or(-1); });
        // Parked on the channel: its line names it and gives its stack's size.
        const std::uint64_t id = t.id();
        ASSERT_TRUE(eventually([&] { return parked_on("chan recv", {id}); }));
        const std::string line = dump_line(id);
        EXPECT_NE(line.find("\"small-one\""), std::string::npos) << line;
        EXPECT_NE(line.find("/" + std::to_string(effective(16384)) + " B"), std::string::npos)
            << line;
        gate.send(7);
        EXPECT_EQ(t.join(), 7);
      },
      opts());
}

TEST_P(StackSizeTest, GoWithOptionsPassesItsArguments) {
  weft::run(
      [] {
        weft::Chan<std::string> out(1);
        weft::go(
            weft::FiberOptions{.name = "greeter", .stack_size = 8192},
            [](weft::Chan<std::string> c, std::string who, int n) {
              c.send(who + std::to_string(n));
            },
            out, std::string("fiber-"), 3);
        EXPECT_EQ(out.recv().value_or(""), "fiber-3");
      },
      opts());
}

TEST_P(StackSizeTest, ALargeStackRunsWhatTheDefaultWouldOverflow) {
  weft::run(
      [] {
        // 512 KiB of frames, on a 1 MiB stack (the default is 64 KiB).
        weft::Task<int> t = weft::spawn(weft::FiberOptions{.stack_size = 1 << 20},
                                        [] { return use_stack_kib(512) != 0 ? 1 : 0; });
        EXPECT_EQ(t.join(), 1);
      },
      opts());
}

TEST_P(StackSizeTest, TheTableSizesFibersByNameAndAnExplicitSizeWins) {
  const std::string path = temp_file("table",
                                     "# weft-stack-sizes/1\n\n16K   small one\n"
                                     "1M deep\n  32768 listed  \n");
  weft::Options o = opts();
  o.stack_sizes = path;
  weft::run(
      [] {
        weft::Chan<int> gate;
        auto parked = [gate] { return gate.recv().value_or(-1); };
        weft::Task<int> small = weft::spawn(weft::FiberOptions{.name = "small one"}, parked);
        weft::Task<int> listed =
            weft::spawn(weft::FiberOptions{.name = "listed", .stack_size = 8192}, parked);
        weft::Task<int> unlisted = weft::spawn(weft::FiberOptions{.name = "unlisted"}, parked);
        weft::Task<int> deep = weft::spawn(weft::FiberOptions{.name = "deep"},
                                           [] { return use_stack_kib(512) != 0 ? 1 : 0; });
        EXPECT_EQ(deep.join(), 1);
        ASSERT_TRUE(eventually([&] {
          return parked_on("chan recv", {small.id(), listed.id(), unlisted.id()});
        }));
        EXPECT_NE(dump_line(small.id()).find("/" + std::to_string(effective(16384)) + " B"),
                  std::string::npos)
            << dump_line(small.id());
        EXPECT_NE(dump_line(listed.id()).find("/" + std::to_string(effective(8192)) + " B"),
                  std::string::npos)
            << "an explicit size overrides the table: " << dump_line(listed.id());
        EXPECT_NE(dump_line(unlisted.id()).find("/" + std::to_string(effective(65536)) + " B"),
                  std::string::npos)
            << "a name not in the table gets the default: " << dump_line(unlisted.id());
        gate.close();
        small.join();
        listed.join();
        unlisted.join();
      },
      o);
  std::remove(path.c_str());
}

TEST(StackSizeTable, TheEnvironmentVariableNamesTheTable) {
  const std::string path = temp_file("env", "16K from-env\n");
  ASSERT_EQ(setenv("WEFT_STACK_SIZES", path.c_str(), 1), 0);
  std::string line;
  weft::run(
      [&] {
        weft::Chan<int> gate;
        weft::Task<int> t = weft::spawn(weft::FiberOptions{.name = "from-env"},
                                        [gate] { return gate.recv().value_or(-1); });
        EXPECT_TRUE(eventually([&] { return parked_on("chan recv", {t.id()}); }));
        line = dump_line(t.id());
        gate.close();
        t.join();
      },
      weft::Options{.workers = 2});
  unsetenv("WEFT_STACK_SIZES");
  std::remove(path.c_str());
  EXPECT_NE(line.find("/" + std::to_string(effective(16384)) + " B"), std::string::npos) << line;
}

// run() refuses a table it cannot use, with the file, the line and what is wrong.
void expect_rejected(const std::string& text, const std::string& what) {
  const std::string path = temp_file("bad", text);
  try {
    weft::run([] {}, weft::Options{.workers = 1, .stack_sizes = path});
    ADD_FAILURE() << "a table with " << what << " was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":2:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(StackSizeTable, MalformedTablesAreRejectedWithTheFileAndLine) {
  expect_rejected("16K ok\n16K\n", "no fiber name");
  expect_rejected("16K ok\nlots name\n", "is not a stack size");
  expect_rejected("16K ok\n1G too-big\n", "is not a stack size");
  expect_rejected("16K ok\n100 too-small\n", "is not a stack size");
  expect_rejected("16K ok\n32K ok\n", "listed twice");
  EXPECT_THROW(weft::run([] {}, weft::Options{.workers = 1, .stack_sizes = "/nonexistent/sizes"}),
               std::invalid_argument);
}

TEST_P(StackSizeTest, ASizeAboveTheLargestClassThrowsAndStartsNothing) {
  weft::run(
      [] {
        const std::uint64_t before = weft::stats().fibers_spawned;
        EXPECT_THROW(
            weft::go(weft::FiberOptions{.name = "huge", .stack_size = std::size_t{1} << 30}, [] {}),
            std::invalid_argument);
        EXPECT_THROW(weft::spawn(weft::FiberOptions{.stack_size = std::size_t{1} << 30}, [] {}),
                     std::invalid_argument);
        EXPECT_EQ(weft::stats().fibers_spawned, before);
      },
      opts());
}

TEST_P(StackSizeTest, TheProfileRecordsTheStackSizeEachNameRanWith) {
  const std::string path =
      testing::TempDir() + "weft_stack_sizes_prof_" + std::to_string(getpid()) + ".json";
  weft::Options o = opts();
  o.stack_profile = path;
  weft::run(
      [] {
        weft::spawn(weft::FiberOptions{.name = "sixteen", .stack_size = 16384}, [] {}).join();
        weft::spawn(weft::FiberOptions{.name = "default"}, [] {}).join();
      },
      o);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string json = ss.str();
  std::remove(path.c_str());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(json, m, std::regex("\"sixteen\"[^}]*\"stack_size\": ([0-9]+)")))
      << json;
  EXPECT_EQ(std::stoul(m[1]), effective(16384));
  ASSERT_TRUE(std::regex_search(json, m, std::regex("\"default\"[^}]*\"stack_size\": ([0-9]+)")))
      << json;
  EXPECT_EQ(std::stoul(m[1]), effective(65536));
}

class StackSizeDeathTest : public WorkersTest {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};
WEFT_INSTANTIATE_WORKERS(StackSizeDeathTest);

TEST_P(StackSizeDeathTest, OverflowingItsOwnSmallStackIsReportedWithThatSize) {
  if (kSanitized) GTEST_SKIP() << "sanitizer builds raise small stacks to 256 KiB";
  const weft::Options o = opts();
  EXPECT_DEATH(weft::run(
                   [] {
                     weft::spawn(weft::FiberOptions{.name = "tiny", .stack_size = 16384}, [] {
                       return use_stack_kib(64);
                     }).join();
                   },
                   o),
               "weft: fiber [0-9]+ \"tiny\" overflowed its 16 KiB stack \\(its own size");
}

// weft::detail::release_stack_below_frame (used after TLS handshakes): the pages a finished deep
// call touched are no longer resident afterwards (mincore), the frames still live keep their
// values, and the next deep call runs on fresh pages.
WEFT_TEST_OPAQUE std::uintptr_t deep_frame(int depth, std::uint64_t* sum) {
  volatile char pad[1024];
  for (std::size_t i = 0; i < sizeof pad; ++i) pad[i] = static_cast<char>(depth + i);
  *sum += static_cast<unsigned char>(pad[depth % sizeof pad]);
  if (depth == 0) return reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  const std::uintptr_t r = deep_frame(depth - 1, sum);  // not a tail call: the frames stack up
  *sum += static_cast<unsigned char>(pad[0]);
  return r;
}

bool page_resident(std::uintptr_t addr) {
  const std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  unsigned char v = 0;
  if (mincore(reinterpret_cast<void*>(addr & ~(page - 1)), page, &v) != 0) return true;
  return (v & 1) != 0;
}

TEST_P(StackSizeTest, ReleasingTheStackBelowTheFrameDropsTheDeepPagesAndKeepsTheLiveOnes) {
  weft::run(
      [] {
        weft::Task<void> t = weft::spawn([] {
          volatile std::uint64_t live = 0x5eed;  // a live frame's value: must survive
          std::uint64_t sum1 = 0, sum2 = 0;
          const std::uintptr_t deepest = deep_frame(40, &sum1);  // ~40 KiB below this frame
          EXPECT_TRUE(page_resident(deepest));
          weft::detail::release_stack_below_frame();
          EXPECT_FALSE(page_resident(deepest)) << "the deep call's pages stay resident";
          EXPECT_EQ(live, 0x5eedu);
          EXPECT_EQ(deep_frame(40, &sum2), deepest);  // runs again, on zero-filled pages
          EXPECT_EQ(sum1, sum2);
        });
        t.join();
        weft::detail::release_stack_below_frame();  // the main fiber: a no-op or a release, safe
      },
      opts());
}

}  // namespace
