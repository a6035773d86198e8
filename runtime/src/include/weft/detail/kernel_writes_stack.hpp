// KernelWritesStack: marks the calling fiber's stack as a target of kernel writes that outlive
// the system call that started them, so the stack hibernator leaves the fiber alone meanwhile.
// netpoll's io_uring backend holds one for each recv it queues into a buffer in the caller's
// frame (netpoll/src/poll_op.cpp); the runtime's hibernator reads the mark (Fiber::
// kernel_writes_stack, services/hibernator.hpp says why a hibernated stack must not be written
// that way).
#pragma once

namespace weft::detail {

struct Fiber;

// For as long as it lives, the calling fiber's stack is a target of kernel writes that outlive
// the system call that started them (netpoll's io_uring recv into a buffer in the caller's frame,
// completed as task work at the worker's next kernel entry): the stack hibernator leaves the fiber
// alone meanwhile. Such a write into a hibernated stack would fault to the hibernator from inside
// whatever system call the worker made next -- possibly while holding a lock the hibernator
// needs, so the worker would wait for it forever. A no-op outside a fiber; not nestable.
class KernelWritesStack {
 public:
  KernelWritesStack() noexcept;
  ~KernelWritesStack();
  KernelWritesStack(const KernelWritesStack&) = delete;
  KernelWritesStack& operator=(const KernelWritesStack&) = delete;

 private:
  Fiber* fiber_;
};

}  // namespace weft::detail
