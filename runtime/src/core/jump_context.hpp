// jump_context: the one primitive that switches stacks. Its only caller is switch_to in
// sched/context_switch.cpp, and it must stay one call site: the x86-64 jump ends in `ret`, which
// the CPU predicts right only when the resumed side was suspended at the same call. On x86-64
// Linux it is weft's own jump_context_x86_64.S, Boost's jump_fcontext without the floating-point
// control state (see that file for why); elsewhere it is Boost.Context's jump_fcontext. Both take
// and make Boost's fcontext_t, so make_fcontext prepares a fiber's first run either way.
#pragma once

#include <boost/context/detail/fcontext.hpp>

namespace weft::detail {

using boost::context::detail::fcontext_t;
using boost::context::detail::make_fcontext;
using boost::context::detail::transfer_t;

#if defined(WEFT_OWN_JUMP_CONTEXT)
extern "C" transfer_t weft_jump_context(fcontext_t to, void* data) noexcept;
inline transfer_t jump_context(fcontext_t to, void* data) noexcept {
  return weft_jump_context(to, data);
}
#else
inline transfer_t jump_context(fcontext_t to, void* data) noexcept {
  return boost::context::detail::jump_fcontext(to, data);
}
#endif

}  // namespace weft::detail
