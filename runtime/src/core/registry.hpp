// Registry: every fiber that exists (created and not yet freed), for fiber dumps and for the
// shutdown unwind. Sharded by fiber id so that spawn and exit on different workers rarely touch
// the same lock; each shard is an intrusive list through Fiber::reg_prev/reg_next.
// The shard lock also guards Fiber::name (set_name replaces it while dumps read it).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "core/fiber.hpp"
#include "weft/detail/spin_lock.hpp"

namespace weft::detail {

class Registry {
 public:
  static constexpr std::size_t kShards = 64;

  void add(Fiber* f) noexcept;
  void remove(Fiber* f) noexcept;
  void set_name(Fiber* f, std::string name);
  std::string name_of(const Fiber* f);
  // The name of the registered fiber with this id ("" if none): safe without a live reference.
  std::string name_by_id(std::uint64_t id);
  // Calls fn for every registered fiber under its shard's lock; fn must not block or re-enter.
  void for_each(const std::function<void(Fiber*)>& fn);
  // class_sizes: usable stack bytes by Fiber::stack_class (StackPool::class_sizes).
  void dump(std::ostream& out, const std::uint64_t* class_sizes, std::int64_t now_ns);

 private:
  friend struct RegistryDebugLayout;  // debug_info.cpp publishes the shard layout to debuggers
  struct alignas(64) Shard {
    SpinLock lock;
    Fiber* head = nullptr;
  };
  Shard& shard_of(const Fiber* f) noexcept { return shards_[f->id % kShards]; }
  std::array<Shard, kShards> shards_;
};

}  // namespace weft::detail
