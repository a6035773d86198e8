# weft_add_component(NAME <name> SOURCES <file>... [PUBLIC_LINK <lib>...] [PRIVATE_LINK <lib>...]
#                    [RUNTIME_INTERNALS])
#
# One weft library, weft_<name>, exported and installed as weft::<name> (file libweft_<name>).
# This helper owns what every component shares:
#   - public headers in <component>/include (installed whole: only headers that installed ones
#     include belong there), private ones in <component>/src;
#   - RUNTIME_INTERNALS: the runtime's private headers (runtime/src/include, the in-tree target
#     weft_runtime_internal), for components that use the runtime's internals; never installed;
#   - C++20, weft_target_warnings (cmake/WeftWarnings.cmake), and -Werror when
#     WEFT_WARNINGS_AS_ERRORS is ON (CI: scripts/test-all.sh). The option covers the libraries,
#     which build clean with GCC 12 (Release, Debug, ASan+UBSan, TSan) and clang 14 (Debug);
#     tests, examples and tools keep their warnings as warnings;
#   - link-time optimisation under WEFT_LTO in Release builds without a sanitizer, with fat
#     objects so that the installed static library also serves consumers that do not use LTO;
#   - install rules: the library into the weftTargets export set, the headers.
# What is particular to a component (liburing, LZ4, OpenSSL, the assembly stack switch) stays in
# its own CMakeLists.txt, after the call.
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/WeftWarnings.cmake)
option(WEFT_WARNINGS_AS_ERRORS "Treat warnings in weft's libraries as errors (-Werror)" OFF)

function(weft_add_component)
  cmake_parse_arguments(ARG "RUNTIME_INTERNALS" "NAME" "SOURCES;PUBLIC_LINK;PRIVATE_LINK" ${ARGN})
  if(NOT ARG_NAME OR NOT ARG_SOURCES)
    message(FATAL_ERROR "weft_add_component: NAME and SOURCES are required")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "weft_add_component(${ARG_NAME}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  set(target weft_${ARG_NAME})
  add_library(${target} ${ARG_SOURCES})
  add_library(weft::${ARG_NAME} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${ARG_NAME} OUTPUT_NAME ${target})
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_compile_features(${target} PUBLIC cxx_std_20)
  weft_target_warnings(${target})
  if(WEFT_WARNINGS_AS_ERRORS)
    # GCC 12's -Wrestrict misfires inside libstdc++ on `"literal" + std::string` (GCC bug
    # 105329; sched/stack_sizes.cpp, netpoll's address.cpp): it stays a warning.
    target_compile_options(${target} PRIVATE -Werror
      $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wno-error=restrict>)
  endif()
  if(WEFT_LTO AND CMAKE_BUILD_TYPE STREQUAL "Release" AND WEFT_SANITIZE STREQUAL "")
    set_target_properties(${target} PROPERTIES INTERPROCEDURAL_OPTIMIZATION ON)
    target_compile_options(${target} PRIVATE -ffat-lto-objects)
  endif()
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_LINK} PRIVATE ${ARG_PRIVATE_LINK})
  if(ARG_RUNTIME_INTERNALS)
    # BUILD_INTERFACE: the export set never names this in-tree-only target.
    target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:weft_runtime_internal>)
  endif()
  install(TARGETS ${target} EXPORT weftTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY include/weft DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()
