// Fiber registry and the fiber dump; design in registry.hpp.
#include "core/registry.hpp"

#include <mutex>
#include <vector>

#include "weft/detail/assert.hpp"

namespace weft::detail {

void Registry::add(Fiber* f, unsigned shard) noexcept {
  f->reg_shard = static_cast<std::uint8_t>(shard);
  Shard& s = shard_of(f);
  std::lock_guard lock(s.lock);
  f->reg_prev = nullptr;
  f->reg_next = s.head;
  if (s.head) s.head->reg_prev = f;
  s.head = f;
}

void Registry::unlink(Shard& s, Fiber* f) noexcept {
  (f->reg_prev ? f->reg_prev->reg_next : s.head) = f->reg_next;
  if (f->reg_next) f->reg_next->reg_prev = f->reg_prev;
  f->reg_prev = f->reg_next = nullptr;
}

void Registry::remove(Fiber* f) noexcept {
  Shard& s = shard_of(f);
  std::lock_guard lock(s.lock);
  unlink(s, f);
}

void Registry::remove_all(unsigned shard, const FiberList& fibers) noexcept {
  Shard& s = shards_[shard];
  std::lock_guard lock(s.lock);
  for (Fiber* f = fibers.front(); f; f = f->next) {
    WEFT_ASSERT(f->reg_shard == shard, "a batch unlinked from another fiber's shard");
    unlink(s, f);
  }
}

void Registry::set_name(Fiber* f, std::string name) {
  auto* fresh = new std::string(std::move(name));
  std::string* old;
  {
    std::lock_guard lock(shard_of(f).lock);
    old = f->name;
    f->name = fresh;
  }
  delete old;
}

std::string Registry::name_of(const Fiber* f) {
  std::lock_guard lock(shard_of(f).lock);
  return f->name ? *f->name : std::string();
}

std::string Registry::name_by_id(std::uint64_t id) {
  for (Shard& s : shards_) {  // a rare look-up (the monitor's warnings): every shard
    std::lock_guard lock(s.lock);
    for (Fiber* f = s.head; f; f = f->reg_next) {
      if (f->id == id && f->state.load(std::memory_order_relaxed) != FiberState::kDone) {
        return f->name ? *f->name : std::string();
      }
    }
  }
  return {};
}

void Registry::for_each(const std::function<void(Fiber*)>& fn) {
  for (Shard& s : shards_) {
    std::lock_guard lock(s.lock);
    for (Fiber* f = s.head; f; f = f->reg_next) {
      if (f->state.load(std::memory_order_acquire) != FiberState::kDone) fn(f);
    }
  }
}

void Registry::dump(std::ostream& out, const std::uint64_t* class_sizes, std::int64_t now_ns) {
  struct Row {
    std::uint64_t id;
    std::string name;
    FiberState state;
    WaitReason reason;
    std::int64_t arg;
    std::int64_t waited_ns;
    std::size_t used;
    std::size_t size;
    bool hibernated;
  };
  std::vector<Row> rows;
  for_each([&](Fiber* f) {
    const FiberState st = f->state.load(std::memory_order_acquire);
    std::size_t used = 0;
    const std::size_t stack_size = class_sizes[f->stack_class];
    char* stack = f->stack.load(std::memory_order_relaxed);
    auto* ctx = static_cast<char*>(f->ctx.load(std::memory_order_relaxed));
    if (stack && ctx && st != FiberState::kRunning && ctx >= stack && ctx <= stack + stack_size) {
      // The saved context sits at the stack pointer: everything above it is in use.
      used = static_cast<std::size_t>(stack + stack_size - ctx);
    }
    rows.push_back(Row{
        f->id, f->name ? *f->name : std::string(), st,
        f->wait_reason.load(std::memory_order_relaxed), f->wait_arg.load(std::memory_order_relaxed),
        st == FiberState::kParked ? now_ns - f->parked_at_ns.load(std::memory_order_relaxed) : 0,
        used, stack_size, f->hibernation.load(std::memory_order_relaxed) != 0});
  });
  out << "weft: " << rows.size() << " fibers\n";
  for (const Row& r : rows) {
    out << "fiber " << r.id;
    if (!r.name.empty()) out << " \"" << r.name << "\"";
    out << " [" << fiber_state_name(r.state);
    if (r.state == FiberState::kParked) {
      out << ": " << wait_reason_name(r.reason);
      if (r.arg >= 0) {
        if (r.reason == WaitReason::kIoRead || r.reason == WaitReason::kIoWrite) {
          out << " fd " << r.arg;
        } else if (r.reason == WaitReason::kJoin) {
          out << " fiber " << r.arg;
        }
      }
      out << ", " << r.waited_ns / 1000000 << " ms";
      if (r.hibernated) out << ", hibernated";
    }
    out << "] stack ";
    if (r.state == FiberState::kCreated || r.state == FiberState::kRunnable) {
      if (r.used == 0) {
        out << "not yet taken";
      } else {
        out << r.used << "/" << r.size << " B";
      }
    } else if (r.state == FiberState::kRunning) {
      out << "in use/" << r.size << " B";
    } else {
      out << r.used << "/" << r.size << " B";
    }
    out << "\n";
  }
}

}  // namespace weft::detail
