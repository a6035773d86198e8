#!/usr/bin/env bash
# README command 1: install what is missing, build (Release) and run the main job: the showcase,
# the echo server under load from weft-loadgen in another process (scripts/showcase.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target echo_server weft-loadgen
exec scripts/showcase.sh build
