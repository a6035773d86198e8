# Install test, run by CTest as `cmake -D... -P install_test.cmake`:
#   1. `cmake --install` the build tree BUILD_DIR into WORK_DIR/prefix (a fresh scratch prefix),
#   2. configure tests/install_consumer (CONSUMER_DIR) with find_package(weft) and
#      -DCMAKE_PREFIX_PATH=<prefix>, with the same compiler, build type and sanitizer flags,
#   3. build it, run it, and check its output and exit code.
# Proves that the installed package (headers, library, weftConfig.cmake and its dependencies) is
# usable from another project, as docs/api.md promises.
foreach(var BUILD_DIR WORK_DIR CONSUMER_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "install_test.cmake: -D${var}=... is required")
  endif()
endforeach()
if("${BUILD_TYPE}" STREQUAL "")
  set(BUILD_TYPE Release)
endif()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("cmake --install"
  "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" --config "${BUILD_TYPE}")
if(NOT EXISTS "${prefix}/include/weft/runtime.hpp")
  message(FATAL_ERROR "install test: ${prefix}/include/weft/runtime.hpp was not installed")
endif()
# Only the detail headers that installed headers include are installed (the runtime's internals
# stay in runtime/src/include): every "weft/..." include of an installed header resolves in the
# prefix, and the poller interface, the runtime's most internal header, is not there.
if(EXISTS "${prefix}/include/weft/detail/poller.hpp")
  message(FATAL_ERROR "install test: the runtime's private weft/detail/poller.hpp was installed")
endif()
file(GLOB_RECURSE installed_headers "${prefix}/include/weft/*.hpp")
foreach(header IN LISTS installed_headers)
  file(STRINGS "${header}" includes REGEX "^#include \"weft/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"(weft/[^\"]+)\".*" "\\1" included "${line}")
    if(NOT EXISTS "${prefix}/include/${included}")
      message(FATAL_ERROR "install test: ${header} includes ${included}, which is not installed")
    endif()
  endforeach()
endforeach()
file(GLOB_RECURSE config_files "${prefix}/*/weftConfig.cmake")
if(NOT config_files)
  message(FATAL_ERROR "install test: no weftConfig.cmake under ${prefix}")
endif()

set(flags_args)
if(NOT "${SANITIZER_FLAGS}" STREQUAL "")
  list(APPEND flags_args "-DCMAKE_CXX_FLAGS=${SANITIZER_FLAGS}"
       "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZER_FLAGS}")
endif()
step("configuring the consumer"
  "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${consumer_build}" -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
  "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${flags_args})

# The consumer must have found the installed package, not the build tree or a system copy.
file(STRINGS "${consumer_build}/CMakeCache.txt" weft_dir_line REGEX "^weft_DIR:")
string(REGEX REPLACE "^weft_DIR:[A-Z]+=" "" weft_dir "${weft_dir_line}")
file(REAL_PATH "${prefix}" real_prefix)
file(REAL_PATH "${weft_dir}" real_weft_dir)
string(FIND "${real_weft_dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "install test: the consumer found weft in '${weft_dir}', not under ${prefix}")
endif()

step("building the consumer"
  "${CMAKE_COMMAND}" --build "${consumer_build}" --config "${BUILD_TYPE}")

find_program(consumer weft_consumer PATHS "${consumer_build}" "${consumer_build}/${BUILD_TYPE}"
             NO_DEFAULT_PATH REQUIRED)
step("running the consumer" "${consumer}")
set(expected "weft consumer: 42 from 3 fibers")
string(FIND "${step_output}" "${expected}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "install test: expected '${expected}' in the consumer's output, got:\n"
                      "${step_output}")
endif()
message(STATUS "install test passed: ${step_output}")
