// The process's memory-mapping count and the kernel's limit on it (vm.max_map_count): the stack
// pool checks them before mprotect guards split its regions, the hibernator before registering
// stacks with userfaultfd splits them.
#pragma once

namespace weft::detail {

long vm_max_map_count();  // /proc/sys/vm/max_map_count, 65530 if unreadable
long vm_map_count();      // lines of /proc/self/maps

}  // namespace weft::detail
