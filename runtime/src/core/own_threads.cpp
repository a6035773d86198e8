// Registry of weft's own threads; see own_threads.hpp.
#include "core/own_threads.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace weft::detail {
namespace {
std::mutex g_mu;
// Never destroyed: a detached thread may still be leaving while static destructors run.
std::vector<pid_t>& own_tids() {
  static auto* tids = new std::vector<pid_t>;  // g_mu
  return *tids;
}
}  // namespace

OwnThread::OwnThread() : tid_(gettid()) {
  std::lock_guard lock(g_mu);
  own_tids().push_back(tid_);
}

OwnThread::~OwnThread() {
  std::lock_guard lock(g_mu);
  auto& tids = own_tids();
  tids.erase(std::find(tids.begin(), tids.end(), tid_));
}

long count_foreign_threads() {
  std::vector<pid_t> all;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') all.push_back(static_cast<pid_t>(std::atol(e->d_name)));
    }
    closedir(d);
  }
  std::lock_guard lock(g_mu);
  const auto& own = own_tids();
  return std::count_if(all.begin(), all.end(),
                       [&](pid_t t) { return std::find(own.begin(), own.end(), t) == own.end(); });
}

}  // namespace weft::detail
