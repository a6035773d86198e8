#!/usr/bin/env bash
# Installs what weft needs on Debian 12, and nothing that is already there (safe to run twice).
# Build: g++, cmake, Boost.Context + Boost (Lockfree), abseil, GoogleTest, Google Benchmark.
# Benchmarks: Go 1.19 and Boost.Fiber (the peers), wrk (HTTP load), linux-perf (profiling).
# TLS: libssl-dev (OpenSSL 3, weft::tls); openssl and curl (the TLS tests' real peers).
# Examples: nginx-light (the reference of tests/http_framing_diff.py; never left running as a
# service). Tools: clang-format.
# Services: redis-tools (redis-cli and redis-benchmark, which resp_server's CI test runs),
# redis-server (the side-by-side figure of tools/services_bench.sh; never left running as a
# service). Fuzzing: clang + libclang-rt-14-dev (libFuzzer, tools/fuzz/run.sh).
# Debugging: gdb (tools/gdb/weft_gdb.py and the tests/gdb_test that drives it).
# The io_uring netpoller: liburing-dev. Stack hibernation: liblz4-dev (compresses the saved images of idle fibers' stacks).
# Lint (scripts/lint.sh, CI's threadsafety variant): clang-format and clang-tidy.
set -euo pipefail
packages=(build-essential cmake pkg-config libboost-context-dev libboost-dev libabsl-dev
          libgtest-dev libgmock-dev libbenchmark-dev libboost-fiber-dev golang-go linux-perf
          clang-format nginx-light wrk libssl-dev openssl curl ca-certificates
          redis-tools redis-server clang libclang-rt-14-dev gdb liblz4-dev liburing-dev
          clang-tidy)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # Debian starts redis-server as a system service where it can; the bench starts its own.
  if [[ " ${missing[*]} " == *" redis-server "* ]]; then
    "${sudo_cmd[@]}" service redis-server stop >/dev/null 2>&1 || true
  fi
  if [[ " ${missing[*]} " == *" nginx-light "* ]]; then
    "${sudo_cmd[@]}" service nginx stop >/dev/null 2>&1 || true
  fi
else
  echo "install-deps: everything is installed"
fi
