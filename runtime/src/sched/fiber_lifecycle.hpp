// The parts of a fiber's life that need the scheduler (fiber_lifecycle.cpp); creation, start and
// join are declared for the public templates in weft/detail/fiber_api.hpp.
#pragma once

#include "core/fiber.hpp"
#include "sched/worker.hpp"

namespace weft::detail {

// A fiber ended (returned, threw, or was unwound): finished count, state Done, join hand-off,
// and the main fiber's end starts shutdown. Runs on `w`, still on the finished fiber's stack, just
// before it switches away for good (or, for a dropped fiber, on the shutdown loop's).
void fiber_finished_bookkeeping(Worker& w, Fiber* f);
// An ended fiber's stack is gone: it leaves the registry and drops its run's reference. On `w`,
// the worker it ended on. Started by `w` (or a spawn()ed fiber, whose outcome must go with its
// last reference), it is unlinked at once; a go() fiber started elsewhere waits in w.retiring
// for kRetireBatch more of its shard (registry.hpp says why).
void fiber_retire(Worker& w, Fiber* f) noexcept;
// Unlinks and releases everything w.retiring holds: before `w` goes idle or stops, so no ended
// fiber keeps its memory while its worker sleeps.
void fiber_retire_all(Worker& w) noexcept;
// Shutdown: a fiber that never ran has its closure destroyed and is finished as unwound.
void fiber_drop_unstarted(Fiber* f) noexcept;

}  // namespace weft::detail
