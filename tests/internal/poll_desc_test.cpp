// PollDesc (netpoll/src/poll_desc.hpp), the netpoller's per-fd readiness record, tested directly.
// Without a runtime: (index, seq) tokens resolve to their descriptor until close, then are stale,
// also after the descriptor was reused for another fd; an edge (poll_ready) sets kReady whatever
// the slot holds and wakes nobody unless a waiter is parked; close and a passed deadline empty a
// kWait slot (so a waiter's commit CAS fails) and leave kReady alone; calls in flight keep the fd
// open after close, and a call that begins after close fails. Under weft::run with a pipe: an
// edge before the wait is consumed without parking; a parked waiter is woken by a real edge, by
// close (on both sides, also while a call holds the descriptor), and by its deadline; a second
// waiter on one side gets kBusy; a passed deadline fails a wait at once and clearing it re-arms.
#include "poll_desc.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>
#include <weft/weft.hpp>

#include "../net_test_util.hpp"
#include "../test_util.hpp"
#include "desc_table.hpp"

namespace {

using namespace std::chrono_literals;
using weft::detail::FiberList;
using weft::net::detail::Mode;
using weft::net::detail::PollDesc;
using weft::net::detail::WaitResult;
namespace pd_api = weft::net::detail;

using weft_net_test::Pipe;

bool fd_open(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

// ---- without a runtime
// ---------------------------------------------------------------------------

TEST(PollDesc, TokenResolvesUntilCloseThenIsStale) {
  Pipe p;
  PollDesc* pd = pd_api::poll_open(p.r, /*owns_fd=*/false);
  ASSERT_NE(pd, nullptr) << std::strerror(errno);
  EXPECT_EQ(pd->fd, p.r);
  EXPECT_EQ(pd->rd.slot.load(), PollDesc::kEmpty);
  EXPECT_EQ(pd->wr.slot.load(), PollDesc::kEmpty);
  const std::uint64_t token = pd_api::poll_token(pd);
  EXPECT_EQ(pd_api::poll_from_token(token), pd);
  EXPECT_EQ(static_cast<std::uint32_t>(token >> 32), pd->index);
  pd_api::poll_close(pd);
  EXPECT_EQ(pd_api::poll_from_token(token), nullptr) << "a stale event must be dropped";
  EXPECT_TRUE(fd_open(p.r)) << "owns_fd=false: the fd is the caller's";
}

TEST(PollDesc, ReusedDescriptorKeepsOldTokensStale) {
  Pipe p;
  PollDesc* first = pd_api::poll_open(p.r, false);
  ASSERT_NE(first, nullptr);
  const std::uint64_t old_token = pd_api::poll_token(first);
  pd_api::poll_close(first);
  // The lowest free index is reused first: the closed descriptor comes back at once.
  PollDesc* again = pd_api::poll_open(p.r, false);
  ASSERT_EQ(again, first) << "the lowest free descriptor was not reused";
  const std::uint64_t new_token = pd_api::poll_token(again);
  EXPECT_NE(new_token, old_token);
  EXPECT_EQ(new_token >> 32, old_token >> 32) << "same table slot";
  EXPECT_EQ(pd_api::poll_from_token(old_token), nullptr);
  EXPECT_EQ(pd_api::poll_from_token(new_token), again);
  pd_api::poll_close(again);
  EXPECT_EQ(pd_api::poll_from_token(new_token), nullptr);
}

// ---- the table (desc_table.hpp) ---------------------------------------------------------------

TEST(IndexBitmap, TakesTheLowestFreeIndexAndNothingPastTheEnd) {
  for (std::uint32_t n : {1u, 63u, 64u, 65u, 4095u, 4096u, 4097u, 70000u}) {
    pd_api::IndexBitmap b(n);
    for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(b.take(), i) << "n=" << n;
    EXPECT_EQ(b.take(), -1) << "n=" << n << ": all taken";
    EXPECT_TRUE(b.any_taken(0, n));
    // Free a scattered few: they come back lowest first, whatever order they were freed in.
    const std::uint32_t picks[] = {n - 1, n / 2, n / 3, 0};
    for (std::uint32_t i : picks) {
      if (b.taken(i)) b.put(i);
    }
    std::vector<std::uint32_t> want;
    for (std::uint32_t i : picks) want.push_back(i);
    std::sort(want.begin(), want.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    for (std::uint32_t i : want) EXPECT_EQ(b.take(), i) << "n=" << n;
    EXPECT_EQ(b.take(), -1) << "n=" << n;
  }
}

TEST(IndexBitmap, AnyTakenLooksAtExactlyTheRange) {
  pd_api::IndexBitmap b(1000);
  EXPECT_FALSE(b.any_taken(0, 1000));
  for (int i = 0; i <= 130; ++i) ASSERT_EQ(b.take(), i);
  for (std::uint32_t i = 0; i < 130; ++i) b.put(i);  // only 130 stays taken
  EXPECT_FALSE(b.any_taken(0, 130));
  EXPECT_TRUE(b.any_taken(0, 131));
  EXPECT_TRUE(b.any_taken(130, 131));
  EXPECT_TRUE(b.any_taken(64, 200));
  EXPECT_FALSE(b.any_taken(131, 1000));
  EXPECT_FALSE(b.any_taken(131, 5000)) << "past the end counts as free here";
  EXPECT_EQ(b.take(), 0);
}

// A burst of descriptors, all closed, leaves whole pages free that the table gives back; their
// tokens stay stale, and descriptors on a page given back (read back as zeros) work as new.
TEST(DescTable, ABurstsPagesGoBackAndComeBackAsFreshDescriptors) {
  Pipe p;
  constexpr int kBurst = 2000;  // ~80 pages, most above the kept ones
  rlimit rl{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < kBurst + 100) GTEST_SKIP() << "needs " << kBurst + 100 << " fds";
  const std::size_t base_in_use = pd_api::desc_table_in_use();
  std::vector<PollDesc*> burst;
  std::vector<std::uint64_t> tokens;
  for (int i = 0; i < kBurst; ++i) {
    PollDesc* pd = pd_api::poll_open(dup(p.r), /*owns_fd=*/true);
    ASSERT_NE(pd, nullptr) << std::strerror(errno);
    burst.push_back(pd);
    tokens.push_back(pd_api::poll_token(pd));
  }
  EXPECT_EQ(pd_api::desc_table_in_use(), base_in_use + kBurst);
  // Dirty what a use leaves behind, so a page read back as zeros is told from one that was not.
  for (PollDesc* pd : burst) {
    pd->rd.slot.store(PollDesc::kReady);
    pd->rd_drained.store(true);
  }
  const std::size_t committed = pd_api::desc_table_committed_pages();
  PollDesc* top = burst.back();
  for (PollDesc* pd : burst) pd_api::poll_close(pd);
  const std::size_t given = pd_api::desc_table_release();
  EXPECT_GE(given, (static_cast<std::size_t>(kBurst) / pd_api::kPerPage - pd_api::kKeepPages - 1) *
                       pd_api::kDescPage);
  EXPECT_EQ(pd_api::desc_table_committed_pages() * pd_api::kDescPage + given,
            committed * pd_api::kDescPage);
  // The kernel dropped the pages: mincore sees the top descriptor's page not resident.
  auto* page = reinterpret_cast<unsigned char*>(reinterpret_cast<std::uintptr_t>(top) &
                                                ~(pd_api::kDescPage - 1));
  unsigned char resident = 1;
  ASSERT_EQ(mincore(page, pd_api::kDescPage, &resident), 0) << std::strerror(errno);
  EXPECT_EQ(resident & 1, 0) << "the top descriptor's page is still resident";
  EXPECT_EQ(top->seq.load(), 0u) << "a page given back reads as free descriptors";
  for (std::uint64_t t : tokens) ASSERT_EQ(pd_api::poll_from_token(t), nullptr);
  EXPECT_EQ(pd_api::desc_table_release(), 0u) << "nothing more to give back";
  // The same descriptors again, each a fresh one: clean slots and flags, working deadlines.
  std::vector<PollDesc*> again;
  for (int i = 0; i < kBurst; ++i) again.push_back(pd_api::poll_open(dup(p.r), true));
  EXPECT_EQ(again.back(), top) << "lowest first: the same indexes";
  for (PollDesc* pd : again) {
    ASSERT_NE(pd, nullptr);
    EXPECT_EQ(pd->rd.slot.load(), PollDesc::kEmpty);
    EXPECT_FALSE(pd->rd_drained.load());
    EXPECT_EQ(pd->refs.load(), 1u);
    EXPECT_EQ(pd->rd.timer.heap_index, -1);
    EXPECT_NE(pd->seq.load(), 0u);
  }
  for (std::uint64_t t : tokens) ASSERT_EQ(pd_api::poll_from_token(t), nullptr);
  weft::run(
      [&] {
        // A deadline on a descriptor whose page came back as zeros arms and fires like any other.
        pd_api::poll_set_deadline(top, Mode::kRead, weft::detail::now_ns() + 1'000'000);
        EXPECT_EQ(pd_api::poll_wait(top, Mode::kRead), WaitResult::kDeadline);
      },
      weft_net_test::with_workers(1));
  for (PollDesc* pd : again) pd_api::poll_close(pd);
  EXPECT_EQ(pd_api::desc_table_in_use(), base_in_use);
}

TEST(PollDesc, EdgeSetsReadyWhateverTheSlotHoldsAndWakesNobodyUnparked) {
  Pipe p;
  PollDesc* pd = pd_api::poll_open(p.r, false);
  ASSERT_NE(pd, nullptr);
  FiberList ready;
  pd_api::poll_ready(pd, Mode::kRead, ready);
  EXPECT_EQ(pd->rd.slot.load(), PollDesc::kReady);
  EXPECT_EQ(pd->wr.slot.load(), PollDesc::kEmpty) << "sides are independent";
  pd_api::poll_ready(pd, Mode::kRead, ready);  // a second edge: still one kReady
  EXPECT_EQ(pd->rd.slot.load(), PollDesc::kReady);
  // A waiter between EAGAIN and park (kWait): the edge replaces kWait, so its commit CAS fails
  // and it re-checks instead of parking past the edge.
  pd->wr.slot.store(PollDesc::kWait);
  pd_api::poll_ready(pd, Mode::kWrite, ready);
  EXPECT_EQ(pd->wr.slot.load(), PollDesc::kReady);
  EXPECT_TRUE(ready.empty());
  EXPECT_EQ(ready.size(), 0u);
  pd_api::poll_close(pd);
}

TEST(PollDesc, CloseAndPassedDeadlineEmptyAWaitSlotButLeaveReady) {
  Pipe p;
  PollDesc* pd = pd_api::poll_open(p.r, false);
  ASSERT_NE(pd, nullptr);
  // A passed deadline needs no timer: set from a plain thread it marks the side expired.
  pd->rd.slot.store(PollDesc::kWait);
  pd_api::poll_set_deadline(pd, Mode::kRead, weft::detail::now_ns() - 1);
  EXPECT_EQ(pd->rd.deadline.load(), PollDesc::kExpired);
  EXPECT_EQ(pd->rd.slot.load(), PollDesc::kEmpty) << "a kWait waiter must not park";
  pd_api::poll_set_deadline(pd, Mode::kRead, 0);
  EXPECT_EQ(pd->rd.deadline.load(), 0) << "0 clears the deadline";
  FiberList ready;
  pd_api::poll_ready(pd, Mode::kRead, ready);
  pd_api::poll_set_deadline(pd, Mode::kRead, weft::detail::now_ns() - 1);
  EXPECT_EQ(pd->rd.slot.load(), PollDesc::kReady) << "unblock leaves an unconsumed edge";
  // Close: the same for both sides. Hold a call so the descriptor is not recycled under us.
  ASSERT_TRUE(pd_api::poll_io_begin(pd));
  pd->wr.slot.store(PollDesc::kWait);
  pd_api::poll_close(pd);
  EXPECT_TRUE(pd->closing.load());
  EXPECT_EQ(pd->wr.slot.load(), PollDesc::kEmpty);
  EXPECT_EQ(pd->rd.slot.load(), PollDesc::kReady);
  EXPECT_EQ(pd->rd.deadline.load(), 0) << "close disarms the deadlines";
  pd_api::poll_io_end(pd);
}

TEST(PollDesc, CallsInFlightKeepTheFdOpenAfterClose) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
  PollDesc* pd = pd_api::poll_open(p[0], /*owns_fd=*/true);
  ASSERT_NE(pd, nullptr);
  const std::uint64_t token = pd_api::poll_token(pd);
  ASSERT_TRUE(pd_api::poll_io_begin(pd));
  ASSERT_TRUE(pd_api::poll_io_begin(pd));
  pd_api::poll_close(pd);
  EXPECT_TRUE(fd_open(p[0])) << "closed while two calls were in flight";
  EXPECT_EQ(pd_api::poll_from_token(token), pd) << "not recycled yet";
  EXPECT_FALSE(pd_api::poll_io_begin(pd)) << "a call after close must fail";
  pd_api::poll_close(pd);  // a second close is a no-op
  EXPECT_TRUE(fd_open(p[0]));
  pd_api::poll_io_end(pd);
  EXPECT_TRUE(fd_open(p[0]));
  pd_api::poll_io_end(pd);  // the last one out closes the fd and recycles the descriptor
  EXPECT_FALSE(fd_open(p[0]));
  EXPECT_EQ(pd_api::poll_from_token(token), nullptr);
  close(p[1]);
}

// ---- under a runtime
// -----------------------------------------------------------------------------

// Waits (from a fiber, bounded) until `s` holds a parked fiber's Waker bits.
bool parked(const PollDesc::Side& s) {
  return weft_test::eventually([&] { return s.slot.load() > PollDesc::kWait; }, 20s);
}

// A fiber that waits on `mode` and publishes the result.
struct Waiter {
  std::atomic<int> result{-1};
  weft::Task<void> task;
  Waiter(PollDesc* pd, Mode mode)
      : task(weft::spawn(
            [this, pd, mode] { result.store(static_cast<int>(pd_api::poll_wait(pd, mode))); })) {}
  // The result once the fiber returned (bounded), or -1.
  int get() {
    if (!weft_test::join_within(task, 20s)) return -1;
    return result.load();
  }
};

TEST(PollDesc, EdgeBeforeTheWaitIsConsumedWithoutParking) {
  weft::run([] {
    Pipe p;
    PollDesc* pd = pd_api::poll_open(p.r, false);
    ASSERT_NE(pd, nullptr);
    FiberList ready;
    pd_api::poll_ready(pd, Mode::kRead, ready);
    EXPECT_TRUE(ready.empty());
    EXPECT_EQ(pd_api::poll_wait(pd, Mode::kRead), WaitResult::kReady);
    EXPECT_EQ(pd->rd.slot.load(), PollDesc::kEmpty) << "the wait consumed the edge";
    pd_api::poll_close(pd);
  });
}

TEST(PollDesc, ParkedWaiterIsWokenByARealEdge) {
  weft::run([] {
    Pipe p;
    PollDesc* pd = pd_api::poll_open(p.r, false);
    ASSERT_NE(pd, nullptr);
    Waiter w(pd, Mode::kRead);
    ASSERT_TRUE(parked(pd->rd));
    EXPECT_GE(pd_api::poll_waiters(), 1u);
    EXPECT_EQ(pd->wr.slot.load(), PollDesc::kEmpty);
    ASSERT_EQ(write(p.w, "x", 1), 1);  // epoll reports the edge; the poller calls poll_ready
    EXPECT_EQ(w.get(), static_cast<int>(WaitResult::kReady));
    EXPECT_EQ(pd->rd.slot.load(), PollDesc::kEmpty);
    pd_api::poll_close(pd);
  });
}

TEST(PollDesc, CloseWakesWaitersOnBothSides) {
  for (const bool call_in_flight : {false, true}) {
    SCOPED_TRACE(call_in_flight ? "a call holds the descriptor" : "no call in flight");
    weft::run([call_in_flight] {
      Pipe p;
      PollDesc* pd = pd_api::poll_open(p.r, false);
      ASSERT_NE(pd, nullptr);
      if (call_in_flight) {
        ASSERT_TRUE(pd_api::poll_io_begin(pd));
      }
      Waiter reader(pd, Mode::kRead);
      Waiter writer(pd, Mode::kWrite);  // a pipe's read end never becomes writable
      ASSERT_TRUE(parked(pd->rd));
      ASSERT_TRUE(parked(pd->wr));
      pd_api::poll_close(pd);
      EXPECT_EQ(reader.get(), static_cast<int>(WaitResult::kClosed));
      EXPECT_EQ(writer.get(), static_cast<int>(WaitResult::kClosed));
      // A wait that starts after close fails at once.
      if (call_in_flight) {
        EXPECT_EQ(pd_api::poll_wait(pd, Mode::kRead), WaitResult::kClosed);
        pd_api::poll_io_end(pd);
      }
    });
  }
}

TEST(PollDesc, SecondWaiterOnOneSideIsBusy) {
  weft::run([] {
    Pipe p;
    PollDesc* pd = pd_api::poll_open(p.r, false);
    ASSERT_NE(pd, nullptr);
    Waiter first(pd, Mode::kRead);
    ASSERT_TRUE(parked(pd->rd));
    const std::uintptr_t parked_bits = pd->rd.slot.load();
    EXPECT_EQ(pd_api::poll_wait(pd, Mode::kRead), WaitResult::kBusy);
    EXPECT_EQ(pd->rd.slot.load(), parked_bits) << "the refused waiter must leave the slot alone";
    ASSERT_EQ(write(p.w, "x", 1), 1);
    EXPECT_EQ(first.get(), static_cast<int>(WaitResult::kReady));
    pd_api::poll_close(pd);
  });
}

TEST(PollDesc, DeadlineWakesAParkedWaiterAndAPassedOneFailsAtOnce) {
  weft::run([] {
    Pipe p;
    PollDesc* pd = pd_api::poll_open(p.r, false);
    ASSERT_NE(pd, nullptr);
    pd_api::poll_set_deadline(pd, Mode::kRead, weft::detail::now_ns() - 1);
    EXPECT_EQ(pd_api::poll_wait(pd, Mode::kRead), WaitResult::kDeadline);
    EXPECT_EQ(pd_api::poll_wait(pd, Mode::kRead), WaitResult::kDeadline) << "deadlines stay";
    pd_api::poll_set_deadline(pd, Mode::kRead, 0);
    // A future deadline: the waiter parks and its timer wakes it with kDeadline.
    Waiter w(pd, Mode::kRead);
    ASSERT_TRUE(parked(pd->rd));
    pd_api::poll_set_deadline(pd, Mode::kRead,
                              weft::detail::now_ns() + std::chrono::nanoseconds(20ms).count());
    EXPECT_EQ(w.get(), static_cast<int>(WaitResult::kDeadline));
    EXPECT_EQ(pd->rd.deadline.load(), PollDesc::kExpired);
    // Cleared: an edge is seen again.
    pd_api::poll_set_deadline(pd, Mode::kRead, 0);
    ASSERT_EQ(write(p.w, "x", 1), 1);
    Waiter w2(pd, Mode::kRead);
    EXPECT_EQ(w2.get(), static_cast<int>(WaitResult::kReady));
    pd_api::poll_close(pd);
  });
}

}  // namespace
