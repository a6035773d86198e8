// Options as the runtime uses them: what the caller left at its default is filled in from the
// environment (WEFT_WORKERS, WEFT_STACK_SIZE, WEFT_STACK_PROFILE, WEFT_STACK_SIZES) and the
// machine. Malformed environment values throw std::invalid_argument naming the variable and what it
// must be.
#pragma once

#include <cstddef>
#include <string_view>

#include "weft/runtime.hpp"

namespace weft::detail {

Options resolve_options(const Options& in);

// A stack size as WEFT_STACK_SIZE spells it: bytes, optionally K or M (with i, iB or B after
// it), between 4K and 1G. False when `text` is not one.
bool parse_stack_size(std::string_view text, std::size_t* out) noexcept;

}  // namespace weft::detail
