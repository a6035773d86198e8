// Hibernator: gives back the stack pages of fibers parked longer than Options::hibernate_after,
// keeping a compact copy of their live bytes (services/stack_image.hpp), and brings them back
// before the fiber runs or the moment anything else touches them.
//
// The image is the zero-elided copy, then LZ4-compressed when that is smaller (stale data in a
// read buffer, return addresses and pointers into the same few regions compress well): measured
// on an echo server's idle connections, 5.5 KB live -> 887 B elided -> about half that with LZ4.
//
// Why: an idle blocking-style connection is a fiber parked in read() with its buffer on its
// stack; two or three stack pages stay resident for as long as the client stays idle, although
// they hold a few hundred non-zero bytes. Hibernation keeps those bytes and frees the pages.
//
// Safety rests on userfaultfd. Other fibers may hold pointers into a parked fiber's stack (a
// channel waiter record that a sender fills, a WaitGroup on an accept loop's stack, a select's
// case array), and they must never see zeros. A hibernated stack's range is registered with the
// runtime's userfaultfd, so any access to it -- from any thread, user or kernel mode -- stops in
// a page fault that the hibernator thread resolves by restoring the whole stack. The worker that
// switches a hibernated fiber in restores it first (restore(), called from switch_to), so the
// fiber itself never faults. Only hibernated stacks are registered: first-touch faults of
// running fibers never reach the hibernator thread.
//
// Hibernating one fiber (hibernator thread, mu_ held):
//   1. the fiber is Parked, its flag (Fiber::hibernation) goes to 1, its slot is registered
//      (missing + write-protect modes) and write-protected: from here no thread can change a
//      byte of it -- a write waits in the kernel for us;
//   2. re-read its state: not Parked any more (it was woken meanwhile) -> un-protect,
//      unregister, flag 0: nothing happened. Parked -> its saved context is final (a new park
//      would have to write the stack), so [context, top) is all it has live;
//   3. encode that range (reading only pages that hold data: /proc/self/pagemap says which; a
//      never-touched page would fault to this very thread), MADV_DONTNEED the stack, wake the
//      writers that waited (they fault again, now on a missing page, and we restore for them).
// Restoring (any thread, mu_ held): copy the image's non-zero pages back with UFFDIO_COPY
// (atomic per page against the faulting threads), unregister (wakes them), flag 0.
//
// Blocking jobs' callers are never hibernated: the job owns the frame and may pin a buffer there
// for I/O (O_DIRECT, vmsplice), which a write-protect cannot stop. Nor are fibers whose stack the
// kernel may write outside a system call (weft/detail/kernel_writes_stack.hpp: an io_uring recv
// into a buffer in the frame). That write runs as task work at the exit of whatever system
// call the worker makes next -- perhaps a restore's UFFDIO_COPY under mu_, or an mmap under the
// allocator's lock -- and its fault on a hibernated stack would wait for a hibernator that waits
// for that lock: a deadlock seen under TSan (the worker spinning in handle_userfault, the
// hibernator in a futex).
//
// Locks: mu_ guards the records and the counters' writers; it is taken by the hibernator and by
// workers restoring. Nothing that holds mu_ touches a hibernated stack or waits for a fiber. The
// hibernator never allocates between write-protecting a stack and deciding its fate: a fiber
// woken in that window may be blocked mid-malloc on the protected stack.
//
// VMAs: registering splits the stack region's VMA; adjacent registered slots merge again. The
// records know their neighbours, so the number of separate registered runs is exact, and
// hibernation stops short of vm.max_map_count.
// Off when stack profiling is on (the profiler's high-water marks read the stack's dead zeros),
// with mprotect guard pages (each guard is its own VMA: no merging), without userfaultfd, or under
// Valgrind (a faulting thread would keep Valgrind's thread lock from the hibernator thread).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/stack_restorer.hpp"
#include "services/image_arena.hpp"
#include "weft/detail/thread_mutex.hpp"

namespace weft::detail {

class Runtime;
struct Fiber;

class Hibernator final : public StackRestorer {
 public:
  struct Counters {
    std::uint64_t hibernated = 0;      // fibers whose stack is hibernated now
    std::uint64_t image_bytes = 0;     // bytes their images take now
    std::uint64_t released_bytes = 0;  // stack bytes their ranges span now (upper bound freed)
    std::uint64_t hibernations = 0;    // since start
    std::uint64_t restores = 0;        // since start (by a switch-in or by a fault)
    std::uint64_t fault_restores = 0;  // of which another thread's access caused
  };

  // Null when hibernation is off (after_ns <= 0, profiling, mprotect guards, Valgrind) or
  // unavailable (one line on stderr, once per process, says why).
  static std::unique_ptr<Hibernator> start(Runtime& rt, std::int64_t after_ns);
  ~Hibernator();  // restores whatever is still hibernated, then stops the thread
  Hibernator(const Hibernator&) = delete;
  Hibernator& operator=(const Hibernator&) = delete;

  // Brings f's stack back if it is hibernated; the worker about to switch f in calls it when
  // f->hibernation is set. Safe from any thread.
  void restore(Fiber* f) noexcept override;
  Counters counters() const noexcept;
  // Drops the references the hibernator thread could not drop itself (services/monitor.cpp
  // calls it every tick): the last reference runs user destructors, which must not run there.
  void free_deferred();

 private:
  struct Record {
    Fiber* fiber;
    std::uintptr_t slot_lo;   // registered range: [slot_lo, top)
    std::uintptr_t stack_lo;  // released range: [stack_lo, top)
    std::uintptr_t top;
    std::uintptr_t live_lo;  // encoded range: [live_lo, top)
    std::size_t size;        // image bytes, after this header
    std::size_t raw_size;    // the zero-elided image's bytes; == size unless lz4
    bool lz4;                // the image is LZ4-compressed (it came out smaller)
    unsigned char* image() noexcept { return reinterpret_cast<unsigned char*>(this + 1); }
  };
  Hibernator(Runtime& rt, int uffd, int pagemap, std::int64_t after_ns, long vma_budget);
  // Which pages of [lo, lo + pages * page_) hold data (present or swapped out), into
  // page_readable_; returns how many, or ~0 if pagemap could not be read. A page never touched
  // reads as a userfaultfd fault in a registered range -- one this thread would have to serve
  // itself -- so the encoder skips it.
  std::size_t read_page_flags_locked(std::uintptr_t lo, std::size_t pages)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void loop();
  void scan(std::int64_t now);
  void hibernate(Fiber* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void serve_faults();
  void release_candidate(Fiber* f);
  void shrink_buffers_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the records of sparse image blocks together (ImageArena::compact), a few blocks at a
  // time: mu_ is held throughout, and workers restoring wait for it.
  void compact_images();
  void restore_locked(Record* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Separate registered runs that adding (+1) or removing (-1) [lo, top) changes.
  long run_delta_locked(std::uintptr_t lo, std::uintptr_t top) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool unprotect_and_unregister(std::uintptr_t slot_lo, std::uintptr_t stack_lo,
                                std::uintptr_t top) noexcept;

  Runtime& rt_;
  const int uffd_;
  const int pagemap_;  // /proc/self/pagemap
  const int stop_fd_;  // eventfd: the destructor's wake-up
  const std::int64_t after_ns_;
  const long vma_budget_;  // separate registered runs allowed (2 VMAs each at most)
  const std::size_t page_;
  mutable ThreadMutex mu_;
  std::map<std::uintptr_t, Record*> records_ ABSL_GUARDED_BY(mu_);  // by slot_lo
  ImageArena images_ ABSL_GUARDED_BY(mu_);                          // the records, images included
  long runs_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<unsigned char> encode_buf_ ABSL_GUARDED_BY(mu_);
  std::vector<char> lz4_buf_ ABSL_GUARDED_BY(mu_);  // compressed image, before its record
  std::vector<unsigned char> decode_buf_ ABSL_GUARDED_BY(mu_);  // decompressed, restoring
  std::vector<std::uint64_t> pagemap_buf_ ABSL_GUARDED_BY(mu_);
  std::vector<std::uint8_t> page_readable_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<unsigned char[]> page_buf_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::uint64_t> hibernated_{0}, image_bytes_{0}, released_bytes_{0}, hibernations_{0},
      restores_{0}, fault_restores_{0};
  // A scan's candidates with their stack addresses as read when collected: the sort key must
  // not change under std::sort, and a candidate may end (its stack field cleared) meanwhile.
  struct Candidate {
    const char* stack;
    Fiber* fiber;
  };
  std::vector<Candidate> candidates_;  // the hibernator thread's alone, as are the next two
  // Fibers whose image would have saved too little, by the park (parked_at_ns) it was tried on.
  std::unordered_map<const Fiber*, std::int64_t> kept_;
  std::uint64_t scans_ = 0;
  ThreadMutex deferred_mu_;
  std::vector<Fiber*> deferred_ ABSL_GUARDED_BY(deferred_mu_);  // last references, for the monitor
  std::thread thread_;
};

}  // namespace weft::detail
