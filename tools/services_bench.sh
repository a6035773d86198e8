#!/usr/bin/env bash
# Side by side: the same redis-benchmark load against examples/resp_server (weft) and Debian's
# redis-server, each started here on a free loopback port (redis-server with no persistence).
# Prints requests/s per test and pipeline depth, and the weft/redis ratio; also one
# "SERVICES_BENCH ..." line per figure for scripts.
#
# Usage: tools/services_bench.sh [-b BUILD_DIR] [-n REQUESTS] [-c CLIENTS] [-P "1 16"]
#                                [-w "0 1"] [-t TESTS]
#   -b  build tree with examples/resp_server (default: build; built here if missing)
#   -w  resp_server --workers values to run (0: all cores), each a column
#   -t  redis-benchmark tests (default: ping,set,get,incr,mset)
# Needs redis-tools and redis-server (scripts/install-deps.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build requests=100000 clients=50 pipelines="1 16" workers="0" tests=ping,set,get,incr,mset
while getopts "b:n:c:P:w:t:h" opt; do
  case $opt in
    b) build=$OPTARG ;;
    n) requests=$OPTARG ;;
    c) clients=$OPTARG ;;
    P) pipelines=$OPTARG ;;
    w) workers=$OPTARG ;;
    t) tests=$OPTARG ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
  esac
done
for tool in redis-benchmark redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "services_bench: $tool not found (scripts/install-deps.sh)"; exit 1; }
done
server=$build/examples/resp_server
if [ ! -x "$server" ]; then
  echo "services_bench: building resp_server in $build"
  [ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target resp_server >/dev/null
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_weft() {  # start_weft WORKERS -> sets port
  "$server" --listen=127.0.0.1:0 --workers="$1" >"$tmp/weft.out" 2>&1 &
  pids+=($!)
  port=
  for _ in $(seq 1 200); do
    port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/weft.out")
    [ -n "$port" ] && return 0
    sleep 0.05
  done
  echo "services_bench: resp_server did not start"; cat "$tmp/weft.out"; exit 1
}

start_redis() {  # -> sets port
  for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 40000))
    port_in_use "$port" && continue
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
      >"$tmp/redis.out" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 100); do
      redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
      kill -0 "${pids[-1]}" 2>/dev/null || break
      sleep 0.05
    done
  done
  echo "services_bench: redis-server did not start"; cat "$tmp/redis.out"; exit 1
}

stop_last() {
  kill "${pids[-1]}" 2>/dev/null || true
  wait "${pids[-1]}" 2>/dev/null || true
  unset 'pids[-1]'
}

# run_bench NAME PORT P: results into $tmp/NAME-P (lines "TEST rps")
run_bench() {
  redis-cli -p "$2" flushall >/dev/null
  redis-benchmark -h 127.0.0.1 -p "$2" -t "$tests" -n "$requests" -c "$clients" -P "$3" -q 2>&1 |
    tr '\r' '\n' | grep -E '^[A-Z_]+( \(10 keys\))?: [0-9.]+ requests per second' |
    sed -E 's/^([A-Z_]+)( \(10 keys\))?: ([0-9.]+) requests per second.*/\1 \3/' >"$tmp/$1-$3"
}

echo "redis-benchmark -t $tests -n $requests -c $clients, on $(nproc) cores" \
  "($(redis-server --version | sed 's/.*v=\([^ ]*\).*/redis-server \1/'))"
columns=()
for p in $pipelines; do
  for w in $workers; do
    start_weft "$w"
    run_bench "weft-w$w" "$port" "$p"
    stop_last
  done
  start_redis
  run_bench redis "$port" "$p"
  stop_last
done
for w in $workers; do columns+=("weft-w$w"); done

header=$(printf '%-12s %-3s' test P)
for c in "${columns[@]}"; do header+=$(printf ' %14s' "$c req/s"); done
header+=$(printf ' %14s' "redis req/s")
for c in "${columns[@]}"; do header+=$(printf ' %10s' "${c#weft-}/redis"); done
echo "$header"
for p in $pipelines; do
  while read -r test redis_rps; do
    row=$(printf '%-12s %-3s' "$test" "$p")
    ratios=
    for c in "${columns[@]}"; do
      rps=$(awk -v t="$test" '$1 == t { print $2 }' "$tmp/$c-$p")
      row+=$(printf ' %14s' "${rps:--}")
      ratio=$(awk -v a="${rps:-0}" -v b="$redis_rps" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
      ratios+=$(printf ' %10s' "$ratio")
      echo "SERVICES_BENCH test=$test P=$p server=$c rps=${rps:-0} redis_rps=$redis_rps ratio=$ratio" \
        >>"$tmp/machine"
    done
    echo "$row$(printf ' %14s' "$redis_rps")$ratios"
  done <"$tmp/redis-$p"
done
cat "$tmp/machine"
