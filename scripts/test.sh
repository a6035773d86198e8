#!/usr/bin/env bash
# The quick test path: install what is missing, make one Release build in build/test (tests,
# examples and tools: some tests run the example servers, weft-stackprof and gdb against a
# fixture), then run the whole CTest suite. scripts/test-all.sh is the full matrix CI runs.
# Usage: scripts/test.sh [CTEST_ARGS...]   e.g. scripts/test.sh -R Net   or   -L io_uring
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
dir=build/test
start=$SECONDS
echo "=== configure + build ($dir, Release)"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=ON -DWEFT_BUILD_TOOLS=ON \
  -DWEFT_BUILD_EXAMPLES=ON >/dev/null
cmake --build "$dir" -j"$jobs"
echo "=== test"
status=0
ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 600 "$@" || status=$?
echo "=== done in $((SECONDS - start)) s"
exit "$status"
