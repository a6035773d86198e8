#!/usr/bin/env bash
# The showcase (README command 1 runs it): the echo server and the load generator in separate
# processes, so that each side can use its whole fd limit. The generator ramps to CONNS
# connections (default 100000), pushes closed-loop echo traffic on all of them, holds them, and
# the script ends with one summary: connections held, req/s, latency percentiles, server RSS per
# connection and fibers alive. Where RLIMIT_NOFILE or memory caps the count, the generator says
# so and the summary shows what was held.
#
#   scripts/showcase.sh [build-dir]      env: CONNS, DURATION (s), WORKERS, MSG_SIZE
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
conns=${CONNS:-100000}
duration=${DURATION:-10}
workers=${WORKERS:-0}
size=${MSG_SIZE:-64}
server_bin=$build/examples/echo_server
loadgen_bin=$build/tools/loadgen/weft-loadgen
for b in "$server_bin" "$loadgen_bin"; do
  [ -x "$b" ] || { echo "showcase: $b is missing (build the echo_server and weft-loadgen targets)" >&2; exit 1; }
done

hard=$(ulimit -Hn)
echo "showcase: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), fd hard limit $hard per process"
if [ "$hard" != unlimited ] && [ "$hard" -lt $((conns + 64)) ]; then
  echo "showcase: NOTE: $conns connections need $((conns + 64)) fds in each process, but the hard"
  echo "          limit here is $hard (ulimit -Hn; only root can raise it): both sides will cap"
  echo "          near $((hard - 64)) connections and say so."
fi
mem_kib=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
if [ "$mem_kib" -lt $((conns * 24)) ]; then
  echo "showcase: NOTE: $((mem_kib / 1024)) MiB available; $conns connections need roughly $((conns * 24 / 1024)) MiB (kernel socket buffers of both sides included)."
fi

log=$(mktemp -d)
trap 'kill -TERM "$server_pid" 2>/dev/null || true; rm -rf "$log"' EXIT
"$server_bin" --listen=127.0.0.1:0 --workers="$workers" --stats_every=500ms >"$log/server.out" 2>"$log/server.err" &
server_pid=$!
for _ in $(seq 100); do
  grep -q '^listening on' "$log/server.out" 2>/dev/null && break
  sleep 0.05
done
addr=$(sed -n 's/^listening on //p' "$log/server.out")
[ -n "$addr" ] || { echo "showcase: the server did not start:"; cat "$log/server.err"; exit 1; }
baseline_rss=$(awk '/^VmRSS/ {print $2 * 1024}' /proc/$server_pid/status)
echo "showcase: echo server pid $server_pid listening on $addr (RSS $((baseline_rss / 1024)) KiB)"

set +e
"$loadgen_bin" --addr="$addr" --conns="$conns" --duration="${duration}s" --hold=2s \
  --size="$size" --workers="$workers" | tee "$log/loadgen.out"
loadgen_rc=${PIPESTATUS[0]}
set -e

kill -TERM "$server_pid"
wait "$server_pid" || true
lg=$(grep '^LOADGEN' "$log/loadgen.out" || true)
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$lg"; }
# The server's busiest stats line: most connections held, and the RSS with them.
read -r peak_conns peak_fibers peak_rss < <(grep '^stats:' "$log/server.out" |
  sed 's/.*conns=\([0-9]*\).*fibers=\([0-9]*\).*rss_bytes=\([0-9]*\).*/\1 \2 \3/' |
  sort -n -k1,1 -k3,3 | tail -1)
peak_conns=${peak_conns:-0}
per_conn=n/a
if [ "$peak_conns" -gt 0 ]; then
  per_conn=$(((peak_rss - baseline_rss) / peak_conns))
fi

echo
echo "================ weft showcase: echo server under load ================"
printf "%-34s %s of %s requested\n" "connections held" "$(field conns)" "$conns"
printf "%-34s %s req/s (%s-byte messages, %s s, closed loop)\n" "throughput" "$(field rps)" "$size" "$duration"
printf "%-34s p50 %s us, p99 %s us, p99.9 %s us\n" "latency" "$(field p50_us)" "$(field p99_us)" "$(field p999_us)"
printf "%-34s %s\n" "errors" "$(field errors)"
printf "%-34s %s connections, %s fibers alive, RSS %s MiB\n" "server at peak" "$peak_conns" "$peak_fibers" "$((peak_rss / 1048576))"
printf "%-34s %s bytes per connection (fiber, stack pages, buffers; kernel socket memory not included)\n" "server RSS per connection" "$per_conn"
echo "server weft::stats() at peak (field meanings: README, section weft::stats()):"
grep '^stats:' "$log/server.out" | awk -v c="$peak_conns" '$2 == "conns="c' | tail -1 |
  sed 's/^stats: //' | tr ' ' '\n' | grep -v -E '^(conns|accepted|rss_bytes)=' | paste -sd' ' |
  fold -s -w 72 | sed 's/^/  /'
echo "========================================================================"
if [ "$(field conns)" != "$conns" ]; then
  echo "(held fewer than requested: see the loadgen's messages above: fd limit or memory)"
fi
exit "$loadgen_rc"
