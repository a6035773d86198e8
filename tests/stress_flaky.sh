#!/usr/bin/env bash
# Runs gtest cases many times under load to prove they do not pass by timing luck: the check every
# concurrency test must pass before it lands (50 runs under ASan and under TSan with two CPU hogs
# beside it).
#
# Usage: tests/stress_flaky.sh [-n RUNS] [-b BUILD_DIR]... [-H HOGS] TEST_BINARY GTEST_FILTER
#        tests/stress_flaky.sh [-n RUNS] [-b BUILD_DIR]... [-H HOGS] -f LIST_FILE
#   TEST_BINARY   a test executable's name, e.g. traps_test
#   GTEST_FILTER  e.g. 'TrapsTest.MigratingFibersSeeTheirCurrentThreadsLocals/*'
#   -f LIST_FILE  "BINARY FILTER" lines ('#' comments), e.g. tests/timing_sensitive.txt
#   -n RUNS       runs per build (default 50)
#   -b BUILD_DIR  a build tree holding tests/TEST_BINARY (repeatable; default build-ci/asan and
#                 build-ci/tsan, as scripts/test-all.sh lays them out)
#   -H HOGS       busy-looping processes kept running beside the tests (default 2)
# Prints one line per build with its failures; the log of each failing run is kept under
# ${TMPDIR:-/tmp}/weft-stress.*; exits 1 if any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=50 hogs=2 dirs=() list=
while getopts "n:b:H:f:" opt; do
  case $opt in
    n) runs=$OPTARG ;;
    b) dirs+=("$OPTARG") ;;
    H) hogs=$OPTARG ;;
    f) list=$OPTARG ;;
    *) sed -n '5,16p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
pairs=()
if [ -n "$list" ]; then
  while read -r b f; do
    [[ -z $b || $b == \#* ]] && continue
    pairs+=("$b" "$f")
  done <"$list"
elif (($# == 2)); then
  pairs=("$1" "$2")
else
  sed -n '5,16p' "$0"; exit 2
fi
((${#dirs[@]})) || dirs=(build-ci/asan build-ci/tsan)

hog_pids=()
stop_hogs() { ((${#hog_pids[@]})) && kill "${hog_pids[@]}" 2>/dev/null; wait 2>/dev/null || true; }
trap stop_hogs EXIT
for ((h = 0; h < hogs; ++h)); do
  sh -c 'while :; do :; done' &
  hog_pids+=($!)
done

logdir=$(mktemp -d "${TMPDIR:-/tmp}/weft-stress.XXXXXX")
export TSAN_OPTIONS="suppressions=$PWD/tools/sanitizers/tsan.supp halt_on_error=0 ${TSAN_OPTIONS:-}"
export ASAN_OPTIONS="detect_leaks=1 ${ASAN_OPTIONS:-}"
status=0
for dir in "${dirs[@]}"; do
 for ((p = 0; p < ${#pairs[@]}; p += 2)); do
  binary=${pairs[p]} filter=${pairs[p + 1]}
  exe=$dir/tests/$binary
  if [ ! -x "$exe" ]; then
    echo "stress_flaky: $exe is not built (build it first, e.g. scripts/test-all.sh asan)" >&2
    exit 2
  fi
  wrap=()
  # GCC 12's TSan cannot map its shadow under a high-entropy ASLR layout on new kernels.
  [[ $dir == *tsan* ]] && wrap=(setarch "$(uname -m)" -R)
  fails=0 t0=$SECONDS
  for ((i = 1; i <= runs; ++i)); do
    log=$logdir/$(basename "$dir")-$binary-$i.log
    if "${wrap[@]}" timeout 600 "$exe" --gtest_filter="$filter" >"$log" 2>&1 &&
       grep -q '^\[  PASSED  \]' "$log" && ! grep -q 'WARNING: ThreadSanitizer' "$log"; then
      rm -f "$log"
    else
      fails=$((fails + 1))
      echo "  $(basename "$dir") run $i failed: $log"
    fi
  done
  echo "$(basename "$dir"): $binary --gtest_filter='$filter': $((runs - fails))/$runs passed" \
       "with $hogs CPU hogs ($((SECONDS - t0)) s)"
  ((fails == 0)) || status=1
 done
done
((status == 0)) && rmdir "$logdir" 2>/dev/null
exit $status
