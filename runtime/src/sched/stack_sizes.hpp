// StackSizeTable: fiber stack sizes by fiber name, from the file `weft-stackprof sizes` writes
// (Options::stack_sizes / $WEFT_STACK_SIZES). A fiber started with a name (FiberOptions::name)
// and no explicit size gets its name's size; every other fiber gets Options::stack_size.
//
// File format, text, one name per line:
//   # weft-stack-sizes/1          (comments and blank lines are ignored)
//   16384 chat-reader             (a size as WEFT_STACK_SIZE spells it, blanks, then the name:
//   8K ticker                      the rest of the line, verbatim)
// A malformed line, a size outside 4K..128M or a name listed twice throws std::invalid_argument
// naming the file and line: a table that silently dropped a line would give a fiber the default
// size and hide the mistake until it overflowed.
// Immutable after load; read by every worker without a lock.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace weft::detail {

class StackSizeTable {
 public:
  StackSizeTable() = default;
  // Reads `path` (see above); an empty path gives an empty table.
  static StackSizeTable load(const std::string& path);
  // The size listed for `name`, or 0.
  std::size_t lookup(std::string_view name) const noexcept;
  bool empty() const noexcept { return sizes_.empty(); }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, std::size_t, Hash, std::equal_to<>> sizes_;
};

}  // namespace weft::detail
