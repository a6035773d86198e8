// Options as the runtime uses them: what the caller left at its default is filled in from the
// environment (WEFT_WORKERS, WEFT_STACK_SIZE, WEFT_STACK_PROFILE) and the machine. Malformed
// environment values throw std::invalid_argument naming the variable and what it must be.
#pragma once

#include "weft/runtime.hpp"

namespace weft::detail {

Options resolve_options(const Options& in);

}  // namespace weft::detail
