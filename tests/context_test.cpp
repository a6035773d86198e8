// Context and TaskGroup (weft/context.hpp, weft/task_group.hpp) under workers = 1, 2, 4 and 8:
// background is never done; cancel closes done() and sets err() for the context and all its
// descendants but never its parent, and is idempotent; deadlines cancel with kDeadlineExceeded
// (a passed one at once), children inherit the earlier deadline; values are found through
// ancestors by key identity; done() works in select; cancel from a plain thread; a parent keeps
// no record of children that are gone. TaskGroup: wait returns the first error and cancels the
// context for the siblings; the limit bounds running tasks; exceptions become errors.
// Deadline tests assert order (not before the deadline, eventually after), never a duration.
#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "weft/weft.hpp"

namespace {

using namespace weft_test;

class ContextTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(ContextTest);
class TaskGroupTest : public WorkersTest {};
WEFT_INSTANTIATE_WORKERS(TaskGroupTest);

bool is_done(const weft::Context& c) {
  return weft::select(weft::case_recv(c.done()), weft::case_default()) == 0;
}

TEST(ContextPlain, BackgroundIsNeverDone) {
  weft::Context bg = weft::background();
  EXPECT_TRUE(bg.err().ok());
  EXPECT_FALSE(bg.deadline().has_value());
  static const weft::ContextKey<int> kKey;
  EXPECT_EQ(bg.value(kKey), nullptr);
}

TEST_P(ContextTest, CancelReachesDescendantsButNotTheParent) {
  weft::run(
      [&] {
        auto [parent, cancel_parent] = weft::with_cancel(weft::background());
        auto [child, cancel_child] = weft::with_cancel(parent);
        static const weft::ContextKey<std::string> kName;
        weft::Context valued = weft::with_value(child, kName, std::string("req-1"));
        auto [grandchild, cancel_grandchild] = weft::with_cancel(valued);
        EXPECT_FALSE(is_done(grandchild));

        // A fiber parked on the grandchild's done() wakes when the child is cancelled.
        weft::Task<absl::Status> waiter = weft::spawn([&, gc = grandchild] {
          gc.done().recv();
          return gc.err();
        });
        cancel_child();
        EXPECT_EQ(waiter.join().code(), absl::StatusCode::kCancelled);
        EXPECT_EQ(child.err().code(), absl::StatusCode::kCancelled);
        EXPECT_EQ(valued.err().code(), absl::StatusCode::kCancelled);
        EXPECT_TRUE(is_done(valued));
        EXPECT_TRUE(parent.err().ok());
        EXPECT_FALSE(is_done(parent));
        cancel_child();  // idempotent
        cancel_grandchild();
        EXPECT_EQ(grandchild.err().code(), absl::StatusCode::kCancelled);
        // A child of a cancelled context is born cancelled.
        auto [late, cancel_late] = weft::with_cancel(child);
        EXPECT_EQ(late.err().code(), absl::StatusCode::kCancelled);
        EXPECT_TRUE(is_done(late));
        cancel_parent();
        EXPECT_EQ(parent.err().code(), absl::StatusCode::kCancelled);
      },
      opts());
}

TEST_P(ContextTest, DeadlinesCancelWithDeadlineExceededAndChildrenInheritTheEarlierOne) {
  weft::run(
      [&] {
        const auto t0 = std::chrono::steady_clock::now();
        auto [ctx, cancel] = weft::with_timeout(weft::background(), 30ms);
        ASSERT_TRUE(ctx.deadline().has_value());
        // A later own deadline does not extend the parent's; an earlier one wins.
        auto [later, cancel_later] = weft::with_timeout(ctx, std::chrono::hours(1));
        EXPECT_EQ(later.deadline(), ctx.deadline());
        auto [earlier, cancel_earlier] = weft::with_timeout(ctx, 1ms);
        EXPECT_LT(*earlier.deadline(), *ctx.deadline());
        later.done().recv();  // woken by the parent's deadline
        EXPECT_GE(std::chrono::steady_clock::now(), *ctx.deadline());
        EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
        EXPECT_EQ(ctx.err().code(), absl::StatusCode::kDeadlineExceeded);
        EXPECT_EQ(later.err().code(), absl::StatusCode::kDeadlineExceeded);
        EXPECT_EQ(earlier.err().code(), absl::StatusCode::kDeadlineExceeded);
        cancel();  // after the deadline: the error stays kDeadlineExceeded
        EXPECT_EQ(ctx.err().code(), absl::StatusCode::kDeadlineExceeded);
        // A deadline already passed cancels at once.
        auto [past, cancel_past] =
            weft::with_deadline(weft::background(), std::chrono::steady_clock::now() - 1s);
        EXPECT_EQ(past.err().code(), absl::StatusCode::kDeadlineExceeded);
        EXPECT_TRUE(is_done(past));
      },
      opts());
}

TEST_P(ContextTest, DoneWorksInSelectAgainstOtherWork) {
  weft::run(
      [&] {
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        weft::Chan<int> jobs(16);
        std::atomic<int> handled{0};
        weft::Task<void> worker = weft::spawn([&, ctx = ctx] {
          for (;;) {
            bool stop = false;
            weft::select(weft::case_recv(ctx.done(), [&](auto) { stop = true; }),
                         weft::case_recv(jobs, [&](std::optional<int>) { ++handled; }));
            if (stop) return;
          }
        });
        for (int i = 0; i < 10; ++i) jobs.send(i);
        ASSERT_TRUE(eventually([&] { return handled.load() == 10; }));
        cancel();
        worker.join();
        EXPECT_EQ(ctx.err().code(), absl::StatusCode::kCancelled);
      },
      opts());
}

TEST_P(ContextTest, ValuesAreFoundThroughAncestorsByKeyIdentity) {
  weft::run(
      [&] {
        static const weft::ContextKey<int> kA, kB;
        static const weft::ContextKey<std::string> kS;
        weft::Context a = weft::with_value(weft::background(), kA, 1);
        auto [c, cancel] = weft::with_cancel(a);
        weft::Context b = weft::with_value(c, kB, 2);
        weft::Context shadow = weft::with_value(b, kA, 10);
        weft::Context s = weft::with_value(shadow, kS, std::string("x"));
        ASSERT_NE(s.value(kA), nullptr);
        EXPECT_EQ(*s.value(kA), 10);  // the nearest wins
        EXPECT_EQ(*b.value(kA), 1);
        EXPECT_EQ(*s.value(kB), 2);
        EXPECT_EQ(*s.value(kS), "x");
        EXPECT_EQ(a.value(kB), nullptr);
        cancel();
        EXPECT_EQ(s.err().code(), absl::StatusCode::kCancelled);  // values don't hide cancel
      },
      opts());
}

TEST_P(ContextTest, CancelFromAPlainThreadWakesAFiber) {
  weft::run(
      [&] {
        auto [ctx, cancel] = weft::with_cancel(weft::background());
        std::thread t([cancel = cancel] { cancel(); });
        ctx.done().recv();
        t.join();
        EXPECT_EQ(ctx.err().code(), absl::StatusCode::kCancelled);
      },
      opts());
}

TEST_P(ContextTest, ManyShortLivedChildrenOfOneParentLeaveNothingBehind) {
  weft::run(
      [&] {
        auto [server, stop] = weft::with_cancel(weft::background());
        std::vector<weft::Task<void>> ts;
        for (int f = 0; f < 8; ++f) {
          ts.push_back(weft::spawn([&, server = server] {
            for (int i = 0; i < static_cast<int>(scaled(2000)); ++i) {
              auto [req, done_req] = weft::with_timeout(server, 1h);
              if (i % 2 == 0) done_req();  // cancelled or just dropped: both must unlist
            }
          }));
        }
        for (auto& t : ts) t.join();
        // Cancelling the parent now touches no child (they are all gone); it must still work.
        stop();
        EXPECT_EQ(server.err().code(), absl::StatusCode::kCancelled);
      },
      opts());
}

// ---- TaskGroup ----------------------------------------------------------------------------------

TEST_P(TaskGroupTest, WaitReturnsTheFirstErrorAndTheContextStopsTheOthers) {
  weft::run(
      [&] {
        weft::TaskGroup g;
        std::atomic<int> stopped_early{0};
        for (int i = 0; i < 8; ++i) {
          g.spawn([&g, &stopped_early] {
            g.context().done().recv();  // runs until a sibling fails
            ++stopped_early;
            return absl::OkStatus();
          });
        }
        g.spawn([] { return absl::InvalidArgumentError("bad input"); });
        const absl::Status s = g.wait();
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
        EXPECT_EQ(s.message(), "bad input");
        EXPECT_EQ(stopped_early.load(), 8);
        EXPECT_EQ(g.context().err().code(), absl::StatusCode::kCancelled);
      },
      opts());
}

TEST_P(TaskGroupTest, AllOkAndTheLimitBoundsRunningTasks) {
  weft::run(
      [&] {
        weft::TaskGroup g(weft::background(), 3);
        std::atomic<int> running{0}, max_running{0}, done{0};
        for (int i = 0; i < 40; ++i) {
          g.spawn([&] {
            const int r = ++running;
            int m = max_running.load();
            while (r > m && !max_running.compare_exchange_weak(m, r)) {
            }
            weft::this_fiber::yield();
            --running;
            ++done;
            return absl::OkStatus();
          });
        }
        EXPECT_TRUE(g.wait().ok());
        EXPECT_EQ(done.load(), 40);
        EXPECT_LE(max_running.load(), 3);
        EXPECT_GE(max_running.load(), 1);
      },
      opts());
}

TEST_P(TaskGroupTest, AThrowingTaskIsAnErrorAndAParentCancelReachesTheTasks) {
  weft::run(
      [&] {
        {
          weft::TaskGroup g;
          g.spawn([]() -> absl::Status { throw std::runtime_error("kaboom"); });
          const absl::Status s = g.wait();
          EXPECT_EQ(s.code(), absl::StatusCode::kUnknown);
          EXPECT_NE(s.message().find("kaboom"), std::string::npos) << s;
        }
        auto [parent, cancel] = weft::with_cancel(weft::background());
        weft::TaskGroup g(parent);
        g.spawn([&g] {
          g.context().done().recv();
          return g.context().err();
        });
        cancel();
        EXPECT_EQ(g.wait().code(), absl::StatusCode::kCancelled);
      },
      opts());
}

}  // namespace
