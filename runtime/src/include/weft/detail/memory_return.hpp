// Memory that layers above the runtime give back once a burst is over. The runtime's heap
// return (on the monitor thread, after a burst of fibers ended and periodically; see
// Options::heap_return_interval) calls every registered returner before it trims the C heap.
// The netpoller registers its descriptor table's (which gives back the pages whose descriptors
// are all free). A returner runs on the monitor thread, concurrently with the workers: it takes
// its own locks, and must not block for long or park.
#pragma once

namespace weft::detail {

using MemoryReturner = void (*)() noexcept;
inline constexpr int kMaxMemoryReturners = 8;
// Any thread, any time, also before a runtime runs. Registering the same function again does
// nothing; more than kMaxMemoryReturners distinct ones is a bug (it aborts with a message).
void register_memory_returner(MemoryReturner fn) noexcept;
// Runs every registered returner (the heap return's first step).
void run_memory_returners() noexcept;

}  // namespace weft::detail
