// Stack profiling; design and method in stack_profiler.hpp.
#include "core/stack_profiler.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace weft::detail {

StackProfiler::StackProfiler(std::string path, std::size_t stack_size)
    : path_(std::move(path)),
      stack_size_(stack_size),
      page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) {}

StackProfiler::~StackProfiler() { write(); }

std::size_t StackProfiler::high_water(char* stack, std::size_t size, char** low) const noexcept {
  *low = stack + size;
  const std::size_t pages = size / page_;
  std::vector<unsigned char> resident(pages);
  if (mincore(stack, size, resident.data()) != 0) return 0;
  std::size_t lowest = pages;
  for (std::size_t i = 0; i < pages; ++i) {
    if (resident[i] & 1) {
      lowest = i;
      break;
    }
  }
  if (lowest == pages) return 0;
  // Lowest non-zero word at or above the deepest resident page.
  std::size_t off = lowest * page_;
  for (; off < size; off += sizeof(std::uint64_t)) {
    std::uint64_t word;
    std::memcpy(&word, stack + off, sizeof word);
    if (word != 0) break;
  }
  *low = stack + off;
  return size - off;
}

void StackProfiler::record(const std::string* name, char* stack, std::size_t size,
                           bool unwound) noexcept {
#if defined(__SANITIZE_ADDRESS__)
  // The dead fiber's frames never returned, so their redzones are still poisoned; the scan and
  // the re-zeroing below touch them legitimately (the stack is ours until release()).
  ASAN_UNPOISON_MEMORY_REGION(stack, size);
#endif
  char* low = nullptr;
  const std::size_t used = high_water(stack, size, &low);
  std::memset(low, 0, used);  // the next fiber on this stack starts from zeros again
  const std::size_t bucket = (used + 63) / 64 * 64;
  try {
    ThreadMutexLock lock(mu_);
    PerName& p = by_name_[name ? *name : std::string()];
    ++p.count;
    if (unwound) ++p.unwound;
    if (used > p.max) p.max = used;
    if (size > p.stack_size) p.stack_size = size;
    ++p.used[bucket];
  } catch (...) {
    // Out of memory while profiling: drop the sample rather than fail the fiber's exit.
  }
}

namespace {
void write_json_string(std::FILE* f, const std::string& s) {
  std::fputc('"', f);
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      std::fputc('\\', f);
      std::fputc(c, f);
    } else if (c < 0x20) {
      std::fprintf(f, "\\u%04x", c);
    } else {
      std::fputc(c, f);
    }
  }
  std::fputc('"', f);
}
}  // namespace

void StackProfiler::write() const {
  ThreadMutexLock lock(mu_);
  std::FILE* f = std::fopen(path_.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "weft: stack profile: cannot write %s: %s\n", path_.c_str(),
                 std::strerror(errno));
    return;
  }
  std::fprintf(f,
               "{\n  \"format\": \"weft-stack-profile/1\",\n  \"method\": \"deepest resident page "
               "(mincore) + zero scan\",\n  \"stack_size\": %zu,\n  \"page_size\": %zu,\n"
               "  \"bucket_bytes\": 64,\n  \"fibers\": [",
               stack_size_, page_);
  bool first = true;
  for (const auto& [name, p] : by_name_) {
    std::fprintf(f, "%s\n    {\"name\": ", first ? "" : ",");
    first = false;
    write_json_string(f, name);
    std::fprintf(f,
                 ", \"count\": %llu, \"unwound\": %llu, \"max\": %zu, \"stack_size\": %zu, "
                 "\"used\": {",
                 static_cast<unsigned long long>(p.count),
                 static_cast<unsigned long long>(p.unwound), p.max, p.stack_size);
    bool first_bucket = true;
    for (const auto& [bytes, n] : p.used) {
      std::fprintf(f, "%s\"%zu\": %llu", first_bucket ? "" : ", ", bytes,
                   static_cast<unsigned long long>(n));
      first_bucket = false;
    }
    std::fprintf(f, "}}");
  }
  std::fprintf(f, "\n  ]\n}\n");
  if (std::fclose(f) != 0) {
    std::fprintf(stderr, "weft: stack profile: error writing %s: %s\n", path_.c_str(),
                 std::strerror(errno));
  }
}

}  // namespace weft::detail
