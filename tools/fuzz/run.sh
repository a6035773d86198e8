#!/usr/bin/env bash
# Builds the fuzz targets with clang (libFuzzer + ASan + UBSan) in build-fuzz/ and runs each for
# SECONDS (default 20) from the seed corpus; fails if any target finds a crash, a sanitizer report
# or a failed check (the input is then saved as build-fuzz/<target>-crash-*).
# Usage: tools/fuzz/run.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-20}
dir=${2:-build-fuzz}
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (scripts/install-deps.sh installs clang)"; exit 1; }
cmake -S tools/fuzz -B "$dir" -DCMAKE_CXX_COMPILER=clang++ -DWEFT_FUZZ_SECONDS="$seconds" >/dev/null
cmake --build "$dir" -j"$(nproc)"
# One target at a time: each libFuzzer run uses a core, and the machine may have two.
(cd "$dir" && ctest --output-on-failure -L fuzz)
