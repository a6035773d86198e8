// weft::write_metrics: its output is valid Prometheus text (checked by the strict parser of
// prom_text.hpp, and by `promtool check metrics` where promtool is on PATH), every name starts
// with weft_, the counters agree with stats(), each worker has its run-queue gauges, and the
// sampled histograms count what happened: after a workload of parks, the park-time histogram's
// _count is about 1/kPeriod of the parks (never more), every sampled park gives exactly one
// scheduling-latency sample, and yields give scheduling-latency samples of their own. On one
// worker, fibers that hand a semaphore to each other with a 1 ms busy wait on either side of each
// release park for at least 1 ms and wait at least 1 ms to run once woken, which the buckets
// show; parks woken from plain threads (blocking()) are sampled as well. Snapshots taken while
// the workers record (from a fiber and from a plain thread) always parse and never go backwards.
// Nothing here depends on timing: the 1 ms bounds are lower bounds that a slower machine only
// lengthens.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <thread>
#include <weft/chan.hpp>
#include <weft/runtime.hpp>
#include <weft/sync.hpp>

#include "prom_text.hpp"
#include "test_util.hpp"

namespace {

using namespace weft_test;
namespace prom = weft_test::prom;

// The runtime samples every kPeriod-th park and yield of each worker (kTrackingPeriod in
// runtime/src/sched/tuning.hpp); the histograms' HELP text says so, which the first test checks.
constexpr std::int64_t kPeriod = 64;

std::string metrics_text() {
  std::ostringstream os;
  weft::write_metrics(os);
  return os.str();
}

// `rounds` round trips between two fibers over two unbuffered channels: every one parks twice.
void pingpong(std::int64_t rounds) {
  weft::Chan<int> ping, pong;
  weft::WaitGroup wg;
  wg.add(2);
  weft::go([&] {
    for (std::int64_t i = 0; i < rounds; ++i) pong.send(*ping.recv());
    wg.done();
  });
  weft::go([&] {
    for (std::int64_t i = 0; i < rounds; ++i) {
      ping.send(static_cast<int>(i));
      (void)pong.recv();
    }
    wg.done();
  });
  wg.wait();
}

void spin_for(std::chrono::nanoseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

class MetricsTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(MetricsTest);

TEST_P(MetricsTest, ParsesAgreesWithStatsAndSamplesEveryEighthPark) {
  const unsigned n = workers();
  struct Out {
    std::string text;
    weft::Stats before, after;
  };
  const Out out = weft::run(
      [] {
        pingpong(scaled(4000));
        Out o;
        o.before = weft::stats();
        o.text = metrics_text();
        o.after = weft::stats();
        return o;
      },
      opts());
  const prom::Exposition e = prom::parse(out.text);
  ASSERT_EQ(e.error, "") << out.text;
  for (const prom::Family& f : e.families) {
    EXPECT_EQ(f.name.rfind("weft_", 0), 0u) << f.name;
    EXPECT_EQ(f.help.empty(), false) << f.name;
  }
  const auto type_of = [&e](const char* name) {
    const prom::Family* f = e.family(name);
    return f ? f->type : std::string("missing");
  };
  EXPECT_EQ(type_of("weft_fibers_alive"), "gauge");
  EXPECT_EQ(type_of("weft_fibers_spawned_total"), "counter");
  EXPECT_EQ(type_of("weft_context_switches_total"), "counter");
  EXPECT_EQ(type_of("weft_steals_total"), "counter");
  EXPECT_EQ(type_of("weft_parks_total"), "counter");
  EXPECT_EQ(type_of("weft_workers"), "gauge");
  EXPECT_EQ(type_of("weft_stacks_in_use"), "gauge");
  EXPECT_EQ(type_of("weft_stacks_cached"), "gauge");
  EXPECT_EQ(type_of("weft_stack_reserved_bytes"), "gauge");
  EXPECT_EQ(type_of("weft_timers_fired_total"), "counter");
  EXPECT_EQ(type_of("weft_blocking_jobs_total"), "counter");
  EXPECT_EQ(type_of("weft_blocking_threads"), "gauge");
  EXPECT_EQ(type_of("weft_watchdog_reports_total"), "counter");
  EXPECT_EQ(type_of("weft_run_queue_length"), "gauge");
  EXPECT_EQ(type_of("weft_spawn_queue_length"), "gauge");
  EXPECT_EQ(type_of("weft_global_run_queue_length"), "gauge");
  EXPECT_EQ(type_of("weft_park_duration_seconds"), "histogram");
  EXPECT_EQ(type_of("weft_scheduling_latency_seconds"), "histogram");

  // Counters lie between two stats() taken around the write; gauges are what the runtime has.
  const double parks = e.value("weft_parks_total");
  EXPECT_GE(parks, static_cast<double>(out.before.parks));
  EXPECT_LE(parks, static_cast<double>(out.after.parks));
  EXPECT_GE(parks, 2.0 * static_cast<double>(scaled(4000)));
  const double switches = e.value("weft_context_switches_total");
  EXPECT_GE(switches, static_cast<double>(out.before.switches));
  EXPECT_LE(switches, static_cast<double>(out.after.switches));
  EXPECT_GE(e.value("weft_fibers_spawned_total"), 3.0);  // main + the two
  EXPECT_EQ(e.value("weft_workers"), static_cast<double>(n));
  EXPECT_GT(e.value("weft_stack_reserved_bytes"), 0.0);
  EXPECT_GE(e.value("weft_fibers_alive"), 1.0);  // main

  // One run-queue and one spawn-queue gauge per worker, labelled 0..n-1, nothing queued now.
  ASSERT_EQ(e.family("weft_run_queue_length")->samples.size(), n);
  ASSERT_EQ(e.family("weft_spawn_queue_length")->samples.size(), n);
  for (unsigned i = 0; i < n; ++i) {
    const std::map<std::string, std::string> w = {{"worker", std::to_string(i)}};
    EXPECT_EQ(e.value("weft_run_queue_length", w), 0.0) << i;
    EXPECT_EQ(e.value("weft_spawn_queue_length", w), 0.0) << i;
  }
  EXPECT_EQ(e.value("weft_global_run_queue_length"), 0.0);

  // Every park of the run has been woken. Worker w tracked floor(parks_w / kPeriod) of its parks,
  // so the park-time _count is parks/kPeriod less under 1 per worker; each tracked park's fiber has
  // run since, giving one scheduling-latency sample each (nothing here yields).
  const prom::Histogram park = e.histogram("weft_park_duration_seconds");
  const prom::Histogram latency = e.histogram("weft_scheduling_latency_seconds");
  EXPECT_GT(park.count, 0.0);
  EXPECT_LE(kPeriod * park.count, parks);
  EXPECT_GE(kPeriod * park.count + (kPeriod - 1) * n, parks);
  EXPECT_NE(e.family("weft_park_duration_seconds")
                ->help.find("every " + std::to_string(kPeriod) + "th park"),
            std::string::npos);
  EXPECT_EQ(latency.count, park.count);
  EXPECT_GT(park.sum, 0.0);
  EXPECT_GT(latency.sum, 0.0);
}

TEST_P(MetricsTest, SnapshotsTakenWhileWorkersRecordParseAndNeverGoBack) {
  struct Reader {
    double parks = 0, park_count = 0, latency_count = 0;
    int snapshots = 0;
    std::string error;
    void check(const std::string& text) {
      const prom::Exposition e = prom::parse(text);
      if (!e.error.empty()) {
        error = e.error;
        return;
      }
      const double p = e.value("weft_parks_total");
      const double pc = e.histogram("weft_park_duration_seconds").count;
      const double lc = e.histogram("weft_scheduling_latency_seconds").count;
      if (p < parks || pc < park_count || lc < latency_count) error = "went back:\n" + text;
      parks = p;
      park_count = pc;
      latency_count = lc;
      ++snapshots;
    }
  };
  struct Out {
    Reader fiber, thread;
  };
  const Out out = weft::run(
      [] {
        Out o;
        std::atomic<bool> done{false};
        weft::WaitGroup readers;
        readers.add(1);
        weft::go([&] {  // a fiber reading while the others record
          while (!done.load() && o.fiber.error.empty()) {
            o.fiber.check(metrics_text());
            weft::this_fiber::yield();
          }
          readers.done();
        });
        std::thread t([&] {  // a plain thread reading at the same time
          while (!done.load() && o.thread.error.empty()) o.thread.check(metrics_text());
          o.thread.check(metrics_text());
        });
        pingpong(scaled(20000));
        done.store(true);
        readers.wait();
        weft::blocking([&t] { t.join(); });
        o.fiber.check(metrics_text());
        return o;
      },
      opts());
  EXPECT_EQ(out.fiber.error, "");
  EXPECT_EQ(out.thread.error, "");
  EXPECT_GE(out.fiber.snapshots, 1);
  EXPECT_GE(out.thread.snapshots, 1);
  EXPECT_GT(out.fiber.park_count, 0.0);
}

// One worker: A and B hand a semaphore each to the other, busy-waiting 1 ms before and after
// each release. Whenever one of them parks the other runs, and it reaches the release that
// wakes it only through a 1 ms wait; once woken, it runs only after the releaser's next 1 ms
// wait. So every park of A and B lasts >= 1 ms and every wake waits >= 1 ms to run. The only
// other park is main's WaitGroup wait, long too; main's wake at the end may wait less.
TEST(MetricsOneWorkerTest, BucketsShowHowLongFibersParkedAndWaitedToRun) {
  constexpr int kRounds = 80;  // 160 parks: at least 2 sampled
  constexpr auto kSpin = std::chrono::milliseconds(1);
  const std::string text = weft::run(
      [kSpin] {
        weft::Semaphore to_a(0), to_b(0);
        weft::WaitGroup wg;
        wg.add(2);
        weft::go([&] {
          for (int i = 0; i < kRounds; ++i) {
            to_a.acquire();
            spin_for(kSpin);
            to_b.release();
            spin_for(kSpin);
          }
          wg.done();
        });
        weft::go([&] {
          for (int i = 0; i < kRounds; ++i) {
            spin_for(kSpin);
            to_a.release();
            spin_for(kSpin);
            to_b.acquire();
          }
          wg.done();
        });
        wg.wait();
        return metrics_text();
      },
      weft::Options{.workers = 1});
  const prom::Exposition e = prom::parse(text);
  ASSERT_EQ(e.error, "") << text;
  const double parks = e.value("weft_parks_total");
  const prom::Histogram park = e.histogram("weft_park_duration_seconds");
  const prom::Histogram latency = e.histogram("weft_scheduling_latency_seconds");
  // One worker tracks exactly every kPeriod-th park, and nothing yields.
  EXPECT_EQ(park.count, static_cast<double>(static_cast<std::int64_t>(parks) / kPeriod)) << text;
  EXPECT_GE(park.count, 2.0) << text;
  EXPECT_EQ(latency.count, park.count) << text;
  EXPECT_EQ(park.count_below(1e-3), 0.0) << text;
  EXPECT_GE(park.sum, 1e-3 * park.count) << text;
  EXPECT_LE(latency.count_below(1e-3), 1.0) << text;
}

// Yields are sampled for scheduling latency too (every kPeriod-th of a worker's), not for park
// time.
TEST(MetricsOneWorkerTest, YieldsGiveSchedulingLatencySamples) {
  constexpr int kYields = 10 * kPeriod;
  const std::string text = weft::run(
      [] {
        weft::WaitGroup wg;
        wg.add(2);
        for (int f = 0; f < 2; ++f) {
          weft::go([&wg] {
            for (int i = 0; i < kYields; ++i) weft::this_fiber::yield();
            wg.done();
          });
        }
        wg.wait();
        return metrics_text();
      },
      weft::Options{.workers = 1});
  const prom::Exposition e = prom::parse(text);
  ASSERT_EQ(e.error, "") << text;
  const double parks = e.value("weft_parks_total");
  const prom::Histogram park = e.histogram("weft_park_duration_seconds");
  const prom::Histogram latency = e.histogram("weft_scheduling_latency_seconds");
  EXPECT_EQ(park.count, static_cast<double>(static_cast<std::int64_t>(parks) / kPeriod)) << text;
  // Each tracked park gave one sample; the rest are tracked yields: at most 2*kYields/kPeriod of
  // them, and at least kYields/kPeriod (one fiber's yields all switch to the other while both
  // run).
  const double yields = latency.count - park.count;
  EXPECT_LE(kPeriod * yields, 2.0 * kYields) << text;
  EXPECT_GE(kPeriod * yields, 1.0 * kYields) << text;
}

// blocking() parks its fiber until a pool thread, a plain thread, wakes it: those parks are
// sampled too (the waker has no worker of its own to record into).
TEST(MetricsOneWorkerTest, WakesFromPlainThreadsAreSampledToo) {
  const std::string text = weft::run(
      [] {
        for (int i = 0; i < 4 * kPeriod; ++i) weft::blocking([] {});
        return metrics_text();
      },
      weft::Options{.workers = 1});
  const prom::Exposition e = prom::parse(text);
  ASSERT_EQ(e.error, "") << text;
  const double parks = e.value("weft_parks_total");
  EXPECT_GE(parks, 4.0 * kPeriod);
  EXPECT_EQ(e.value("weft_blocking_jobs_total"), 4.0 * kPeriod);
  const prom::Histogram park = e.histogram("weft_park_duration_seconds");
  EXPECT_EQ(park.count, static_cast<double>(static_cast<std::int64_t>(parks) / kPeriod)) << text;
  EXPECT_EQ(e.histogram("weft_scheduling_latency_seconds").count, park.count) << text;
}

TEST(MetricsNoRuntimeTest, WritesZerosAndNoWorkers) {
  const std::string text = metrics_text();
  const prom::Exposition e = prom::parse(text);
  ASSERT_EQ(e.error, "") << text;
  EXPECT_EQ(e.value("weft_workers"), 0.0);
  EXPECT_EQ(e.value("weft_parks_total"), 0.0);
  EXPECT_EQ(e.family("weft_run_queue_length"), nullptr);
  EXPECT_EQ(e.histogram("weft_park_duration_seconds").count, 0.0);
}

// The same text through Prometheus' own checker (parser and linter), where it is installed.
TEST(MetricsPromtoolTest, PromtoolChecksItClean) {
  const std::string text = weft::run(
      [] {
        pingpong(scaled(1000));
        return metrics_text();
      },
      weft::Options{.workers = 2});
  const std::optional<prom::PromtoolResult> r = prom::promtool_check(text);
  if (!r) GTEST_SKIP() << "promtool is not on PATH";
  EXPECT_EQ(r->status, 0) << r->output << "\n" << text;
  EXPECT_EQ(r->output, "") << text;
}

// The parser itself rejects what it promises to reject.
TEST(PromTextParserTest, RejectsMalformedExpositions) {
  const auto error_of = [](const char* text) { return prom::parse(text).error; };
  EXPECT_EQ(error_of("# HELP a_total x\n# TYPE a_total counter\na_total 1\n"), "");
  EXPECT_NE(error_of("# HELP a_total x\n# TYPE a_total counter\na_total 1"), "");  // no newline
  EXPECT_NE(error_of("# HELP a x\n# TYPE a counter\na 1\n"), "");                  // not _total
  EXPECT_NE(error_of("a 1\n"), "");                                                // no TYPE
  EXPECT_NE(error_of("# HELP a x\n# TYPE a gauge\na 1\na 2\n"), "");               // duplicate
  EXPECT_NE(error_of("# HELP a x\n# TYPE a gauge\na{w=\"1\",w=\"2\"} 1\n"), "");
  EXPECT_NE(error_of("# HELP a x\n# TYPE a gauge\na 1\n\n"), "");  // blank line
  EXPECT_NE(error_of("# HELP a x\n# TYPE a gauge\na one\n"), "");
  EXPECT_NE(error_of("# HELP 1a x\n# TYPE 1a gauge\n1a 1\n"), "");
  EXPECT_NE(error_of("# HELP a x\n# TYPE a gauge\na 1 123\n"), "");  // timestamp
  EXPECT_NE(error_of("# HELP a x\n# TYPE a gauge\na 1\n# HELP b x\n# TYPE b gauge\nb 1\na 2\n"),
            "");  // a family split in two
  const char* hist_ok =
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
      "h_sum 3\nh_count 2\n";
  EXPECT_EQ(error_of(hist_ok), "");
  EXPECT_NE(error_of("# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\n"
                     "h_bucket{le=\"+Inf\"} 1\nh_sum 3\nh_count 1\n"),
            "");  // not cumulative
  EXPECT_NE(error_of("# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
                     "h_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 3\n"),
            "");  // +Inf != _count
  EXPECT_NE(error_of("# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 3\nh_count 1\n"),
            "");  // no +Inf
}

}  // namespace
