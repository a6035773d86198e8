// The stack-size table's loader; format and rules in stack_sizes.hpp.
#include "sched/stack_sizes.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "core/stack_pool.hpp"
#include "sched/options.hpp"

namespace weft::detail {
namespace {
// `s` without leading and trailing blanks (spaces, tabs, a CR from a DOS line end).
std::string_view strip(std::string_view s) {
  constexpr std::string_view kBlanks = " \t\r";
  const std::size_t first = s.find_first_not_of(kBlanks);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kBlanks) - first + 1);
}
}  // namespace

StackSizeTable StackSizeTable::load(const std::string& path) {
  StackSizeTable t;
  if (path.empty()) return t;
  std::ifstream in(path);
  if (!in) {
    throw std::invalid_argument("weft: cannot read the stack-size table " + path + " (" +
                                std::strerror(errno) +
                                "), given by Options::stack_sizes or $WEFT_STACK_SIZES");
  }
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    auto fail = [&](const std::string& what) {
      throw std::invalid_argument("weft: stack-size table " + path + ":" + std::to_string(lineno) +
                                  ": " + what +
                                  " (lines are \"SIZE NAME\", e.g. \"16K chat-reader\")");
    };
    const std::string_view rest = strip(line);
    if (rest.empty() || rest.front() == '#') continue;
    const std::size_t blank = rest.find_first_of(" \t");
    if (blank == std::string_view::npos) fail("no fiber name after the size");
    const std::string_view size_text = rest.substr(0, blank);
    const std::string_view name = strip(rest.substr(blank));
    std::size_t bytes = 0;
    if (!parse_stack_size(size_text, &bytes) || bytes > StackPool::kMaxClassBytes) {
      fail("\"" + std::string(size_text) + "\" is not a stack size between 4K and 128M");
    }
    if (!t.sizes_.emplace(std::string(name), bytes).second) {
      fail("\"" + std::string(name) + "\" is listed twice");
    }
  }
  return t;
}

std::size_t StackSizeTable::lookup(std::string_view name) const noexcept {
  const auto it = sizes_.find(name);
  return it == sizes_.end() ? 0 : it->second;
}

}  // namespace weft::detail
