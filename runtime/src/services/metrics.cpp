// write_metrics: the runtime's state in Prometheus' text exposition format 0.0.4, for a /metrics
// endpoint. Names and meanings are listed in docs/api.md ("Metrics: write_metrics()").
//
// What it reads, all without a lock and from any thread: the runtime's stats() (summed relaxed
// counters), each worker's queue lengths (atomics; approximate while workers run) and the sampled
// histograms of sched/tracking.hpp, summed over the workers into snapshots.
//
// Invariants of the output:
//  - every family has one `# HELP` and then one `# TYPE` line, followed by all of its samples;
//  - every name starts with `weft_`; counters end in `_total`; units are base units named in the
//    metric (`_seconds`, `_bytes`); per-worker series carry `worker="N"`, N from 0;
//  - a histogram's buckets are cumulative, never decrease and end in `le="+Inf"`, which equals
//    its `_count`, even while workers record: the count is the sum of the buckets read.
#include <charconv>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "sched/scheduler.hpp"
#include "sched/tracking.hpp"
#include "weft/runtime.hpp"

namespace weft {
namespace {

using detail::LatencyHistogram;

class Writer {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    text_.append("# HELP ").append(name).append(" ").append(help).append("\n");
    text_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  }
  // `labels` is empty or the text between the braces, e.g. worker="0".
  template <class V>
  void sample(std::string_view name, std::string_view labels, V value) {
    text_.append(name);
    if (!labels.empty()) text_.append("{").append(labels).append("}");
    text_.append(" ");
    number(value);
    text_.append("\n");
  }
  void counter(std::string_view name, std::string_view help, std::uint64_t value) {
    family(name, "counter", help);
    sample(name, {}, value);
  }
  void gauge(std::string_view name, std::string_view help, std::uint64_t value) {
    family(name, "gauge", help);
    sample(name, {}, value);
  }
  void histogram(std::string_view name, std::string_view help,
                 const LatencyHistogram::Snapshot& s) {
    family(name, "histogram", help);
    const std::string bucket = std::string(name) + "_bucket";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
      cumulative += s.counts[i];
      std::string le = "le=\"";
      if (i < LatencyHistogram::kBounds) {
        le += shortest(static_cast<double>(LatencyHistogram::bound_ns(i)) / 1e9);
      } else {
        le += "+Inf";
      }
      le += "\"";
      sample(bucket, le, cumulative);
    }
    sample(std::string(name) + "_sum", {}, static_cast<double>(s.sum_ns) / 1e9);
    sample(std::string(name) + "_count", {}, cumulative);
  }
  const std::string& text() const { return text_; }

 private:
  // Shortest text that reads back as the same double ("1.28e-07", "0.25", "17.179869184").
  static std::string shortest(double v) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  }
  void number(std::uint64_t v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    text_.append(buf, r.ptr);
  }
  void number(double v) { text_.append(shortest(v)); }

  std::string text_;
};

}  // namespace

void write_metrics(std::ostream& out) {
  detail::Runtime* rt = detail::current_runtime();
  const Stats s = rt ? rt->stats() : Stats{};
  Writer m;
  m.gauge("weft_fibers_alive", "Fibers created and not yet finished (queued, running or parked).",
          s.fibers_alive);
  m.counter("weft_fibers_spawned_total", "Fibers started: go(), spawn() and the main fiber.",
            s.fibers_spawned);
  m.counter("weft_context_switches_total", "Context switches into fibers.", s.switches);
  m.counter("weft_steals_total",
            "Successful steals from another worker's queues (one may move half a queue).",
            s.steals);
  m.counter("weft_parks_total",
            "Fiber parks: waits on a primitive, timer, join, blocking job or I/O, called-off "
            "ones included.",
            s.parks);
  m.gauge("weft_workers", "Kernel threads running fibers.", s.workers);
  m.gauge("weft_stacks_in_use", "Stacks held by started, unfinished fibers.", s.stacks_in_use);
  m.gauge("weft_stacks_cached", "Freed stacks kept in the shared pool for reuse.", s.stacks_cached);
  m.gauge("weft_stack_reserved_bytes", "Address space reserved for fiber stacks (not resident).",
          s.stack_bytes_reserved);
  m.counter("weft_timers_fired_total",
            "Runtime timers whose callback ran: sleeps, timeouts, deadlines, timer channels.",
            s.timers_fired);
  m.counter("weft_blocking_jobs_total", "blocking() calls completed.", s.blocking_jobs);
  m.gauge("weft_blocking_threads", "Blocking-pool threads alive.", s.blocking_threads);
  m.counter("weft_watchdog_reports_total", "Fibers reported for holding a worker too long.",
            s.watchdog_reports);
  m.gauge("weft_fibers_hibernated", "Parked fibers whose stack pages are given back now.",
          s.fibers_hibernated);
  m.gauge("weft_hibernated_image_bytes", "Bytes the hibernated stacks' compact copies hold.",
          s.hibernated_image_bytes);
  m.gauge("weft_hibernated_stack_bytes",
          "Stack bytes the hibernated fibers' released ranges span (an upper bound on what was "
          "freed).",
          s.hibernated_stack_bytes);
  m.counter("weft_hibernations_total", "Stacks hibernated.", s.hibernations);
  m.counter("weft_hibernation_restores_total",
            "Hibernated stacks brought back, by a switch-in or a touch.", s.hibernation_restores);
  m.counter("weft_hibernation_fault_restores_total",
            "Hibernated stacks brought back because another thread touched them.",
            s.hibernation_fault_restores);

  LatencyHistogram::Snapshot parked, latency;
  if (rt) {
    const unsigned n = rt->nworkers();
    m.family("weft_run_queue_length", "gauge",
             "Fibers that ran before and wait to run again on each worker (its runnext slot, "
             "run queue and spill list).");
    for (unsigned i = 0; i < n; ++i) {
      const detail::Worker& w = rt->worker(i);
      std::uint64_t len = w.runq.size();
      if (len > detail::RunQueue::kCapacity) len = detail::RunQueue::kCapacity;  // a racing read
      len += w.spill_size.load(std::memory_order_relaxed);
      if (w.runnext.peek()) ++len;
      m.sample("weft_run_queue_length", "worker=\"" + std::to_string(i) + "\"", len);
    }
    m.family("weft_spawn_queue_length", "gauge",
             "Spawned fibers not started yet, on each worker's spawn queue.");
    for (unsigned i = 0; i < n; ++i) {
      m.sample("weft_spawn_queue_length", "worker=\"" + std::to_string(i) + "\"",
               static_cast<std::uint64_t>(rt->worker(i).spawned_q.size()));
    }
    const std::int64_t global = rt->global_size();
    m.gauge("weft_global_run_queue_length", "Fibers in the global run queue.",
            static_cast<std::uint64_t>(global > 0 ? global : 0));
    for (unsigned i = 0; i < n; ++i) {
      rt->worker(i).park_hist.read_into(parked);
      rt->worker(i).latency_hist.read_into(latency);
    }
    rt->foreign_park_hist.read_into(parked);
  } else {
    m.gauge("weft_global_run_queue_length", "Fibers in the global run queue.", 0);
  }
  const std::string nth = std::to_string(detail::kTrackingPeriod) + "th";
  m.histogram("weft_park_duration_seconds",
              "How long a fiber stayed parked, from park to wake-up. Sampled: every " + nth +
                  " park of each worker.",
              parked);
  m.histogram("weft_scheduling_latency_seconds",
              "How long a fiber waited to run once it was woken or yielded. Sampled: every " + nth +
                  " park and every " + nth + " yield of each worker.",
              latency);
  out << m.text();
}

}  // namespace weft
