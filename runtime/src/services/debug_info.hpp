// weft_debug_info: a C-linkage descriptor of weft's private data layout, found by debuggers through
// its ELF symbol (tools/gdb/weft_gdb.py). Release builds carry no DWARF for weft's internals, so
// the gdb script reads the registry of fibers with the offsets published here instead of with
// debug info. The layout is versioned (kDebugInfoVersion) and only ever grows at the end; the
// script's _FIELDS list names these fields in this order.
#pragma once

#include <atomic>
#include <cstdint>

extern "C" {

struct weft_debug_info_t {
  std::uint32_t magic;    // weft::detail::kDebugInfoMagic
  std::uint32_t version;  // weft::detail::kDebugInfoVersion
  std::uint64_t size;     // sizeof(weft_debug_info_t)

  // Fiber (runtime/src/core/fiber.hpp): offsets of the fields a debugger reads.
  std::uint64_t fiber_ctx;           // fcontext_t: saved context, null until the first run
  std::uint64_t fiber_stack;         // char*: lowest usable byte of its stack, null before
  std::uint64_t fiber_id;            // std::uint64_t
  std::uint64_t fiber_state;         // std::uint8_t FiberState
  std::uint64_t fiber_wait_reason;   // std::uint8_t WaitReason
  std::uint64_t fiber_wait_arg;      // std::int64_t: fd for io waits, fiber id for join, else -1
  std::uint64_t fiber_parked_at_ns;  // std::int64_t: steady clock, same base as *coarse_now
  std::uint64_t fiber_reg_next;      // Fiber*: next fiber in its registry shard
  std::uint64_t fiber_name;          // std::string* (libstdc++: char* at 0, size at 8), or null

  // Registry (runtime/src/core/registry.hpp): registry_shard_count shards of registry_shard_size
  // bytes from registry_shards; each holds the head (Fiber*) of its list at registry_shard_head.
  std::uint64_t registry_shards;
  std::uint64_t registry_shard_count;
  std::uint64_t registry_shard_size;
  std::uint64_t registry_shard_head;

  // Names of FiberState and WaitReason values, indexed by value.
  std::uint64_t state_count;
  const char* const* state_names;
  std::uint64_t wait_reason_count;
  const char* const* wait_reason_names;

  // The running runtime: set when a Runtime is constructed (and no other one is attached),
  // cleared when it is destroyed. Volatile: nothing in the process reads them.
  void* volatile registry;            // weft::detail::Registry*, null: no runtime
  volatile std::uint64_t stack_size;  // usable bytes per fiber stack
  const std::atomic<std::int64_t>* volatile coarse_now;  // monitor's clock (ns), ~10 ms steps

  // Version 2: stacks of several sizes. A fiber's usable stack bytes are
  // stack_class_sizes[fiber's std::uint8_t at fiber_stack_class] (stack_size is class 0's).
  std::uint64_t fiber_stack_class;
  std::uint64_t stack_class_count;
  const std::uint64_t* volatile stack_class_sizes;  // set with registry, null when detached
};

// Defined in debug_info.cpp; exported so that gdb finds it in stripped-of-DWARF binaries.
extern __attribute__((visibility("default"))) weft_debug_info_t weft_debug_info;
}

namespace weft::detail {

class Registry;

inline constexpr std::uint32_t kDebugInfoMagic = 0x74666577;  // "weft" in little-endian bytes
inline constexpr std::uint32_t kDebugInfoVersion = 2;

// Publishes this runtime in weft_debug_info unless another one is published already (a second
// Runtime constructed while one runs is refused by run() and must not hide the running one).
void debug_info_attach(Registry* registry, const std::uint64_t* stack_class_sizes,
                       const std::atomic<std::int64_t>* coarse_now) noexcept;
// Withdraws it if it is the published one.
void debug_info_detach(Registry* registry) noexcept;

}  // namespace weft::detail
