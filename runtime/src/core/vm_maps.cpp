// Mapping counts; see vm_maps.hpp.
#include "core/vm_maps.hpp"

#include <fstream>
#include <string>

namespace weft::detail {

long vm_max_map_count() {
  std::ifstream f("/proc/sys/vm/max_map_count");
  long v = 0;
  if (!(f >> v) || v <= 0) v = 65530;
  return v;
}

long vm_map_count() {
  std::ifstream f("/proc/self/maps");
  long n = 0;
  std::string line;
  while (std::getline(f, line)) ++n;
  return n;
}

}  // namespace weft::detail
