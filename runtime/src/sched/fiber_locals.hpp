// FiberLocal values at the end of a fiber (design in fiber_locals.cpp).
#pragma once

namespace weft::detail {

struct Fiber;
// On the fiber's own stack, after its function returned or unwound: destroys its FiberLocal
// values (and those their destructors set, for a few rounds).
void destroy_fiber_locals(Fiber* f) noexcept;

}  // namespace weft::detail
