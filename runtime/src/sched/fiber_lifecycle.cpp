// A fiber's life as the scheduler sees it: creation (id from the worker's batch), start (into
// the registry shard of its worker and the spawner's deque, yielding when the worker is flooded),
// finish (join hand-off, the main fiber's end starts shutdown), retirement once its stack is gone
// (out of the registry, a batch at a time when another worker started it), shutdown's drop of
// never-started fibers, join, and the fatal end of a go() fiber by an uncaught exception.
//
// Join protocol: join_word is 0 while the fiber runs, kJoinDone once it finished, or the address
// of the one joiner's WaitNode; the finisher exchanges in kJoinDone and wakes whatever joiner it
// displaced, the joiner's park commit CASes 0 -> its node (failing if the fiber finished first).
// A bounded join's bound withdraws with the CAS node -> 0; the finisher's exchange and that CAS
// cannot both succeed, so the joiner is woken once, as finished or as withdrawn.
#include "sched/fiber_lifecycle.hpp"

#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

#include "core/fiber.hpp"
#include "core/fiber_alloc.hpp"
#include "core/registry.hpp"
#include "sched/scheduler.hpp"
#include "sched/tuning.hpp"
#include "weft/detail/wait_bounds.hpp"
#include "weft/runtime.hpp"

namespace weft::detail {
namespace {

constexpr std::uintptr_t kJoinDone = 1;

}  // namespace

Fiber* fiber_create(const ClosureOps* ops, std::size_t closure_size, std::size_t closure_align,
                    void** storage) {
  Runtime& rt = runtime_or_throw("weft::go/weft::spawn");
  const std::size_t align = closure_align > alignof(Fiber) ? closure_align : alignof(Fiber);
  const std::size_t offset = (sizeof(Fiber) + closure_align - 1) / closure_align * closure_align;
  const bool pooled = FiberAlloc::fits(offset + closure_size, align);
  void* mem = pooled ? FiberAlloc::allocate()
                     : ::operator new(offset + closure_size, std::align_val_t(align));
  Fiber* f = ::new (mem) Fiber();
  f->ops = ops;
  f->storage_offset = static_cast<std::uint32_t>(offset);
  f->alloc_align = pooled ? 0 : static_cast<std::uint32_t>(align);
  f->id = rt.alloc_id(current_worker());
  *storage = f->storage();
  return f;
}

void fiber_configure(Fiber* f, std::string_view name, std::size_t stack_size) {
  Runtime& rt = runtime_or_throw("weft::go/weft::spawn");
  if (stack_size == 0 && !name.empty()) stack_size = rt.stack_sizes().lookup(name);
  if (stack_size != 0) {
    f->stack_class = static_cast<std::uint8_t>(rt.stacks().class_for(stack_size));
  }
  if (!name.empty()) f->name = new std::string(name);
}

void fiber_start(Fiber* f, bool joinable) {
  Runtime& rt = runtime_or_throw("weft::go/weft::spawn");
  if (joinable) f->refs.store(2, std::memory_order_relaxed);
  Worker* w = current_worker();
  rt.registry().add(f, w ? Registry::shard_of_worker(w->index) : Registry::kForeignShard);
  if (w) {
    w->spawned.store(w->spawned.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    rt.foreign_spawned.fetch_add(1, std::memory_order_relaxed);
  }
  fiber_set_state(f, FiberState::kRunnable);
  // A flooded worker makes the spawner yield, so the fibers it made run before it makes more.
  if (rt.submit_spawned(f) && w->current && !rt.unwinding()) this_fiber::yield();
}

void fiber_finished_bookkeeping(Worker& w, Fiber* f) {
  w.finished.store(w.finished.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  fiber_set_state(f, FiberState::kDone, std::memory_order_release);
  const std::uintptr_t old = f->join_word.exchange(kJoinDone, std::memory_order_acq_rel);
  if (old > kJoinDone) reinterpret_cast<WaitNode*>(old)->waker.wake();
  if (f->is_main) w.rt->main_finished();
}

void fiber_drop_unstarted(Fiber* f) noexcept {
  f->ops->drop(f->storage());
  f->unwound = true;
  Worker& w = *current_worker();
  fiber_finished_bookkeeping(w, f);
  fiber_retire(w, f);
}

namespace {

void retire_batch(Worker& w, unsigned shard) noexcept {
  FiberList& batch = w.retiring[shard];
  w.rt->registry().remove_all(shard, batch);
  while (Fiber* f = batch.pop_front()) fiber_release(f);
  w.retiring_mask &= ~(std::uint64_t{1} << shard);
}

}  // namespace

void fiber_retire(Worker& w, Fiber* f) noexcept {
  const unsigned shard = f->reg_shard;
  // Only go() fibers wait for a batch: they leave nothing behind (no ClosureOps::release), so
  // holding their memory a while changes nothing a program sees. A spawn()ed fiber's outcome is
  // destroyed when its last reference goes, which must not wait for a batch.
  if (shard == Registry::shard_of_worker(w.index) || f->ops->release != nullptr) {
    w.rt->registry().remove(f);
    fiber_release(f);
    return;
  }
  FiberList& batch = w.retiring[shard];
  batch.push_back(f);
  w.retiring_mask |= std::uint64_t{1} << shard;
  if (batch.size() >= kRetireBatch) retire_batch(w, shard);
}

void fiber_retire_all(Worker& w) noexcept {
  while (w.retiring_mask != 0) {
    retire_batch(w, static_cast<unsigned>(__builtin_ctzll(w.retiring_mask)));
  }
}

bool fiber_join(Fiber* f) {
  if (f->join_word.load(std::memory_order_acquire) != kJoinDone) {
    WaitNode node;
    node.waker = Waker::current();
    struct Ctx {
      Fiber* f;
      WaitNode* node;
    } ctx{f, &node};
    try {
      park(
          [](void* a) {
            auto* c = static_cast<Ctx*>(a);
            std::uintptr_t expected = 0;
            return c->f->join_word.compare_exchange_strong(
                expected, reinterpret_cast<std::uintptr_t>(c->node), std::memory_order_acq_rel);
          },
          &ctx, WaitReason::kJoin, static_cast<std::int64_t>(f->id));
    } catch (const FiberUnwind&) {
      std::uintptr_t mine = reinterpret_cast<std::uintptr_t>(&node);
      f->join_word.compare_exchange_strong(mine, 0, std::memory_order_acq_rel);
      throw;
    }
  }
  if (f->unwound) {
    // The joined fiber was unwound at shutdown. A joining fiber is being shut down too: unwind
    // it as well rather than hand it an error it would have to handle (it might be a go() fiber,
    // for which any escaping exception is fatal).
    Runtime* rt = current_runtime();
    if (rt && rt->unwinding() && in_fiber() && std::uncaught_exceptions() == 0) {
      throw FiberUnwind{};
    }
    return false;
  }
  return true;
}

bool fiber_join_bounded(Fiber* f, const CancelToken& bound, absl::Status* why) {
  require_fiber("weft::Task::wait(bound)");
  if (f->join_word.load(std::memory_order_acquire) == kJoinDone) return true;
  struct Record {
    Fiber* f;
    WaitNode node;
    WaitBounds* bounds;
    std::atomic<bool> withdrawn{false};
    // The commit reads this frame after publishing the node, when the finisher may already have
    // woken us: we must not leave (and free the frame) before it is done. 0: never ran (park
    // threw at entry); 1: running; 2: done.
    std::atomic<int> commit{0};
    void wait_for_commit() const noexcept {
      while (commit.load(std::memory_order_acquire) == 1) __builtin_ia32_pause();
    }
    // Takes the node back if it is still published; true if this call did.
    bool take_back() noexcept {
      std::uintptr_t mine = reinterpret_cast<std::uintptr_t>(&node);
      if (!f->join_word.compare_exchange_strong(mine, 0, std::memory_order_acq_rel)) return false;
      withdrawn.store(true, std::memory_order_release);
      return true;
    }
  } rec;
  rec.f = f;
  rec.node.waker = Waker::current();
  WaitBounds bounds(
      bound,
      [](void* a) {
        auto* r = static_cast<Record*>(a);
        const Waker waker = r->node.waker;
        if (r->take_back()) waker.wake();  // else: not published yet, or the finisher woke it
      },
      &rec);
  rec.bounds = &bounds;
  struct Disarm {
    WaitBounds& b;
    ~Disarm() { b.disarm(); }
  } disarm{bounds};
  if (!bounds.arm()) {
    *why = bounds.status("weft::Task::wait");
    return false;
  }
  try {
    park(
        [](void* a) {
          auto* r = static_cast<Record*>(a);
          r->commit.store(1, std::memory_order_relaxed);
          std::uintptr_t expected = 0;
          bool park = r->f->join_word.compare_exchange_strong(
              expected, reinterpret_cast<std::uintptr_t>(&r->node), std::memory_order_acq_rel);
          // (false: finished already.) A bound that fired before the node was published found
          // nothing to take back: take it back here.
          if (park && r->bounds->fired() && r->take_back()) park = false;
          r->commit.store(2, std::memory_order_release);  // the last touch of this frame
          return park;
        },
        &rec, WaitReason::kJoin, static_cast<std::int64_t>(f->id));
  } catch (const FiberUnwind&) {
    rec.wait_for_commit();
    rec.take_back();
    throw;
  }
  rec.wait_for_commit();
  bounds.disarm();
  if (rec.withdrawn.load(std::memory_order_acquire)) {
    *why = bounds.status("weft::Task::wait");
    return false;
  }
  return true;
}

void fiber_request_stop(Fiber* f) noexcept { f->stop.fire(CancelSignal::kStopped); }

[[noreturn]] void die_uncaught_exception(const char* what) noexcept {
  Fiber* f = current_fiber();
  std::string name;
  if (f && current_runtime()) name = current_runtime()->registry().name_of(f);
  std::fprintf(stderr,
               "weft: fiber %llu \"%s\" ended by an uncaught exception: %s\n"
               "weft: an exception escaping a go() fiber is fatal (like a Go panic); catch it in "
               "the fiber, or use weft::spawn() and Task::join() to receive it\n",
               f ? static_cast<unsigned long long>(f->id) : 0ull, name.c_str(), what);
  std::fflush(stderr);
  std::abort();
}

}  // namespace weft::detail
