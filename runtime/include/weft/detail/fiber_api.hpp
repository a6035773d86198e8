// What the templates in runtime.hpp need from the runtime to create, start and join fibers.
// A fiber and its closure live in ONE allocation: the Fiber header (private to the runtime) is
// followed by `closure_size` bytes whose layout only the template that created it knows. The
// template describes that storage with a ClosureOps table of plain function pointers.
#pragma once

#include <absl/status/status.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "weft/cancel.hpp"

namespace weft::detail {

struct Fiber;

struct ClosureOps {
  // Runs the callable and then destroys it, on the fiber's own stack. Must let FiberUnwind pass.
  void (*run)(void* storage);
  // Destroys the callable without running it (a fiber that never started before shutdown).
  void (*drop)(void* storage) noexcept;
  // Destroys what run() left behind (a Task's result) when the fiber is freed; may be null.
  void (*release)(void* storage) noexcept;
};

// Allocates a fiber that is not yet runnable; returns it and its closure storage.
Fiber* fiber_create(const ClosureOps* ops, std::size_t closure_size, std::size_t closure_align,
                    void** storage);
// Frees a fiber from fiber_create() that was never started (its closure failed to construct).
void fiber_abandon(Fiber* f) noexcept;
// FiberOptions for a created fiber, before its closure is built: its name and stack size class
// (an explicit size, else the stack-size table's size for the name, else the default). Throws
// std::invalid_argument for a size above the largest class.
void fiber_configure(Fiber* f, std::string_view name, std::size_t stack_size);
// Gives the pages of the calling fiber's stack below its current frame back to the kernel
// (MADV_DONTNEED), keeping one page under the frame for the calls it makes next. For after a deep
// call that is over -- a TLS handshake's key exchange and signature -- so that a fiber that then
// idles holds only the pages its live frames use (the RSS of an idle connection). The next deep
// call faults fresh zero pages in again. One system call; a no-op outside a fiber.
void release_stack_below_frame() noexcept;
// Makes a created fiber runnable. With `joinable`, the caller keeps a reference for join().
void fiber_start(Fiber* f, bool joinable);
// Parks until `f` has finished (any caller: fiber or plain thread). Returns false if it was
// unwound at shutdown instead of finishing.
bool fiber_join(Fiber* f);
// join bounded by `bound` (weft/cancel.hpp) and the caller's stop request: true when `f`
// finished (or was unwound); false when a bound fired first, with *why set to its status.
bool fiber_join_bounded(Fiber* f, const CancelToken& bound, absl::Status* why);
// Fires `f`'s stop signal (Task::request_stop). Harmless after the fiber ended.
void fiber_request_stop(Fiber* f) noexcept;
// Drops the joiner's reference (join done, or Task destroyed unjoined).
void fiber_release(Fiber* f) noexcept;
std::uint64_t fiber_id(const Fiber* f) noexcept;

// Prints "weft: fiber <id> "<name>" ..." for an exception that escaped a go() fiber, then aborts.
[[noreturn]] void die_uncaught_exception(const char* what) noexcept;

// run() support: `body(arg)` runs as the main fiber of a fresh runtime.
void run_runtime(const void* options, void (*body)(void*), void* arg);

// blocking() support: runs job(arg) on the blocking pool while the calling fiber parks.
void run_blocking(void (*job)(void*), void* arg);
// blocking(bound, f) support: true when job(arg) ran to its end (the caller owns arg again);
// false when a bound fired first (*why says which): then destroy(arg) runs once the job is done,
// or at once if it never started.
bool run_blocking_bounded(void (*job)(void*), void (*destroy)(void*) noexcept, void* arg,
                          const CancelToken& bound, absl::Status* why);

}  // namespace weft::detail
