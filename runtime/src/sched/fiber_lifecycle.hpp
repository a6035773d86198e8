// The parts of a fiber's life that need the scheduler (fiber_lifecycle.cpp); creation, start and
// join are declared for the public templates in weft/detail/fiber_api.hpp.
#pragma once

#include "core/fiber.hpp"
#include "sched/worker.hpp"

namespace weft::detail {

// A fiber ended (returned, threw, or was unwound): registry, finished count, join hand-off, and
// the main fiber's end starts shutdown. Runs on `w`, still on the finished fiber's stack, just
// before it switches away for good (or, for a dropped fiber, on the shutdown loop's).
void fiber_finished_bookkeeping(Worker& w, Fiber* f);
// Shutdown: a fiber that never ran has its closure destroyed and is finished as unwound.
void fiber_drop_unstarted(Fiber* f) noexcept;

}  // namespace weft::detail
