// The kernel threads that belong to weft (workers, the monitor, blocking-pool threads), by tid.
// Deadlock detection must know whether any *other* thread is alive: such a thread could wake a
// fiber at any time. Thread names cannot tell (a thread inherits its creator's name), tids can.
#pragma once

#include <sys/types.h>

namespace weft::detail {

// Registers the calling thread for as long as the returned guard lives.
class OwnThread {
 public:
  OwnThread();
  ~OwnThread();
  OwnThread(const OwnThread&) = delete;
  OwnThread& operator=(const OwnThread&) = delete;

 private:
  pid_t tid_;
};

// Threads of this process that are not weft's own.
long count_foreign_threads();

}  // namespace weft::detail
