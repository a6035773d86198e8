// Fiber records: names of states and wait reasons, FiberList's link (FiberNext), and freeing.
// Creation and the lifecycle that needs a scheduler (start, finish, join) live in
// sched/fiber_lifecycle.cpp. Design and ownership rules in fiber.hpp.
#include "core/fiber.hpp"

#include <chrono>
#include <new>
#include <string>

#include "core/fiber_alloc.hpp"
#include "weft/detail/poller.hpp"

namespace weft::detail {

const char* fiber_state_name(FiberState s) noexcept {
  switch (s) {
    case FiberState::kCreated:
      return "created";
    case FiberState::kRunnable:
      return "runnable";
    case FiberState::kRunning:
      return "running";
    case FiberState::kParked:
      return "parked";
    case FiberState::kDone:
      return "done";
  }
  return "?";
}

const char* wait_reason_name(WaitReason r) noexcept {
  switch (r) {
    case WaitReason::kNone:
      return "none";
    case WaitReason::kMutex:
      return "mutex";
    case WaitReason::kCondVar:
      return "condvar";
    case WaitReason::kWaitGroup:
      return "waitgroup";
    case WaitReason::kSemaphore:
      return "semaphore";
    case WaitReason::kJoin:
      return "join";
    case WaitReason::kSleep:
      return "sleep";
    case WaitReason::kBlocking:
      return "blocking call";
    case WaitReason::kChanRecv:
      return "chan recv";
    case WaitReason::kChanSend:
      return "chan send";
    case WaitReason::kSelect:
      return "select";
    case WaitReason::kIoRead:
      return "io read";
    case WaitReason::kIoWrite:
      return "io write";
    case WaitReason::kForever:
      return "forever";
    case WaitReason::kRWMutex:
      return "rwmutex";
    case WaitReason::kOnce:
      return "once";
    case WaitReason::kBarrier:
      return "barrier";
  }
  return "?";
}

Fiber*& FiberNext::next(Fiber* f) noexcept { return f->next; }

void fiber_free(Fiber* f) noexcept {
  if (f->ops->release) f->ops->release(f->storage());
  fiber_abandon(f);
}

void fiber_abandon(Fiber* f) noexcept {
  delete f->name;
  const std::size_t align = f->alloc_align;
  f->~Fiber();
  if (align == 0) {
    FiberAlloc::deallocate(f);
  } else {
    ::operator delete(f, std::align_val_t(align));
  }
}

void fiber_release(Fiber* f) noexcept {
  if (f->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) fiber_free(f);
}

std::uint64_t fiber_id(const Fiber* f) noexcept { return f->id; }

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace weft::detail
