// weft runtime: stackful fibers on an M:N work-stealing scheduler.
//
//   weft::run([] {
//     auto t = weft::spawn([] { return 6 * 7; });
//     weft::go([] { weft::this_fiber::sleep_for(std::chrono::milliseconds(1)); });
//     return t.join();
//   });
//
// See README.md for the model and docs/api.md for the reference. Everything under
// weft::detail is private to weft and may change without notice.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iosfwd>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "weft/detail/fiber_api.hpp"
#include "weft/detail/park.hpp"
#include "weft/sync.hpp"

namespace weft {

// Which readiness/completion engine carries weft::net's waits (Options::netpoll).
enum class NetPoll : std::uint8_t {
  kAuto,     // epoll, except for a runtime of one worker with hibernation off (hibernate_after
             // 0): there io_uring where the kernel sets up a ring, else epoll with one line on
             // stderr saying why (docs/api.md, "Netpoller backends")
  kEpoll,    // edge-triggered epoll: every call tries its syscall and parks on readiness
  kIoUring,  // io_uring: a stream read that would wait becomes a queued recv; run() throws
             // std::runtime_error saying why if io_uring cannot be set up here
};

struct Options {
  // Kernel threads that run fibers (Go's GOMAXPROCS). 0: $WEFT_WORKERS, else
  // std::thread::hardware_concurrency().
  unsigned workers = 0;
  // Bytes per fiber stack, rounded up to whole pages. $WEFT_STACK_SIZE (e.g. "128K", "1M")
  // overrides this default when it is left at 64 KiB.
  std::size_t stack_size = 64 * 1024;
  // A guard page under every stack: an overflow aborts with a report naming the fiber.
  bool guard_pages = true;
  // Go's "all goroutines are asleep - deadlock!": abort with a fiber dump when every fiber is
  // parked and nothing (timer, I/O, blocking() job, outside thread) could ever wake one.
  bool detect_deadlock = true;
  // Report (once) a fiber that holds its worker longer than this without yielding, and let idle
  // workers take over the fibers queued behind it. 0 disables the report; the takeover still
  // happens, after 50 ms.
  std::chrono::milliseconds watchdog_threshold{50};
  // Upper bound on blocking() pool threads; more concurrent jobs queue.
  unsigned max_blocking_threads = 64;
  // Returning memory after load: the monitor gives the C allocator's free pages back to the
  // kernel (malloc_trim) about a second after the live fibers fell from a peak by a quarter (a
  // burst of connections ended), and once a period that starts at this interval and doubles
  // (up to 32x) while those trims return little. 0 disables both.
  std::chrono::milliseconds heap_return_interval{10000};
  // Stack-size profiling: when set (or $WEFT_STACK_PROFILE is), every fiber's stack high-water
  // mark is recorded by fiber name and written to this JSON file when run() returns; read it
  // with `tools/stackprof/weft-stackprof report FILE`. Costs nothing when empty.
  std::string stack_profile{};
  // Stack sizes by fiber name: a table that `weft-stackprof sizes PROFILE` writes from such a
  // profile (or $WEFT_STACK_SIZES when empty). A fiber started with FiberOptions::name and no
  // explicit size gets its name's size; others get stack_size. A malformed table makes run()
  // throw std::invalid_argument naming the file and line.
  std::string stack_sizes{};
  // Stack hibernation: a fiber parked longer than this gives its stack pages back to the kernel
  // and keeps a compact copy of its live bytes (zeros elided); it gets them back before it runs,
  // or the moment another thread touches its stack (userfaultfd), so pointers into a parked
  // fiber's stack stay valid. An idle blocking-style connection then costs a few hundred bytes
  // of stack instead of two or three pages. $WEFT_HIBERNATE_AFTER (milliseconds; 0 or "off")
  // overrides the default. 0 disables. Off while stack profiling runs; where userfaultfd is
  // unavailable (seccomp, no access to /dev/userfaultfd) one line on stderr says so.
  std::chrono::milliseconds hibernate_after{1000};
  // The netpoller backend for programs that use weft::net. $WEFT_NETPOLL (epoll, io_uring or
  // auto) overrides the default kAuto; stats().netpoll names the one running.
  NetPoll netpoll = NetPoll::kAuto;
};

// How to start one fiber: weft::go(FiberOptions{...}, f, args...) and
// weft::spawn(FiberOptions{...}, f).
struct FiberOptions {
  // The fiber's name from its first instruction (as this_fiber::set_name: dumps, profiles), and
  // the key into Options::stack_sizes. Read during the call only.
  std::string_view name{};
  // Usable stack bytes, rounded up to a size class (powers of two from 8 KiB to 128 MiB; a size
  // the default stacks hold at no extra cost uses them). 0: the stack-size table's size for
  // `name`, else Options::stack_size. Larger than 128 MiB: std::invalid_argument.
  std::size_t stack_size = 0;
};

namespace detail {

template <class R>
using StoredResult = std::conditional_t<std::is_reference_v<R>,
                                        std::reference_wrapper<std::remove_reference_t<R>>, R>;

// The outcome of a fiber's callable: nothing yet, a value, or an exception.
template <class R>
class Outcome {
 public:
  template <class F>
  void capture(F& f) {
    try {
      if constexpr (std::is_void_v<R>) {
        std::invoke(f);
        value_.template emplace<1>();
      } else {
        value_.template emplace<1>(std::invoke(f));
      }
    } catch (const FiberUnwind&) {
      throw;
    } catch (...) {
      value_.template emplace<2>(std::current_exception());
    }
  }
  bool ready() const noexcept { return value_.index() != 0; }
  // Called once. An exception is moved out, not shared: the joiner's thread then drops the
  // last reference, ordered after every reader by the join itself. (If the fiber kept a copy,
  // its last release could run on another worker with only the C++ runtime's uninstrumented
  // refcount ordering it after the catch handler's reads, which TSan cannot see.)
  R take() {
    if (value_.index() == 2) {
      std::exception_ptr e = std::exchange(std::get<2>(value_), nullptr);
      std::rethrow_exception(std::move(e));
    }
    if constexpr (std::is_void_v<R>) {
      return;
    } else if constexpr (std::is_reference_v<R>) {
      return std::get<1>(value_).get();
    } else {
      return std::move(std::get<1>(value_));
    }
  }

 private:
  using Value = std::conditional_t<std::is_void_v<R>, std::monostate, StoredResult<R>>;
  std::variant<std::monostate, Value, std::exception_ptr> value_;
};

// Closure of a go() fiber: the decay-copied callable and arguments.
template <class Fn, class... Args>
struct GoClosure {
  Fn fn;
  std::tuple<Args...> args;

  static void run(void* p) {
    auto* self = static_cast<GoClosure*>(p);
    struct Destroy {
      GoClosure* c;
      ~Destroy() { c->~GoClosure(); }
    } destroy{self};
    try {
      std::apply(std::move(self->fn), std::move(self->args));
    } catch (const FiberUnwind&) {
      throw;
    } catch (const std::exception& e) {
      die_uncaught_exception(e.what());
    } catch (...) {
      die_uncaught_exception("(an exception not derived from std::exception)");
    }
  }
  static void drop(void* p) noexcept { static_cast<GoClosure*>(p)->~GoClosure(); }
  static constexpr ClosureOps ops{&run, &drop, nullptr};
};

// Closure of a spawn() fiber: the callable until it ran, then its outcome until the Task reads it.
template <class F>
struct TaskClosure {
  using R = std::invoke_result_t<F&>;
  std::optional<F> fn;
  Outcome<R> outcome;

  static void run(void* p) {
    auto* self = static_cast<TaskClosure*>(p);
    struct Reset {
      std::optional<F>& fn;
      ~Reset() { fn.reset(); }
    } reset{self->fn};
    self->outcome.capture(*self->fn);
  }
  static void drop(void* p) noexcept { static_cast<TaskClosure*>(p)->fn.reset(); }
  static void release(void* p) noexcept { static_cast<TaskClosure*>(p)->~TaskClosure(); }
  static constexpr ClosureOps ops{&run, &drop, &release};
};

// Creates a fiber (options applied when given) and builds its closure in place; *closure
// points at it. Not yet started.
template <class Closure, class... CtorArgs>
Fiber* make_fiber(const FiberOptions* opts, Closure** closure, CtorArgs&&... args) {
  void* storage = nullptr;
  Fiber* f = fiber_create(&Closure::ops, sizeof(Closure), alignof(Closure), &storage);
  try {
    if (opts) fiber_configure(f, opts->name, opts->stack_size);
    *closure = ::new (storage) Closure{std::forward<CtorArgs>(args)...};
  } catch (...) {
    fiber_abandon(f);
    throw;
  }
  return f;
}

template <class F, class... Args>
void go_with(const FiberOptions* opts, F&& f, Args&&... args) {
  using Closure = GoClosure<std::decay_t<F>, std::decay_t<Args>...>;
  Closure* c = nullptr;
  Fiber* fiber = make_fiber<Closure>(
      opts, &c, std::forward<F>(f), std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...));
  fiber_start(fiber, false);
}

}  // namespace detail

// Starts a runtime, runs `main` as its first fiber and returns what it returns (or rethrows its
// exception). When main returns, every fiber still alive is unwound, the workers stop and run()
// returns; it may be called again. Throws std::logic_error if a runtime is already running.
template <class F>
auto run(F&& main, Options opts = {}) -> std::invoke_result_t<F&> {
  using R = std::invoke_result_t<F&>;
  struct Body {
    F& fn;
    detail::Outcome<R> outcome;
    static void invoke(void* p) {
      auto* b = static_cast<Body*>(p);
      b->outcome.capture(b->fn);
    }
  } body{main, {}};
  detail::run_runtime(&opts, &Body::invoke, &body);
  if (!body.outcome.ready())
    throw std::logic_error("weft::run: the main fiber was unwound before it returned");
  return body.outcome.take();
}

// Go's `go f(args...)`: a detached fiber. Arguments are decay-copied or moved, as by std::thread.
// An exception escaping it prints the fiber's id, name and what() and aborts (a Go panic).
template <class F, class... Args>
requires(!std::is_same_v<std::remove_cvref_t<F>, FiberOptions>) void go(F&& f, Args&&... args) {
  detail::go_with(nullptr, std::forward<F>(f), std::forward<Args>(args)...);
}
// The same, with a name and stack size chosen at start (FiberOptions).
template <class F, class... Args>
void go(const FiberOptions& opts, F&& f, Args&&... args) {
  detail::go_with(&opts, std::forward<F>(f), std::forward<Args>(args)...);
}

// A joinable fiber. Move-only. join() parks the caller until the fiber finished and returns its
// value or rethrows its exception. Destroying an unjoined Task detaches the fiber.
namespace detail {
template <class T>
class TaskStarter;
}  // namespace detail

template <class T>
class Task {
 public:
  Task() = default;
  Task(Task&& o) noexcept : fiber_(std::exchange(o.fiber_, nullptr)), outcome_(o.outcome_) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      detach();
      fiber_ = std::exchange(o.fiber_, nullptr);
      outcome_ = o.outcome_;
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { detach(); }

  bool joinable() const noexcept { return fiber_ != nullptr; }
  std::uint64_t id() const noexcept { return fiber_ ? detail::fiber_id(fiber_) : 0; }

  T join() {
    if (!fiber_)
      throw std::logic_error(
          "weft::Task::join: task is not joinable (already joined, "
          "moved from, or default-constructed)");
    detail::Fiber* f = fiber_;
    if (!detail::fiber_join(f)) {
      throw std::logic_error("weft::Task::join: the task's fiber was unwound at shutdown");
    }
    fiber_ = nullptr;
    struct Release {
      detail::Fiber* f;
      ~Release() { detail::fiber_release(f); }
    } release{f};
    return outcome_->take();
  }

  // Waits for the fiber to finish, bounded (weft/cancel.hpp): OK once it finished (join() then
  // returns at once), else kCancelled / kDeadlineExceeded with the task still joinable.
  absl::Status wait(const CancelToken& bound) {
    if (!fiber_)
      throw std::logic_error(
          "weft::Task::wait: task is not joinable (already joined, moved from, or "
          "default-constructed)");
    absl::Status why;
    return detail::fiber_join_bounded(fiber_, bound, &why) ? absl::OkStatus() : why;
  }

  // Asks the fiber to stop, as std::jthread's request_stop: its current and later bounded waits
  // (a CancelToken or Context, a timeout, sleep, network calls) give up with kCancelled, and
  // this_fiber::stop_requested() turns true, so it can clean up and return. Waits without a
  // bound are not interrupted. Idempotent; harmless once the fiber finished.
  void request_stop() noexcept {
    if (fiber_) detail::fiber_request_stop(fiber_);
  }

 private:
  template <class U>
  friend class detail::TaskStarter;
  Task(detail::Fiber* f, detail::Outcome<T>* o) : fiber_(f), outcome_(o) {}
  void detach() noexcept {
    // Like std::thread::detach: the fiber runs on; its result (or exception) is discarded.
    if (fiber_) detail::fiber_release(std::exchange(fiber_, nullptr));
  }
  detail::Fiber* fiber_ = nullptr;
  detail::Outcome<T>* outcome_ = nullptr;
};

namespace detail {
// spawn's body, with or without FiberOptions; Task's constructor is private to it.
template <class T>
class TaskStarter {
 public:
  template <class F>
  static Task<T> start(const FiberOptions* opts, F&& f) {
    using Closure = TaskClosure<std::decay_t<F>>;
    Closure* c = nullptr;
    Fiber* fiber = make_fiber<Closure>(opts, &c, std::optional<std::decay_t<F>>(std::forward<F>(f)),
                                       Outcome<T>{});
    fiber_start(fiber, true);
    return Task<T>(fiber, &c->outcome);
  }
};
}  // namespace detail

template <class F>
requires(!std::is_same_v<std::remove_cvref_t<F>, FiberOptions>) auto spawn(F&& f)
    -> Task<std::invoke_result_t<F&>> {
  return detail::TaskStarter<std::invoke_result_t<F&>>::start(nullptr, std::forward<F>(f));
}
// The same, with a name and stack size chosen at start (FiberOptions).
template <class F>
auto spawn(const FiberOptions& opts, F&& f) -> Task<std::invoke_result_t<F&>> {
  return detail::TaskStarter<std::invoke_result_t<F&>>::start(&opts, std::forward<F>(f));
}

namespace this_fiber {
// Lets other runnable fibers run; the caller goes to the back of its worker's queue.
void yield();
// Sleeps end early (without an error) when the fiber's Task::request_stop() is called.
void sleep_for(std::chrono::nanoseconds d);
void sleep_until(std::chrono::steady_clock::time_point t);
// Bounded: OK after sleeping the whole time, else the bound's kCancelled / kDeadlineExceeded.
absl::Status sleep_for(std::chrono::nanoseconds d, const CancelToken& bound);
absl::Status sleep_until(std::chrono::steady_clock::time_point t, const CancelToken& bound);
// True once the calling fiber's Task::request_stop() was called; false outside a fiber.
bool stop_requested() noexcept;
// Unique per fiber for the life of the process; 0 outside a fiber.
std::uint64_t id() noexcept;
// Shown in fiber dumps, watchdog reports and stack profiles.
void set_name(std::string_view name);
}  // namespace this_fiber

// Runs a blocking call on a thread pool kept apart from the workers; the calling fiber parks and
// its worker runs other fibers meanwhile. Outside a fiber it simply calls f.
template <class F>
auto blocking(F&& f) -> std::invoke_result_t<F&> {
  using R = std::invoke_result_t<F&>;
  if (!detail::in_fiber()) return std::invoke(f);
  struct Job {
    F& fn;
    detail::Outcome<R> outcome;
    static void invoke(void* p) {
      auto* j = static_cast<Job*>(p);
      j->outcome.capture(j->fn);
    }
  } job{f, {}};
  detail::run_blocking(&Job::invoke, &job);
  return job.outcome.take();
}

namespace detail {
template <class R>
using BoundedResult = std::conditional_t<std::is_void_v<R>, absl::Status, absl::StatusOr<R>>;
}  // namespace detail

// blocking(), bounded (weft/cancel.hpp): when the bound fires first, the caller stops waiting
// and gets kCancelled / kDeadlineExceeded, while the job runs on to its end on the pool and its
// result is dropped. So f is decay-copied (as by std::thread) and must not refer to the caller's
// frame; it must return a value, not a reference. Returns absl::StatusOr<R> (absl::Status for
// void); an exception f throws reaches the caller if it was still waiting. Outside a fiber it
// simply calls f.
template <class F>
auto blocking(const CancelToken& bound, F&& f)
    -> detail::BoundedResult<std::invoke_result_t<std::decay_t<F>&>> {
  using Fn = std::decay_t<F>;
  using R = std::invoke_result_t<Fn&>;
  static_assert(!std::is_reference_v<R>,
                "weft::blocking(bound, f): f must return a value, not a reference (the job may "
                "outlive the caller's wait)");
  if (!detail::in_fiber()) {
    if constexpr (std::is_void_v<R>) {
      std::invoke(f);
      return absl::OkStatus();
    } else {
      return std::invoke(f);
    }
  }
  struct Job {
    Fn fn;
    detail::Outcome<R> outcome;
    static void invoke(void* p) {
      auto* j = static_cast<Job*>(p);
      j->outcome.capture(j->fn);
    }
    static void destroy(void* p) noexcept { delete static_cast<Job*>(p); }
  };
  auto* job = new Job{Fn(std::forward<F>(f)), {}};
  absl::Status why;
  // false: the bound fired first, and the job (if it started) now belongs to the pool.
  if (!detail::run_blocking_bounded(&Job::invoke, &Job::destroy, job, bound, &why)) return why;
  std::unique_ptr<Job> own(job);
  if constexpr (std::is_void_v<R>) {
    own->outcome.take();
    return absl::OkStatus();
  } else {
    return own->outcome.take();
  }
}

// Counters since run() started. Cheap: it sums per-worker counters, takes no lock.
struct Stats {
  std::uint64_t fibers_alive = 0;    // created and not yet finished (queued, running or parked)
  std::uint64_t fibers_spawned = 0;  // go() + spawn() + the main fiber
  std::uint64_t switches = 0;        // context switches into fibers
  std::uint64_t steals = 0;          // successful steals (one may move half a queue)
  std::uint64_t parks = 0;           // park() calls by fibers (incl. ones their commit called off)
  std::uint64_t workers = 0;         // kernel threads running fibers
  std::uint64_t stacks_in_use = 0;   // stacks held by started, unfinished fibers
  std::uint64_t stacks_cached = 0;   // freed stacks kept for reuse (trimmed ones included)
  std::uint64_t stack_bytes_reserved = 0;  // address space reserved for stacks
  std::uint64_t timers_fired = 0;
  std::uint64_t blocking_jobs = 0;     // blocking() calls completed
  std::uint64_t blocking_threads = 0;  // blocking pool threads alive now
  std::uint64_t watchdog_reports = 0;  // fibers reported for holding a worker too long
  // Stack hibernation (Options::hibernate_after): fibers whose stack pages are given back now,
  // the bytes their compact images hold, the stack bytes those pages spanned (what was released
  // is at most this: only touched pages were resident), and since run() started, hibernations
  // and restores (by a switch-in, or because another thread touched a hibernated stack).
  std::uint64_t fibers_hibernated = 0;
  std::uint64_t hibernated_image_bytes = 0;
  std::uint64_t hibernated_stack_bytes = 0;
  std::uint64_t hibernations = 0;
  std::uint64_t hibernation_restores = 0;
  std::uint64_t hibernation_fault_restores = 0;  // of the restores, those a touch caused
  // The netpoller running: "epoll", "io_uring", or "none" (a program without weft::net).
  const char* netpoll = "none";
};
Stats stats();

// Writes stats(), each worker's run-queue lengths and sampled histograms of park time and
// scheduling latency in Prometheus' text exposition format 0.0.4, every name starting with
// `weft_` (a /metrics endpoint; docs/api.md lists them). Takes no lock. Without a running
// runtime the values are 0 and no worker is listed.
void write_metrics(std::ostream& out);

// Writes one line per fiber: id, name, state, what it waits on and for how long, stack used/size.
// A fiber is shown parked from the moment it switched out, which may be before its wait is fully
// registered (a select's socket cases are armed just after).
void dump_fibers(std::ostream& out);

}  // namespace weft
