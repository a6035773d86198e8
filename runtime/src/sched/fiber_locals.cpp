// FiberLocal storage (weft/sync.hpp): per fiber, a vector indexed by FiberLocal instance, each
// slot a value and the function that destroys it.
//
// Ownership: only the fiber itself reads or writes its `locals` (get/set run on the fiber; it may
// migrate between threads, but never runs on two at once, and every switch orders its memory
// effects). The fiber's trampoline calls destroy_fiber_locals() after the fiber's function has
// returned or unwound, still on the fiber's stack, so a value's destructor may use weft
// (including parking and other FiberLocals: values set while destroying are destroyed in turn,
// up to a few rounds, as POSIX thread-specific data does).
//
// Indices come from a global counter and are never reused, so a destroyed FiberLocal's slot is
// never mistaken for a new one's; its values still carry their own destroy function.
#include "sched/fiber_locals.hpp"

#include <atomic>
#include <cstdio>
#include <vector>

#include "core/fiber.hpp"
#include "sched/scheduler.hpp"
#include "weft/sync.hpp"

namespace weft::detail {

struct FiberLocals {
  struct Slot {
    void* value = nullptr;
    void (*destroy)(void*) = nullptr;
  };
  std::vector<Slot> slots;
};

namespace {
std::atomic<std::size_t> g_next_index{0};

Fiber& fiber_or_throw() {
  require_fiber("weft::FiberLocal::get()");
  return *current_fiber();
}
}  // namespace

std::size_t fiber_local_new_index() noexcept {
  return g_next_index.fetch_add(1, std::memory_order_relaxed);
}

void* fiber_local_get(std::size_t index) {
  // The hot path: one current_fiber() (a TLS read), no other call.
  Fiber* f = current_fiber();
  if (!f) return fiber_or_throw().locals;  // throws: not in a fiber
  const FiberLocals* l = f->locals;
  if (!l || index >= l->slots.size()) return nullptr;
  return l->slots[index].value;
}

void fiber_local_set(std::size_t index, void* value, void (*destroy)(void*)) {
  Fiber& f = fiber_or_throw();
  if (!f.locals) f.locals = new FiberLocals;
  if (index >= f.locals->slots.size()) f.locals->slots.resize(index + 1);
  f.locals->slots[index] = {value, destroy};
}

void destroy_fiber_locals(Fiber* f) noexcept {
  constexpr int kRounds = 4;
  for (int round = 0; round < kRounds && f->locals; ++round) {
    FiberLocals* locals = f->locals;
    f->locals = nullptr;  // values set by the destructors below start a new round
    for (auto it = locals->slots.rbegin(); it != locals->slots.rend(); ++it) {
      if (it->value) it->destroy(it->value);
    }
    delete locals;
  }
  if (f->locals) {
    std::fprintf(stderr,
                 "weft: fiber %llu: FiberLocal destructors kept setting FiberLocal values for %d "
                 "rounds; the last ones leak\n",
                 static_cast<unsigned long long>(f->id), kRounds);
    delete f->locals;
    f->locals = nullptr;
  }
}

}  // namespace weft::detail
