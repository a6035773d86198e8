// Registry: every fiber that exists (started and not yet freed), for fiber dumps and for the
// shutdown unwind. Each shard is an intrusive list through Fiber::reg_prev/reg_next under its own
// lock, which also guards Fiber::name (set_name replaces it while dumps read it).
//
// Sharded by the worker that started the fiber (Fiber::reg_shard, fixed at add): a worker's
// spawns take only its own shard's lock, a line that stays in its core's cache. A go() fiber that
// ends on another worker is not unlinked at once: that worker collects it and unlinks a batch at a
// time under one acquisition of the shard's lock (remove_all; the batching is the scheduler's,
// sched/fiber_lifecycle.cpp). Until then it stays registered in state Done, holding its memory,
// and for_each skips it. Why: sharded by fiber id, every spawn and every exit took a lock that the
// other core had just held and wrote a neighbour's link that it had just written: skynet on two
// workers took twice as long (161 against 81 ms). A spawn loop with no registry at all still runs
// 20% faster than with these shards.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "core/fiber.hpp"
#include "weft/detail/fiber_list.hpp"
#include "weft/detail/spin_lock.hpp"

namespace weft::detail {

class Registry {
 public:
  static constexpr std::size_t kShards = 64;
  // Fibers started off the workers (a plain thread's spawn) share the last shard.
  static constexpr unsigned kForeignShard = kShards - 1;
  static unsigned shard_of_worker(unsigned worker_index) noexcept {
    return worker_index % kForeignShard;
  }

  void add(Fiber* f, unsigned shard) noexcept;
  void remove(Fiber* f) noexcept;
  // Unlinks every fiber of `fibers` (linked through Fiber::next; all of shard `shard`) under one
  // acquisition of the shard's lock. The list stays as it was.
  void remove_all(unsigned shard, const FiberList& fibers) noexcept;
  void set_name(Fiber* f, std::string name);
  std::string name_of(const Fiber* f);
  // The name of the registered fiber with this id ("" if none): safe without a live reference.
  std::string name_by_id(std::uint64_t id);
  // Calls fn for every registered fiber that has not finished, under its shard's lock; fn must
  // not block or re-enter.
  void for_each(const std::function<void(Fiber*)>& fn);
  // class_sizes: usable stack bytes by Fiber::stack_class (StackPool::class_sizes).
  void dump(std::ostream& out, const std::uint64_t* class_sizes, std::int64_t now_ns);

 private:
  friend struct RegistryDebugLayout;  // debug_info.cpp publishes the shard layout to debuggers
  struct alignas(64) Shard {
    SpinLock lock;
    Fiber* head = nullptr;
  };
  Shard& shard_of(const Fiber* f) noexcept { return shards_[f->reg_shard]; }
  static void unlink(Shard& s, Fiber* f) noexcept;  // s.lock held (its users take it by lock_guard)
  std::array<Shard, kShards> shards_;
};

}  // namespace weft::detail
