# weft_target_warnings(<target>...): the warnings every target of weft's own code compiles with,
# -Wall -Wextra, PRIVATE to each target so that third-party code never gets them. Included by the
# top-level CMakeLists.txt and by tools/bench and tools/fuzz when those are configured on their own.
include_guard(GLOBAL)

function(weft_target_warnings)
  foreach(target IN LISTS ARGN)
    target_compile_options(${target} PRIVATE -Wall -Wextra)
  endforeach()
endfunction()
