// raise_fd_soft_limit (design in weft/detail/fd_limit.hpp).
#include "weft/detail/fd_limit.hpp"

#include <sys/resource.h>

namespace weft::detail {

void raise_fd_soft_limit() noexcept {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace weft::detail
