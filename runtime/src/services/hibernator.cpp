// Stack hibernation; design, protocol and locking in hibernator.hpp.
#include "services/hibernator.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <lz4.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <unordered_map>

#include "core/fiber.hpp"
#include "core/own_threads.hpp"
#include "core/registry.hpp"
#include "core/stack_pool.hpp"
#include "core/vm_maps.hpp"
#include "sched/scheduler.hpp"
#include "services/stack_image.hpp"
#include "weft/detail/kernel_writes_stack.hpp"

#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

namespace weft::detail {
namespace {

constexpr std::int64_t kMs = 1000000;
constexpr std::size_t kMaxCandidatesPerScan = 1 << 16;
constexpr unsigned kFaultCheckEvery = 1;  // hibernations between looks at pending faults
// A record's map node and arena header, beyond the Record itself and its image.
constexpr std::size_t kRecordOverhead = 96;
// Sparse image blocks moved together per scan: at most 16 KiB of live images each.
constexpr std::size_t kCompactBlocksPerScan = 16;
constexpr std::size_t kPageFlagsUnknown = ~std::size_t{0};

std::atomic<bool> g_said_unavailable{false};

void say_off_once(const char* why, int err) {
  if (g_said_unavailable.exchange(true)) return;
  std::fprintf(stderr,
               "weft: stack hibernation is off: %s%s%s; idle fibers keep their stack pages "
               "(set WEFT_HIBERNATE_AFTER=0 to turn it off quietly)\n",
               why, err ? ": " : "", err ? std::strerror(err) : "");
}

// Valgrind runs the program's threads one at a time under its own lock, and a thread that faults on
// a hibernated stack keeps that lock while the kernel holds it for the hibernator thread, which
// then never runs: the program hangs. Valgrind always preloads its vgpreload_core library into the
// program it runs. (A program started without --trace-children by one under Valgrind inherits the
// variable and runs with hibernation off too: it only costs idle memory.)
bool running_under_valgrind() {
  const char* preload = std::getenv("LD_PRELOAD");
  return preload && std::strstr(preload, "/vgpreload_core-");
}

// The syscall first (root, or vm.unprivileged_userfaultfd=1), then /dev/userfaultfd (Linux
// 6.1+, its file mode decides). Never UFFD_USER_MODE_ONLY: a syscall writing into a hibernated
// stack (read() into another fiber's buffer) must wait for the restore, not fail with EFAULT.
int open_userfaultfd(int* err) {
  int fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd >= 0) return fd;
  *err = errno;
  const int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
  if (dev < 0) return -1;
  fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) *err = errno;
  close(dev);
  return fd;
}

bool uffd_register(int uffd, std::uintptr_t lo, std::uintptr_t len, std::uint64_t* ioctls) {
  uffdio_register reg{};
  reg.range.start = lo;
  reg.range.len = len;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP;
  if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) return false;
  if (ioctls) *ioctls = reg.ioctls;
  return true;
}

bool uffd_unregister(int uffd, std::uintptr_t lo, std::uintptr_t len) {
  uffdio_range r{lo, len};
  return ioctl(uffd, UFFDIO_UNREGISTER, &r) == 0;
}

bool uffd_protect(int uffd, std::uintptr_t lo, std::uintptr_t len, bool on) {
  uffdio_writeprotect wp{};
  wp.range.start = lo;
  wp.range.len = len;
  wp.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0;  // clearing also wakes the waiting writers
  return ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) == 0;
}

// Registers a scratch page the way stacks will be, to learn that this kernel supports it all.
bool uffd_probe(int uffd, std::size_t page, int* err) {
  void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) {
    *err = errno;
    return false;
  }
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  std::uint64_t ioctls = 0;
  bool ok = uffd_register(uffd, lo, page, &ioctls);
  if (!ok) *err = errno;
  const std::uint64_t need =
      (1ull << _UFFDIO_COPY) | (1ull << _UFFDIO_WAKE) | (1ull << _UFFDIO_WRITEPROTECT);
  if (ok && (ioctls & need) != need) {
    ok = false;
    *err = ENOTSUP;
  }
  if (ok) ok = uffd_unregister(uffd, lo, page);
  munmap(p, page);
  return ok;
}

[[noreturn]] void restore_failed(const char* what, std::uintptr_t addr, int err) {
  std::fprintf(stderr,
               "weft: fatal: could not restore a hibernated fiber stack at %#lx (%s: %s); its "
               "bytes cannot be brought back. Run with WEFT_HIBERNATE_AFTER=0 and report this.\n",
               static_cast<unsigned long>(addr), what, std::strerror(err));
  std::abort();
}

}  // namespace

std::unique_ptr<Hibernator> Hibernator::start(Runtime& rt, std::int64_t after_ns) {
  if (after_ns <= 0 || rt.profiler()) return nullptr;
  if (running_under_valgrind()) {
    say_off_once(
        "the program runs under Valgrind, whose one-thread-at-a-time lock a fault on a "
        "hibernated stack would deadlock",
        0);
    return nullptr;
  }
  if (rt.stacks().guards_split_vmas()) {
    say_off_once(
        "the kernel lacks MADV_GUARD_INSTALL (Linux 6.13), so stacks are not "
        "contiguous in one VMA",
        0);
    return nullptr;
  }
  int err = 0;
  const int uffd = open_userfaultfd(&err);
  if (uffd < 0) {
    say_off_once(
        "userfaultfd is unavailable (seccomp, vm.unprivileged_userfaultfd=0 without "
        "access to /dev/userfaultfd, or an old kernel)",
        err);
    return nullptr;
  }
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
  const std::size_t page = rt.stacks().page_size();
  if (ioctl(uffd, UFFDIO_API, &api) != 0) {
    err = errno;
    close(uffd);
    say_off_once("userfaultfd lacks write-protect faults (Linux 5.7)", err);
    return nullptr;
  }
  if (!uffd_probe(uffd, page, &err)) {
    close(uffd);
    say_off_once(
        "userfaultfd cannot register anonymous memory in missing and write-protect "
        "modes",
        err);
    return nullptr;
  }
  const int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (pagemap < 0) {
    err = errno;
    close(uffd);
    say_off_once("/proc/self/pagemap cannot be read", err);
    return nullptr;
  }
  // Each separate registered run costs at most 2 VMAs; keep half the limit for the program.
  const long budget = std::max(0L, (vm_max_map_count() / 2 - vm_map_count()) / 2);
  return std::unique_ptr<Hibernator>(new Hibernator(rt, uffd, pagemap, after_ns, budget));
}

Hibernator::Hibernator(Runtime& rt, int uffd, int pagemap, std::int64_t after_ns, long vma_budget)
    : rt_(rt),
      uffd_(uffd),
      pagemap_(pagemap),
      stop_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      after_ns_(after_ns),
      vma_budget_(vma_budget),
      page_(rt.stacks().page_size()) {
  {
    ThreadMutexLock lock(mu_);
    page_buf_.reset(new unsigned char[page_]);
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "weft-hibernate");
    OwnThread own;
    loop();
  });
}

Hibernator::~Hibernator() {
  const std::uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof one) < 0) std::abort();  // an eventfd write cannot fail here
  thread_.join();
  {
    ThreadMutexLock lock(mu_);
    while (!records_.empty()) restore_locked(records_.begin()->second);
  }
  free_deferred();
  close(stop_fd_);
  close(pagemap_);
  close(uffd_);
}

Hibernator::Counters Hibernator::counters() const noexcept {
  Counters c;
  c.hibernated = hibernated_.load(std::memory_order_relaxed);
  c.image_bytes = image_bytes_.load(std::memory_order_relaxed);
  c.released_bytes = released_bytes_.load(std::memory_order_relaxed);
  c.hibernations = hibernations_.load(std::memory_order_relaxed);
  c.restores = restores_.load(std::memory_order_relaxed);
  c.fault_restores = fault_restores_.load(std::memory_order_relaxed);
  return c;
}

void Hibernator::loop() {
  const std::int64_t period = std::clamp<std::int64_t>(after_ns_ / 4, 10 * kMs, 250 * kMs);
  std::int64_t next_scan = now_ns() + period;
  for (;;) {
    pollfd fds[2] = {{uffd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const std::int64_t wait = std::max<std::int64_t>(0, next_scan - now_ns());
    const int n = poll(fds, 2, static_cast<int>(wait / kMs) + 1);
    if (n > 0 && fds[1].revents) return;
    if (n > 0 && (fds[0].revents & POLLIN)) serve_faults();
    const std::int64_t now = now_ns();
    if (now >= next_scan) {
      scan(now);
      next_scan = now_ns() + period;
    }
  }
}

void Hibernator::scan(std::int64_t now) {
  candidates_.clear();
  // Stale entries (the fiber parked again, or ended and its record was reused) only cost a
  // lookup: a new park has a new time. Cleared now and then so the map stays small (its
  // buckets too: after a burst they would stay sized for it).
  if (++scans_ % 64 == 0) std::unordered_map<const Fiber*, std::int64_t>().swap(kept_);
  const std::size_t cap = std::min<std::size_t>(rt_.fibers_alive() + 64, kMaxCandidatesPerScan);
  if (candidates_.capacity() > 4096 && candidates_.capacity() > 8 * cap) {
    std::vector<Candidate>().swap(candidates_);  // sized for a burst that is over
  }
  candidates_.reserve(cap);  // no allocation under the registry's spin locks
  rt_.registry().for_each([&](Fiber* f) {
    if (candidates_.size() == cap) return;
    if (f->state.load(std::memory_order_acquire) != FiberState::kParked) return;
    if (f->hibernation.load(std::memory_order_relaxed) != 0) return;
    const char* const stack = f->stack.load(std::memory_order_relaxed);
    if (!stack) return;
    const std::int64_t parked_at = f->parked_at_ns.load(std::memory_order_relaxed);
    if (now - parked_at < after_ns_) return;
    if (!kept_.empty()) {  // find() allocates nothing: safe under the spin lock
      auto kept = kept_.find(f);
      if (kept != kept_.end() && kept->second == parked_at) return;
    }
    // A blocking() job owns its caller's frame: it may pin a buffer there for I/O (O_DIRECT,
    // vmsplice), which a write-protect cannot stop and MADV_DONTNEED would orphan.
    if (f->wait_reason.load(std::memory_order_relaxed) == WaitReason::kBlocking) return;
    // The kernel may write into its stack at any moment (weft/detail/kernel_writes_stack.hpp).
    if (f->kernel_writes_stack.load(std::memory_order_relaxed) != 0) return;
    f->refs.fetch_add(1, std::memory_order_relaxed);  // registered, so not yet freed
    candidates_.push_back({stack, f});
  });
  // In address order, so that neighbouring slots register into one run. By the addresses read
  // above: a candidate woken meanwhile may end and clear its stack field, and a key that changes
  // under std::sort breaks its ordering assumptions (its unguarded insertion then walked off the
  // front of the vector: a SEGV in the scan, once under TSan). hibernate() re-checks each one.
  std::sort(candidates_.begin(), candidates_.end(),
            [](const Candidate& a, const Candidate& b) { return a.stack < b.stack; });
  unsigned since_faults = 0;
  for (const Candidate& c : candidates_) {
    Fiber* const f = c.fiber;
    {
      ThreadMutexLock lock(mu_);
      hibernate(f);
    }
    release_candidate(f);
    if (++since_faults == kFaultCheckEvery) {
      since_faults = 0;
      serve_faults();
    }
  }
  candidates_.clear();
  compact_images();
}

void Hibernator::compact_images() {
  ThreadMutexLock lock(mu_);
  images_.compact(
      [this](void*, void* to) ABSL_NO_THREAD_SAFETY_ANALYSIS {  // mu_ is held
        auto* r = static_cast<Record*>(to);
        records_.find(r->slot_lo)->second = r;
      },
      kCompactBlocksPerScan);
}

void Hibernator::release_candidate(Fiber* f) {
  // The last reference frees the fiber and runs its result's destructor: user code, which may
  // touch a hibernated stack (a WaitGroup::done on an accept loop's) -- a fault this thread
  // would have to serve itself. Such a fiber (it ended meanwhile) is left to the monitor.
  std::uint32_t r = f->refs.load(std::memory_order_relaxed);
  while (r > 1) {
    if (f->refs.compare_exchange_weak(r, r - 1, std::memory_order_acq_rel)) return;
  }
  ThreadMutexLock lock(deferred_mu_);
  deferred_.push_back(f);
}

void Hibernator::free_deferred() {
  std::vector<Fiber*> mine;
  {
    ThreadMutexLock lock(deferred_mu_);
    mine.swap(deferred_);
  }
  for (Fiber* f : mine) fiber_release(f);
}

long Hibernator::run_delta_locked(std::uintptr_t lo, std::uintptr_t top) const {
  long delta = 1;
  auto right = records_.find(top);
  if (right != records_.end()) --delta;
  auto it = records_.lower_bound(lo);
  if (it != records_.begin() && std::prev(it)->second->top == lo) --delta;
  return delta;
}

bool Hibernator::unprotect_and_unregister(std::uintptr_t slot_lo, std::uintptr_t stack_lo,
                                          std::uintptr_t top) noexcept {
  const bool a = uffd_protect(uffd_, stack_lo, top - stack_lo, false);
  const bool b = uffd_unregister(uffd_, slot_lo, top - slot_lo);
  return a && b;
}

void Hibernator::hibernate(Fiber* f) {
  if (f->state.load(std::memory_order_acquire) != FiberState::kParked) return;
  if (f->hibernation.load(std::memory_order_relaxed) != 0) return;
  // Candidates wait their turn: one may have woken and parked again since the scan (its commit
  // may still be writing the stack on another worker: freezing it would stall that worker).
  if (now_ns() - f->parked_at_ns.load(std::memory_order_relaxed) < after_ns_) return;
  char* stack = f->stack.load(std::memory_order_relaxed);
  if (!stack) return;
  StackPool& pool = rt_.stacks();
  const auto stack_lo = reinterpret_cast<std::uintptr_t>(stack);
  const std::uintptr_t top = stack_lo + pool.class_size(f->stack_class);
  const std::uintptr_t slot_lo = stack_lo - (pool.guard_pages() ? page_ : 0);
  const auto ctx = reinterpret_cast<std::uintptr_t>(f->ctx.load(std::memory_order_relaxed));
  if (ctx < stack_lo || ctx >= top) return;
  const std::uintptr_t live_lo = ctx & ~std::uintptr_t{7};
  const std::size_t len = top - live_lo;
  // Nothing to gain when the live part covers every page the stack spans.
  if ((live_lo & ~(std::uintptr_t{page_} - 1)) <= stack_lo) return;
  const long delta = run_delta_locked(slot_lo, top);
  if (runs_ + delta > vma_budget_) return;
  const std::size_t bound = stack_image_bound(len);
  if (encode_buf_.size() < bound) encode_buf_.resize(bound);
  const std::uintptr_t live_page = live_lo & ~(std::uintptr_t{page_} - 1);
  const std::size_t live_pages = (top - live_page) / page_;
  if (pagemap_buf_.size() < live_pages) {
    pagemap_buf_.resize(live_pages);
    page_readable_.resize(live_pages);
  }

  // 1. Freeze: from here on every write to the stack waits in the kernel for this thread.
  f->hibernation.store(1, std::memory_order_seq_cst);
  if (!uffd_register(uffd_, slot_lo, top - slot_lo, nullptr)) {
    f->hibernation.store(0, std::memory_order_release);
    return;
  }
  if (!uffd_protect(uffd_, stack_lo, top - stack_lo, true)) {
    if (!uffd_unregister(uffd_, slot_lo, top - slot_lo)) {
      restore_failed("unregistering a stack the write-protect refused", stack_lo, errno);
    }
    f->hibernation.store(0, std::memory_order_release);
    return;
  }
  // No fence needed here: correctness never rests on the worker seeing the flag (a fiber
  // switched in past a stale flag faults and is restored), and the write-protect ioctl has
  // already shot down this mm's TLB entries on every CPU, a full barrier on each.
  // 2. Still parked where it was? A fiber woken meanwhile keeps its stack. (Parking again
  //    would write the stack, so a Parked fiber's context cannot change while it is frozen.)
  //    A fiber that queued a kernel write into its stack before this park keeps it too: it set
  //    the flag before parking, so the Parked state read here makes the flag visible.
  if (f->state.load(std::memory_order_acquire) != FiberState::kParked ||
      f->kernel_writes_stack.load(std::memory_order_seq_cst) != 0 ||
      reinterpret_cast<std::uintptr_t>(f->ctx.load(std::memory_order_relaxed)) != ctx ||
      now_ns() - f->parked_at_ns.load(std::memory_order_relaxed) < after_ns_) {
    if (!unprotect_and_unregister(slot_lo, stack_lo, top)) {
      restore_failed("unregistering a woken fiber's stack", stack_lo, errno);
    }
    f->hibernation.store(0, std::memory_order_release);
    return;
  }
  // 3. Copy what is live, give the pages back, let the waiting writers fault on the hole.
  const std::size_t resident = read_page_flags_locked(live_page, live_pages);
  const std::size_t size =
      resident == 0 || resident == kPageFlagsUnknown
          ? 0
          : stack_image_encode(reinterpret_cast<const std::uint64_t*>(live_lo), len,
                               encode_buf_.data(), page_readable_.data(), page_);
  if (resident == kPageFlagsUnknown ||
      size + sizeof(Record) + kRecordOverhead >= resident * page_ ||
      madvise(stack, top - stack_lo, MADV_DONTNEED) != 0) {
    // pagemap could not be read, the image would save next to nothing (the live bytes fill
    // their pages), or the kernel refused: the fiber keeps its pages.
    if (!unprotect_and_unregister(slot_lo, stack_lo, top)) {
      restore_failed("unregistering a stack left resident", stack_lo, errno);
    }
    f->hibernation.store(0, std::memory_order_release);
    // Not again for this park: each try costs a freeze and two VMA changes.
    kept_[f] = f->parked_at_ns.load(std::memory_order_relaxed);
    return;
  }
  uffdio_range woken{stack_lo, top - stack_lo};
  ioctl(uffd_, UFFDIO_WAKE, &woken);
  // Compressing after the wake keeps the freeze short; the image is ours alone by now.
  const int bound_lz4 = LZ4_compressBound(static_cast<int>(size));
  if (lz4_buf_.size() < static_cast<std::size_t>(bound_lz4)) lz4_buf_.resize(bound_lz4);
  const int packed = size == 0
                         ? 0
                         : LZ4_compress_default(reinterpret_cast<const char*>(encode_buf_.data()),
                                                lz4_buf_.data(), static_cast<int>(size), bound_lz4);
  const bool lz4 = packed > 0 && static_cast<std::size_t>(packed) < size;
  const std::size_t stored = lz4 ? static_cast<std::size_t>(packed) : size;
  auto* r = new (images_.allocate(sizeof(Record) + stored))
      Record{f, slot_lo, stack_lo, top, live_lo, stored, size, lz4};
  std::memcpy(r->image(), lz4 ? static_cast<const void*>(lz4_buf_.data()) : encode_buf_.data(),
              stored);
  records_.emplace(slot_lo, r);
  runs_ += delta;
  hibernated_.fetch_add(1, std::memory_order_relaxed);
  image_bytes_.fetch_add(stored, std::memory_order_relaxed);
  released_bytes_.fetch_add(top - stack_lo, std::memory_order_relaxed);
  hibernations_.fetch_add(1, std::memory_order_relaxed);
  shrink_buffers_locked();
}

void Hibernator::shrink_buffers_locked() {
  // A deep stack's hibernation grew them; they must not stay resident for it.
  constexpr std::size_t kKeep = 64 * 1024;
  if (encode_buf_.capacity() > kKeep) std::vector<unsigned char>().swap(encode_buf_);
  if (lz4_buf_.capacity() > kKeep) std::vector<char>().swap(lz4_buf_);
  if (decode_buf_.capacity() > kKeep) std::vector<unsigned char>().swap(decode_buf_);
}

std::size_t Hibernator::read_page_flags_locked(std::uintptr_t lo, std::size_t pages) {
  // pagemap reports any PTE marker as swapped; anonymous uffd-wp markers appear only with
  // UFFD_FEATURE_WP_UNPOPULATED, which start() does not ask for (a marked, empty page would be
  // read, and fault to this thread), and guard markers sit below stack_lo.
  constexpr std::uint64_t kPresent = 1ull << 63, kSwapped = 1ull << 62;
  const std::size_t bytes = pages * sizeof(std::uint64_t);
  const off_t at = static_cast<off_t>(lo / page_ * sizeof(std::uint64_t));
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = pread(pagemap_, reinterpret_cast<char*>(pagemap_buf_.data()) + got,
                            bytes - got, at + static_cast<off_t>(got));
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got < bytes) return kPageFlagsUnknown;
  std::size_t readable = 0;
  for (std::size_t i = 0; i < pages; ++i) {
    const bool has = (pagemap_buf_[i] & (kPresent | kSwapped)) != 0;
    page_readable_[i] = has ? 1 : 0;
    readable += has;
  }
  return readable;
}

void Hibernator::restore(Fiber* f) noexcept {
  if (f->hibernation.load(std::memory_order_acquire) == 0) return;
  ThreadMutexLock lock(mu_);
  const auto stack_lo = reinterpret_cast<std::uintptr_t>(f->stack.load(std::memory_order_relaxed));
  const std::uintptr_t slot_lo = stack_lo - (rt_.stacks().guard_pages() ? page_ : 0);
  auto it = records_.find(slot_lo);
  // Not there: its hibernation was called off, or a fault restored it (the flag is 0 then).
  if (it != records_.end() && it->second->fiber == f) restore_locked(it->second);
}

void Hibernator::restore_locked(Record* r) {
  struct Copy {
    int uffd;
    std::size_t page;
    static bool emit(std::uintptr_t page_address, const unsigned char* scratch, void* ctx) {
      auto* c = static_cast<Copy*>(ctx);
      uffdio_copy cp{};
      cp.dst = page_address;
      cp.src = reinterpret_cast<std::uintptr_t>(scratch);
      cp.len = c->page;
      // EAGAIN: the address space is changing (retry); ENOMEM: memory is short for a moment
      // (retry for about a second); EEXIST: the page is there already. Nothing else may fail.
      for (int tries = 0;; ++tries) {
        cp.copy = 0;
        if (ioctl(c->uffd, UFFDIO_COPY, &cp) == 0 || errno == EEXIST) return true;
        if ((errno != EAGAIN && errno != ENOMEM) || tries == 10000) {
          restore_failed("UFFDIO_COPY", page_address, errno);
        }
        if (errno == ENOMEM) usleep(100);
      }
    }
  } copy{uffd_, page_};
  const unsigned char* image = r->image();
  if (r->lz4) {
    if (decode_buf_.size() < r->raw_size) decode_buf_.resize(r->raw_size);
    const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(r->image()),
                                      reinterpret_cast<char*>(decode_buf_.data()),
                                      static_cast<int>(r->size), static_cast<int>(r->raw_size));
    if (n != static_cast<int>(r->raw_size)) restore_failed("LZ4_decompress_safe", r->live_lo, EIO);
    image = decode_buf_.data();
  }
  stack_image_decode(image, r->raw_size, r->live_lo, page_, page_buf_.get(), &Copy::emit, &copy);
  // Unregistering wakes every thread that waits on the range; they find the pages (or, where
  // the image had only zeros, fresh zero pages).
  if (!uffd_unregister(uffd_, r->slot_lo, r->top - r->slot_lo)) {
    restore_failed("UFFDIO_UNREGISTER", r->slot_lo, errno);
  }
  Fiber* f = r->fiber;
  records_.erase(r->slot_lo);
  shrink_buffers_locked();
  runs_ -= run_delta_locked(r->slot_lo, r->top);
  hibernated_.fetch_sub(1, std::memory_order_relaxed);
  image_bytes_.fetch_sub(r->size, std::memory_order_relaxed);
  released_bytes_.fetch_sub(r->top - r->stack_lo, std::memory_order_relaxed);
  restores_.fetch_add(1, std::memory_order_relaxed);
  images_.free(r, sizeof(Record) + r->size);
  f->hibernation.store(0, std::memory_order_release);
}

void Hibernator::serve_faults() {
  uffd_msg msgs[16];
  for (;;) {
    const ssize_t n = read(uffd_, msgs, sizeof msgs);
    if (n <= 0) return;  // EAGAIN: none pending
    for (std::size_t i = 0; i < static_cast<std::size_t>(n) / sizeof(uffd_msg); ++i) {
      if (msgs[i].event != UFFD_EVENT_PAGEFAULT) continue;
      const std::uintptr_t addr = msgs[i].arg.pagefault.address;
      ThreadMutexLock lock(mu_);
      auto it = records_.upper_bound(addr);
      if (it != records_.begin() && addr < std::prev(it)->second->top) {
        fault_restores_.fetch_add(1, std::memory_order_relaxed);
        restore_locked(std::prev(it)->second);
        continue;
      }
      // Restored already (by its switch-in, or an earlier message): the range is unregistered
      // and its waiters were woken; a write-protect fault of a called-off hibernation was woken
      // by the un-protect. Waking again is harmless.
      uffdio_range r{addr & ~(std::uintptr_t{page_} - 1), page_};
      ioctl(uffd_, UFFDIO_WAKE, &r);
    }
  }
}

KernelWritesStack::KernelWritesStack() noexcept : fiber_(current_fiber()) {
  WEFT_ASSERT(!fiber_ || fiber_->kernel_writes_stack.load(std::memory_order_relaxed) == 0,
              "KernelWritesStack nested in one fiber");
  // Before the operation is queued, and so before the park that the hibernator's step 2 reads.
  if (fiber_) fiber_->kernel_writes_stack.store(1, std::memory_order_seq_cst);
}

KernelWritesStack::~KernelWritesStack() {
  // The operation has completed (or its cancellation has): the kernel is done with the stack.
  if (fiber_) fiber_->kernel_writes_stack.store(0, std::memory_order_release);
}

}  // namespace weft::detail
