# weft_target_warnings(<target>...): the warnings every target of weft's own code compiles with:
# -Wall -Wextra, and -Werror too when WEFT_WARNINGS_AS_ERRORS is ON (CI turns it on:
# scripts/test-all.sh). Third-party code never gets these flags: they are PRIVATE to each target.
# Included by the top-level CMakeLists.txt and by tools/bench and tools/fuzz when those are
# configured on their own.
include_guard(GLOBAL)
option(WEFT_WARNINGS_AS_ERRORS "Treat warnings in weft's own targets as errors (-Werror)" OFF)

function(weft_target_warnings)
  foreach(target IN LISTS ARGN)
    target_compile_options(${target} PRIVATE -Wall -Wextra)
    if(WEFT_WARNINGS_AS_ERRORS)
      # GCC 12's -Wrestrict misfires inside libstdc++ on `"literal" + std::string` (GCC bug
      # 105329): it stays a warning.
      target_compile_options(${target} PRIVATE -Werror
        $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wno-error=restrict>)
    endif()
  endforeach()
endfunction()
