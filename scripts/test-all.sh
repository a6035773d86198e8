#!/usr/bin/env bash
# README command 2 (and CI's .ci/run): install what is missing, then build and run every test in
# four builds -- Release, Debug (WEFT_ASSERT on), ASan+UBSan, TSan -- and run every benchmark
# once at a tiny size (tools/bench/compare --quick, reusing the Release build) so none of them
# rots, and every protocol parser's libFuzzer target for 20 s (tools/fuzz/run.sh, clang + ASan +
# UBSan), and build the libraries once with clang's -Wthread-safety -Werror=thread-safety, which
# checks every ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED annotation, then lint
# (scripts/lint.sh: .clang-tidy's checks over the library sources, clang-format over the tree).
# The bench variant also checks that docs/performance.md and README's table are what
# tools/bench/render draws from tools/bench/results/ (render --check).
# Usage: scripts/test-all.sh [release|debug|asan|tsan|threadsafety|bench|fuzz ...]
#        (default: all of them)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
variants=("$@")
((${#variants[@]})) || variants=(release debug asan tsan threadsafety bench fuzz)
failed=()

run_variant() {
  local name=$1; shift
  local dir=build-ci/$name
  echo "=== $name: configure + build"
  cmake -S . -B "$dir" "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  echo "=== $name: test"
  local wrap=()
  # GCC 12's TSan cannot map its shadow under a high-entropy ASLR layout on new kernels.
  [ "$name" = tsan ] && wrap=(setarch "$(uname -m)" -R)
  export TSAN_OPTIONS="suppressions=$PWD/tools/sanitizers/tsan.supp halt_on_error=0 ${TSAN_OPTIONS:-}"
  export ASAN_OPTIONS="detect_leaks=1 ${ASAN_OPTIONS:-}"
  rm -f "$dir/Testing/Temporary/LastTestsFailed.log"
  (cd "$dir" && "${wrap[@]}" ctest --output-on-failure -j"$jobs" --timeout 600)
}

# CI shows only the end of the log, so the end of the log names each failed test: first the last
# lines of its output (from ctest's own record, Testing/Temporary/LastTest.log), then, last of all,
# one short block per test with the lines that say why (gtest's failures, sanitizer reports,
# ctest's timeout).
failed_test_output() {  # variant test-name
  awk -v t="$2" '$0 ~ ("Testing: " t "$") {on = 1} on {print}
                 on && index($0, "\"" t "\" end time") == 1 {exit}' \
    "build-ci/$1/Testing/Temporary/LastTest.log"
}
report_failed_tests() {  # variant brief|full
  local list=build-ci/$1/Testing/Temporary/LastTestsFailed.log name n=0
  [ -s "$list" ] || return 0
  while IFS=: read -r _ name; do
    ((++n > 5)) && { echo "... and $(($(wc -l < "$list") - 5)) more in $list"; break; }
    if [ "$2" = full ]; then
      echo "--- $1: $name, the last 40 lines of its output"
      failed_test_output "$1" "$name" | tail -n 40
    else
      echo "--- $1 FAILED $name:"
      failed_test_output "$1" "$name" |
        grep -E -A 2 -m 2 'Failure$|ERROR: |SUMMARY: |Timeout|\*\*\*' | head -n 8 || true
    fi
  done < "$list"
}

# The Debug and sanitizer builds keep line tables only (-g1): reports and backtraces still name
# file:line and function, and the builds take a third less time than with full debug info (-g).
# gdb_fixture, which gdb_test inspects, sets its own -g.
line_tables=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
             -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
             -DCMAKE_CXX_FLAGS_DEBUG="-g1" -DCMAKE_C_FLAGS_DEBUG="-g1")
# ASan+UBSan at -O1 (what ASan's authors recommend): it keeps the checks and builds faster. At
# -O2 this variant was the slowest, 914 s on a 2-core machine, against 664 s at -O1.
asan_flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
            -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
# The libraries build with -Werror (WEFT_WARNINGS_AS_ERRORS) in every variant.
werror=(-DWEFT_WARNINGS_AS_ERRORS=ON)
start=$SECONDS
for v in "${variants[@]}"; do
  t0=$SECONDS
  case $v in
    release) run_variant release -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=ON \
               -DWEFT_BUILD_TOOLS=ON -DWEFT_BUILD_EXAMPLES=ON "${werror[@]}" || failed+=(release) ;;
    debug) run_variant debug -DCMAKE_BUILD_TYPE=Debug "${line_tables[@]}" \
             -DWEFT_BUILD_TOOLS=OFF "${werror[@]}" || failed+=(debug) ;;
    asan) run_variant asan -DCMAKE_BUILD_TYPE=RelWithDebInfo "${asan_flags[@]}" \
            -DWEFT_SANITIZE=address -DWEFT_BUILD_TOOLS=OFF "${werror[@]}" || failed+=(asan) ;;
    tsan) run_variant tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo "${line_tables[@]}" \
            -DWEFT_SANITIZE=thread -DWEFT_BUILD_TOOLS=OFF "${werror[@]}" || failed+=(tsan) ;;
    threadsafety) echo "=== threadsafety: clang -Wthread-safety -Werror=thread-safety (libraries)," \
                       "clang-tidy, clang-format (scripts/lint.sh)"
           CC=clang CXX=clang++ cmake -S . -B build-ci/threadsafety -DCMAKE_BUILD_TYPE=Debug \
             -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety" -DWEFT_BUILD_TESTS=OFF \
             -DWEFT_BUILD_EXAMPLES=OFF -DWEFT_BUILD_TOOLS=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
             "${werror[@]}" >/dev/null &&
             cmake --build build-ci/threadsafety -j"$jobs" &&
             scripts/lint.sh all build-ci/threadsafety || failed+=(threadsafety) ;;
    bench) echo "=== bench: every benchmark once (quick); docs/performance.md against its data"
           bench_ok=1
           tools/bench/compare --quick --build-dir build-ci/release || bench_ok=0
           tools/bench/render --check || bench_ok=0
           ((bench_ok)) || failed+=(bench) ;;
    fuzz) echo "=== fuzz: each parser's libFuzzer target, 20 s"
          tools/fuzz/run.sh 20 build-ci/fuzz || failed+=(fuzz) ;;
    *) echo "unknown variant $v (release|debug|asan|tsan|threadsafety|bench|fuzz)"; exit 2 ;;
  esac
  echo "=== $v took $((SECONDS - t0)) s"
done
echo "=== all done in $((SECONDS - start)) s"
if ((${#failed[@]})); then
  for v in "${failed[@]}"; do report_failed_tests "$v" full; done
  for v in "${failed[@]}"; do report_failed_tests "$v" brief; done
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all variants passed: ${variants[*]}"
