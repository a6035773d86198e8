// StackRestorer: what the switch path needs from stack hibernation (services/hibernator.hpp),
// declared down here so that sched/ depends on core/ only. switch_to calls restore() for a fiber
// whose Fiber::hibernation flag is set, before it jumps onto that fiber's stack.
#pragma once

namespace weft::detail {

struct Fiber;

class StackRestorer {
 public:
  // Brings f's stack back if it is hibernated; returns once every byte is in place.
  virtual void restore(Fiber* f) noexcept = 0;

 protected:
  ~StackRestorer() = default;
};

}  // namespace weft::detail
