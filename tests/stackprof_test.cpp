// Stack-size profiler (Options::stack_profile): the recorded high-water marks bracket what the
// fibers really used, fibers are grouped by name, fibers unwound at exit are counted, and the
// report tool (tools/stackprof/weft-stackprof) reads the file and recommends a size.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <weft/weft.hpp>

#include "test_util.hpp"

namespace {

using weft_test::WorkersTest;

WEFT_TEST_OPAQUE void use_stack(std::size_t bytes) {
  volatile char buf[24 * 1024];
  for (std::size_t i = 0; i < bytes && i < sizeof buf; i += 64) buf[i] = 1;
  buf[0] = 2;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The {"name": NAME, ...} object of the profile, as text.
std::string entry(const std::string& json, const std::string& name) {
  const std::size_t at = json.find("{\"name\": \"" + name + "\"");
  if (at == std::string::npos) return "";
  return json.substr(at, json.find('}', json.find("\"used\"", at)) - at + 1);
}

long field(const std::string& obj, const std::string& key) {
  std::smatch m;
  const std::regex re("\"" + key + "\": ([0-9]+)");
  if (!std::regex_search(obj, m, re)) return -1;
  return std::stol(m[1]);
}

std::string temp_path(const char* tag) {
  return testing::TempDir() + "weft_stackprof_" + tag + "_" + std::to_string(getpid()) + ".json";
}

class StackProfileTest : public WorkersTest {};

TEST_P(StackProfileTest, RecordsHighWaterMarksByName) {
  const std::string path = temp_path("marks");
  weft::Options o = opts();
  o.stack_profile = path;
  weft::run(
      [] {
        weft::WaitGroup wg;
        for (int i = 0; i < 20; ++i) {
          wg.add(2);
          weft::go([&wg] {
            weft::this_fiber::set_name("deep");
            use_stack(20 * 1024);
            wg.done();
          });
          weft::go([&wg] {
            weft::this_fiber::set_name("shallow");
            wg.done();
          });
        }
        wg.wait();
      },
      o);
  const std::string json = read_file(path);
  ASSERT_NE(json.find("\"format\": \"weft-stack-profile/1\""), std::string::npos) << json;
  const std::string deep = entry(json, "deep");
  const std::string shallow = entry(json, "shallow");
  ASSERT_FALSE(deep.empty()) << json;
  ASSERT_FALSE(shallow.empty()) << json;
  EXPECT_EQ(field(deep, "count"), 20);
  EXPECT_EQ(field(shallow, "count"), 20);
  const long stack_size = field(json, "stack_size");
  EXPECT_GE(field(deep, "max"), 20 * 1024) << deep;
  EXPECT_LT(field(deep, "max"), stack_size) << deep;
  EXPECT_GT(field(shallow, "max"), 0) << shallow;
  EXPECT_LT(field(shallow, "max"), field(deep, "max") - 16 * 1024) << shallow;
  std::remove(path.c_str());
}

TEST_P(StackProfileTest, FibersUnwoundAtExitAreRecorded) {
  const std::string path = temp_path("unwound");
  weft::Options o = opts();
  o.stack_profile = path;
  weft::run(
      [] {
        // Each fiber says it has started (a fiber that never ran has no stack to profile), so
        // main returns only once all five are parked, however slow the machine.
        weft::Chan<int> started(5);
        for (int i = 0; i < 5; ++i) {
          weft::go([started] {
            weft::this_fiber::set_name("parked-forever");
            started.send(1);
            weft::Chan<int> never;
            never.recv();  // unwound when main returns
          });
        }
        for (int i = 0; i < 5; ++i) (void)started.recv();
      },
      o);
  const std::string parked = entry(read_file(path), "parked-forever");
  ASSERT_FALSE(parked.empty());
  EXPECT_EQ(field(parked, "count"), 5);
  EXPECT_EQ(field(parked, "unwound"), 5);
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Workers, StackProfileTest, testing::Values(1u, 2u, 4u),
                         weft_test::WorkersName);

TEST(StackProfileTool, ReportRecommendsASize) {
  const std::string path = temp_path("tool");
  weft::Options o{.workers = 2};
  o.stack_profile = path;
  weft::run(
      [] {
        auto t = weft::spawn([] {
          weft::this_fiber::set_name("worker");
          use_stack(10 * 1024);
        });
        t.join();
      },
      o);
  const std::string svg = path + ".svg";
  const std::string cmd = std::string("python3 ") + WEFT_SOURCE_DIR +
                          "/tools/stackprof/weft-stackprof report " + path + " --svg " + svg +
                          " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("worker"), std::string::npos) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("stack_size = ([0-9]+)"))) << out;
  // The deepest fiber's use x1.5 plus a page, rounded up to a page, at least 16 KiB.
  const long rec = std::stol(m[1]);
  const long deepest = field(entry(read_file(path), "worker"), "max");
  ASSERT_GT(deepest, 10 * 1024);
  EXPECT_GE(rec, deepest * 3 / 2 + 4096);
  EXPECT_LE(rec, deepest * 3 / 2 + 2 * 4096);
  EXPECT_EQ(rec % 4096, 0);
  EXPECT_NE(read_file(svg).find("<svg"), std::string::npos);
  std::remove(path.c_str());
  std::remove(svg.c_str());
}

// The loop the tool closes: profile a run, write the sizes table from the profile, and the next
// run gives the named fiber the recommended size (rounded up to its size class).
TEST(StackProfileTool, SizesTableFeedsTheNextRun) {
  const std::string path = temp_path("loop1");
  const std::string table = temp_path("loop_table");
  const std::string path2 = temp_path("loop2");
  auto body = [] {
    weft::spawn(weft::FiberOptions{.name = "worker"}, [] { use_stack(10 * 1024); }).join();
  };
  weft::run(body, weft::Options{.workers = 2, .stack_profile = path});
  const std::string cmd = std::string("python3 ") + WEFT_SOURCE_DIR +
                          "/tools/stackprof/weft-stackprof sizes " + path + " -o " + table +
                          " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::smatch m;
  const std::string text = read_file(table);
  ASSERT_TRUE(std::regex_search(text, m, std::regex("\n([0-9]+) worker\n"))) << text;
  const std::size_t rec = std::stoul(m[1]);
  EXPECT_GT(rec, 10u * 1024);
  weft::run(body, weft::Options{.workers = 2, .stack_profile = path2, .stack_sizes = table});
  const long ran_with = field(entry(read_file(path2), "worker"), "stack_size");
  std::size_t want = 8192;
  while (want < rec) want *= 2;
  if (want >= 64 * 1024) want = 64 * 1024;  // the default class serves it
  if (weft_test::kSanitized) want = 256 * 1024;
  EXPECT_EQ(ran_with, static_cast<long>(want)) << "recommended " << rec;
  for (const std::string& f : {path, table, path2}) std::remove(f.c_str());
}

}  // namespace
