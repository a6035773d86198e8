#!/usr/bin/env bash
# README command 1: install what is missing, build (Release) and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target skynet_demo
./build/examples/skynet_demo
