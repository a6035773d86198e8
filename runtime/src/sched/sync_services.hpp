// What sync (runtime/src/sync) asks of the scheduler, and all it may ask. sync builds its
// primitives on the one park protocol (weft/detail/park.hpp) and on these few facts about the
// calling thread; it never sees Worker, Runtime or Fiber, so the scheduler keeps no bookkeeping of
// sync's (a spread RWMutex's leaving-readers marks live in its own per-worker counters,
// rw_mutex.cpp). Defined beside current_worker() in runtime.cpp and beside the run queues in
// sched/queues.cpp; out of line, as current_worker() is (a fiber may resume on another thread,
// so no thread-local address may be cached across a park).
#pragma once

namespace weft::detail {

// What current_worker_index() returns on a plain thread (no worker of a running runtime).
inline constexpr unsigned kNotAWorker = ~0u;

// The index of the calling thread's worker in its runtime (0 .. workers - 1), or kNotAWorker. One
// runtime runs at a time and each worker index is one thread, so a worker is the only writer of
// state it keys by its index; the next runtime's worker of the same index starts after it ended.
unsigned current_worker_index() noexcept;

// The workers of the runtime running now, 0 when none runs.
unsigned current_worker_count() noexcept;

// Whether a fiber that finds a lock held should spin for it: it runs on a worker with nothing
// else queued while another worker is awake (and may be running the holder). False on a plain
// thread.
bool lock_spin_may_help() noexcept;

}  // namespace weft::detail
