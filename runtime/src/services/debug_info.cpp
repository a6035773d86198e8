// The weft_debug_info descriptor (design in debug_info.hpp) and its attach/detach.
#include "services/debug_info.hpp"

#include <cstddef>
#include <mutex>

#include "core/fiber.hpp"
#include "core/registry.hpp"
#include "core/stack_pool.hpp"

namespace weft::detail {

// Friend of Registry: its shard array is private.
struct RegistryDebugLayout {
  static constexpr std::size_t shards = offsetof(Registry, shards_);
  static constexpr std::size_t shard_count = Registry::kShards;
  static constexpr std::size_t shard_size = sizeof(Registry::Shard);
  static constexpr std::size_t shard_head = offsetof(Registry::Shard, head);
  static_assert(sizeof(Registry::shards_) == shard_count * shard_size, "shards are not an array");
};

namespace {

static_assert(sizeof(FiberState) == 1 && sizeof(WaitReason) == 1 && sizeof(Fiber::stack_class) == 1,
              "weft_gdb.py reads FiberState, WaitReason and the stack class as one byte");
static_assert(sizeof(std::atomic<fcontext_t>) == sizeof(void*) &&
                  sizeof(std::atomic<char*>) == sizeof(void*) &&
                  sizeof(std::atomic<std::int64_t>) == 8,
              "weft_gdb.py reads these atomics as plain words");

// Keep in step with the enums (fiber.hpp, weft/detail/park.hpp): the last value of each.
constexpr auto kStateCount = static_cast<std::size_t>(FiberState::kDone) + 1;
constexpr auto kWaitReasonCount = static_cast<std::size_t>(WaitReason::kBarrier) + 1;  // the last

// Filled at static initialisation from the functions the runtime's own dump uses.
template <class E, std::size_t N>
struct NameTable {
  const char* names[N];
  explicit NameTable(const char* (*name_of)(E) noexcept) {
    for (std::size_t i = 0; i < N; ++i) names[i] = name_of(static_cast<E>(i));
  }
};
const NameTable<FiberState, kStateCount> kStateNames(&fiber_state_name);
const NameTable<WaitReason, kWaitReasonCount> kWaitReasonNames(&wait_reason_name);

std::mutex g_attach_mu;

}  // namespace

void debug_info_attach(Registry* registry, const std::uint64_t* stack_class_sizes,
                       const std::atomic<std::int64_t>* coarse_now) noexcept {
  std::lock_guard lock(g_attach_mu);
  if (weft_debug_info.registry) return;
  weft_debug_info.stack_size = stack_class_sizes[0];
  weft_debug_info.stack_class_sizes = stack_class_sizes;
  weft_debug_info.coarse_now = coarse_now;
  weft_debug_info.registry = registry;
}

void debug_info_detach(Registry* registry) noexcept {
  std::lock_guard lock(g_attach_mu);
  if (weft_debug_info.registry != registry) return;
  weft_debug_info.registry = nullptr;
  weft_debug_info.stack_size = 0;
  weft_debug_info.stack_class_sizes = nullptr;
  weft_debug_info.coarse_now = nullptr;
}

}  // namespace weft::detail

using weft::detail::Fiber;
using weft::detail::RegistryDebugLayout;

extern "C" {
__attribute__((used, visibility("default"))) weft_debug_info_t weft_debug_info = {
    weft::detail::kDebugInfoMagic,
    weft::detail::kDebugInfoVersion,
    sizeof(weft_debug_info_t),
    offsetof(Fiber, ctx),
    offsetof(Fiber, stack),
    offsetof(Fiber, id),
    offsetof(Fiber, state),
    offsetof(Fiber, wait_reason),
    offsetof(Fiber, wait_arg),
    offsetof(Fiber, parked_at_ns),
    offsetof(Fiber, reg_next),
    offsetof(Fiber, name),
    RegistryDebugLayout::shards,
    RegistryDebugLayout::shard_count,
    RegistryDebugLayout::shard_size,
    RegistryDebugLayout::shard_head,
    weft::detail::kStateCount,
    weft::detail::kStateNames.names,
    weft::detail::kWaitReasonCount,
    weft::detail::kWaitReasonNames.names,
    nullptr,
    0,
    nullptr,
    offsetof(Fiber, stack_class),
    weft::detail::StackPool::kClasses,
    nullptr,
};
}
