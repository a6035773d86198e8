// Context switching: the only code that jumps between stacks (context_switch.cpp). Design of the
// pending-action protocol in scheduler.hpp.
#pragma once

#include "core/fiber.hpp"
#include "sched/worker.hpp"

namespace weft::detail {

// `w.pending` must be set. next == null: switch to w's
// scheduler context. Returns in the resumed context (maybe on another thread) after running the
// pending action recorded by whoever switched to us, with the worker that runs the caller now:
// callers read it instead of the thread-local (current_worker()).
[[nodiscard]] Worker& switch_to(Worker& w, Fiber* next);
// Called by the scheduler context to start or resume `f`.
void resume_from_scheduler(Worker& w, Fiber* f);
// Prepares a never-run fiber: takes a stack and builds its initial context.
void prepare_first_run(Worker& w, Fiber* f);
// Caches the calling thread's errno and exception-globals addresses in `w` (its own thread).
void bind_thread_state(Worker& w) noexcept;
// Never returns, but deliberately not [[noreturn]]: ASan instruments calls to noreturn functions
// with __asan_handle_no_return, which misreads a fiber stack (seen at -O0).
void exit_current_fiber(Worker& w);

}  // namespace weft::detail
