#!/usr/bin/env bash
# The showcase (README command 1 runs it): echo servers and load generators in separate
# processes. The generators ramp to CONNS connections (default 100000), hold them all at once,
# push closed-loop echo traffic on all of them, and the script ends with one summary: connections
# held, req/s, latency percentiles (p50/p99/p99.9), server RSS per connection and fibers alive --
# in total and per process -- and then the RSS per idle connection with stack hibernation on and
# off (IDLE_CONNS connections, default 10000, idle 3 s).
#
# Modes. One process may hold only as many sockets as its fd hard limit (ulimit -Hn; only root
# can raise it, and not on every machine). If CONNS fits, one server process and one generator
# hold them all. Otherwise the script runs N server processes sharing one port (echo_server
# --reuse_port: SO_REUSEPORT, the kernel spreads connections over them) and N generators, each
# with its own source address and its share of the connections; it says which mode it chose and
# why. The generators wait after their ramp (--start_on_sigusr1) until every one has ramped, so
# all CONNS connections are held at the same moment, then start their traffic together; the
# latency percentiles of the total come from their merged histograms.
#
#   scripts/showcase.sh [build-dir]      env: CONNS, DURATION (s), WORKERS, MSG_SIZE, PROCS
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
conns=${CONNS:-100000}
duration=${DURATION:-10}
size=${MSG_SIZE:-64}
server_bin=$build/examples/echo_server
loadgen_bin=$build/tools/loadgen/weft-loadgen
for b in "$server_bin" "$loadgen_bin"; do
  [ -x "$b" ] || { echo "showcase: $b is missing (build the echo_server and weft-loadgen targets)" >&2; exit 1; }
done

hard=$(ulimit -Hn)
ncpu=$(nproc)
echo "showcase: $ncpu CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), fd hard limit $hard per process"
# Each process needs one fd per connection plus a few dozen of its own (epoll, eventfd, stdio,
# the listener). SO_REUSEPORT spreads by a hash, not evenly, so multi-process mode plans for 85%
# of what one process may hold.
reserve=64
if [ -n "${PROCS:-}" ]; then
  procs=$PROCS
  echo "showcase: mode: $procs process(es) per side (PROCS=$procs)"
elif [ "$hard" = unlimited ] || [ "$hard" -ge $((conns + reserve)) ]; then
  procs=1
  echo "showcase: mode: one server process holds all $conns connections (the fd limit allows it)"
else
  per=$(((hard - reserve) * 85 / 100))
  procs=$(((conns + per - 1) / per))
  echo "showcase: mode: $procs server processes sharing one port (SO_REUSEPORT) and $procs load"
  echo "          generators: $conns connections need $((conns + reserve)) fds, one process may"
  echo "          hold $hard (ulimit -Hn), so each side splits them, about $((conns / procs)) per process"
fi
# One worker per process when the processes outnumber the CPUs: more threads than cores only
# adds context switches.
if [ -n "${WORKERS:-}" ]; then
  workers=$WORKERS
elif [ "$procs" -gt 1 ]; then
  workers=1
else
  workers=0
fi
mem_kib=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
if [ "$mem_kib" -lt $((conns * 24)) ]; then
  echo "showcase: NOTE: $((mem_kib / 1024)) MiB available; $conns connections need roughly $((conns * 24 / 1024)) MiB (kernel socket buffers of both sides included)."
fi

log=$(mktemp -d)
server_pids=()
loadgen_pids=()
cleanup() {
  for p in "${server_pids[@]}" "${loadgen_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  rm -rf "$log"
}
trap cleanup EXIT

# Servers: the first picks a free port, the others join it.
listen=127.0.0.1:0
reuse=()
[ "$procs" -gt 1 ] && reuse=(--reuse_port)
declare -a baseline_rss
for ((k = 0; k < procs; k++)); do
  "$server_bin" --listen="$listen" --workers="$workers" --stats_every=500ms "${reuse[@]}" \
    >"$log/server.$k.out" 2>"$log/server.$k.err" &
  server_pids+=($!)
  for _ in $(seq 100); do
    grep -q '^listening on' "$log/server.$k.out" 2>/dev/null && break
    sleep 0.05
  done
  addr=$(sed -n 's/^listening on //p' "$log/server.$k.out")
  [ -n "$addr" ] || { echo "showcase: server $k did not start:"; cat "$log/server.$k.err"; exit 1; }
  listen=$addr
  baseline_rss[k]=$(awk '/^VmRSS/ {print $2 * 1024}' /proc/${server_pids[k]}/status)
done
echo "showcase: $procs echo server(s) (pids ${server_pids[*]}) listening on $addr, $workers worker(s) each (0: all CPUs)"

# Generators: disjoint source addresses (each 127.0.x.y pair gives ~28k ports toward one
# destination), an equal share of the connections each.
SECONDS=0
for ((k = 0; k < procs; k++)); do
  share=$((conns / procs + (k < conns % procs ? 1 : 0)))
  sources=$(((share + 19999) / 20000))
  "$loadgen_bin" --addr="$addr" --conns="$share" --duration="${duration}s" --hold=2s \
    --size="$size" --workers="$workers" --sources="$sources" --source_base=$((k * sources)) \
    --start_on_sigusr1 --histogram_out="$log/hist.$k" --progress=$([ "$procs" = 1 ] && echo true || echo false) \
    >"$log/loadgen.$k.out" 2>"$log/loadgen.$k.err" &
  loadgen_pids+=($!)
done
if [ "$procs" = 1 ]; then tail -f "$log/loadgen.0.err" --pid="${loadgen_pids[0]}" >&2 & fi

# The connections server k holds now: the conns= of its latest stats line (0 before the first).
server_conns() { { grep '^stats:' "$log/server.$1.out" 2>/dev/null || true; } | tail -1 | sed -n 's/.*conns=\([0-9]*\).*/\1/p'; }

# Wait until every generator has ramped (or ended early), printing the connections held.
last=""
while :; do
  ramped=0 held=0
  for ((k = 0; k < procs; k++)); do
    if grep -q '^RAMPED' "$log/loadgen.$k.out" 2>/dev/null || ! kill -0 "${loadgen_pids[k]}" 2>/dev/null; then
      ramped=$((ramped + 1))
    fi
    c=$(server_conns "$k")
    held=$((held + ${c:-0}))
  done
  if [ "$procs" -gt 1 ] && [ "$held" != "$last" ]; then
    printf 'showcase: %6d connections held by the servers, %d of %d generators ramped\n' "$held" "$ramped" "$procs"
    last=$held
  fi
  [ "$ramped" = "$procs" ] && break
  sleep 1
done
sleep 0.6  # one more stats line from every server, with every connection in
held_at_once=0
for ((k = 0; k < procs; k++)); do
  c=$(server_conns "$k")
  held_at_once=$((held_at_once + ${c:-0}))
done
echo "showcase: all generators ramped after $SECONDS s; the servers hold $held_at_once connections at once; starting traffic"
for p in "${loadgen_pids[@]}"; do kill -USR1 "$p" 2>/dev/null || true; done

loadgen_rc=0
for ((k = 0; k < procs; k++)); do
  wait "${loadgen_pids[k]}" || loadgen_rc=$?
done
if [ "$procs" = 1 ]; then grep -v '^RAMPED' "$log/loadgen.0.out" || true; fi
for p in "${server_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${server_pids[@]}"; do wait "$p" || true; done
server_pids=()

# Per process: the generator's LOADGEN line, and the server's busiest stats line (most
# connections held, and the RSS with them).
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
num() { local v; v=$(field "$1" "$2"); echo "${v:-0}"; }
tot_conns=0 tot_rps=0 tot_errors=0 tot_srv_conns=0 tot_srv_fibers=0 tot_growth=0 tot_rss=0
rows=()
for ((k = 0; k < procs; k++)); do
  lg=$(grep '^LOADGEN' "$log/loadgen.$k.out" || true)
  read -r pc pf pr < <({ grep '^stats:' "$log/server.$k.out" || true; } |
    sed 's/.*conns=\([0-9]*\).*fibers=\([0-9]*\).*rss_bytes=\([0-9]*\).*/\1 \2 \3/' |
    sort -n -k1,1 -k3,3 | tail -1)
  pc=${pc:-0} pf=${pf:-0} pr=${pr:-0}
  per=n/a
  [ "$pc" -gt 0 ] && per=$(((pr - baseline_rss[k]) / pc))
  tot_conns=$((tot_conns + $(num conns "$lg")))
  tot_rps=$((tot_rps + $(num rps "$lg")))
  tot_errors=$((tot_errors + $(num errors "$lg")))
  tot_srv_conns=$((tot_srv_conns + pc))
  tot_srv_fibers=$((tot_srv_fibers + pf))
  tot_growth=$((tot_growth + pr - baseline_rss[k]))
  tot_rss=$((tot_rss + pr))
  rows+=("$(printf '%-4s %7s %9s %10s %10s %10s %7s %8s %9s' "$k" "$(field conns "$lg")" \
    "$(field rps "$lg")" "$(field p50_us "$lg")" "$(field p99_us "$lg")" "$(field p999_us "$lg")" \
    "$(field errors "$lg")" "$pc" "$per")")
done
# Percentiles of all requests: merge the histograms (bucket midpoints, ~3% precision).
read -r p50 p99 p999 < <(cat "$log"/hist.* 2>/dev/null | sort -n -k1,1 | awk '
  { v[NR] = $1; c[NR] = $2; total += $2 }
  END {
    if (total == 0) { print "n/a n/a n/a"; exit }
    split("0.5 0.99 0.999", qs, " ")
    out = ""
    for (j = 1; j <= 3; j++) {
      rank = int(qs[j] * total); if (rank >= total) rank = total - 1
      seen = 0
      for (i = 1; i <= NR; i++) { seen += c[i]; if (seen > rank) break }
      out = out sprintf("%.1f ", v[i] / 1000)
    }
    print out
  }')
per_conn=n/a
[ "$tot_srv_conns" -gt 0 ] && per_conn=$((tot_growth / tot_srv_conns))

echo
echo "================ weft showcase: echo server under load ================"
printf "%-34s %s\n" "mode" "$([ "$procs" = 1 ] && echo "one server process, one generator" || echo "$procs server processes on one port (SO_REUSEPORT), $procs generators")"
printf "%-34s %s of %s requested, all at once: %s\n" "connections held" "$tot_conns" "$conns" "$held_at_once"
printf "%-34s %s req/s (%s-byte messages, %s s, closed loop)\n" "throughput" "$tot_rps" "$size" "$duration"
printf "%-34s p50 %s us, p99 %s us, p99.9 %s us\n" "latency" "$p50" "$p99" "$p999"
printf "%-34s %s\n" "errors" "$tot_errors"
printf "%-34s %s connections, %s fibers alive, RSS %s MiB\n" "servers at peak" "$tot_srv_conns" "$tot_srv_fibers" "$((tot_rss / 1048576))"
printf "%-34s %s bytes per connection (fiber, stack pages, buffers; kernel socket memory not included)\n" "server RSS per connection" "$per_conn"
if [ "$procs" -gt 1 ]; then
  echo "per process (generator k drives the port; server k is whichever the kernel's hash picked):"
  printf '  %-4s %7s %9s %10s %10s %10s %7s %8s %9s\n' proc conns req/s p50_us p99_us p99.9_us errors srv_conn rss/conn
  for r in "${rows[@]}"; do echo "  $r"; done
else
  echo "server weft::stats() at peak (field meanings: docs/api.md, section Stats and stats()):"
  read -r pc _ < <({ grep '^stats:' "$log/server.0.out" || true; } | sed 's/.*conns=\([0-9]*\).*/\1/' | sort -n | tail -1)
  grep '^stats:' "$log/server.0.out" | awk -v c="$pc" '$2 == "conns="c' | tail -1 |
    sed 's/^stats: //' | tr ' ' '\n' | grep -v -E '^(conns|accepted|rss_bytes)=' | paste -sd' ' |
    fold -s -w 72 | sed 's/^/  /'
fi
echo "========================================================================"
# Idle connections, hibernation on and off: one server, IDLE_CONNS connections (default 10000,
# within one process's fd limit) that send one message and then sit idle; the server's RSS growth
# per connection is read after they were idle 3 s (past Options::hibernate_after, 1 s).
idle_rss() {
  local hib=$1 n=$2 srv lg base fds rss
  WEFT_HIBERNATE_AFTER=$hib "$server_bin" --listen=127.0.0.1:0 --workers="$workers" \
    >"$log/idle.out" 2>"$log/idle.err" &
  srv=$!
  server_pids+=("$srv")
  for _ in $(seq 100); do grep -q '^listening on' "$log/idle.out" 2>/dev/null && break; sleep 0.05; done
  local iaddr
  iaddr=$(sed -n 's/^listening on //p' "$log/idle.out")
  sleep 0.1
  base=$(awk '/^VmRSS/ {print $2 * 1024}' "/proc/$srv/status")
  local fds0
  fds0=$(ls "/proc/$srv/fd" | wc -l)
  "$loadgen_bin" --addr="$iaddr" --conns="$n" --duration=0.5s --active=1 --hold=8s \
    --size="$size" --workers="$workers" --progress=false >"$log/idle.lg" 2>&1 &
  lg=$!
  for _ in $(seq 300); do
    fds=$(($(ls "/proc/$srv/fd" | wc -l) - fds0))
    [ "$fds" -ge "$n" ] && break
    sleep 0.05
  done
  sleep 3.5  # the traffic ends and the connections sit idle 3 s
  rss=$(awk '/^VmRSS/ {print $2 * 1024}' "/proc/$srv/status")
  wait "$lg" || true
  kill -TERM "$srv" 2>/dev/null || true
  wait "$srv" || true
  server_pids=("${server_pids[@]/$srv}")
  echo $(((rss - base) / (fds > 0 ? fds : 1))) "$fds"
}
idle_n=${IDLE_CONNS:-10000}
[ "$hard" != unlimited ] && [ "$idle_n" -gt $((hard - reserve)) ] && idle_n=$((hard - reserve))
read -r idle_on idle_on_n < <(idle_rss 1000 "$idle_n")
read -r idle_off idle_off_n < <(idle_rss 0 "$idle_n")
echo "================ idle connections: stack hibernation =================="
printf "%-34s %s bytes per connection (%s connections idle 3 s)\n" "hibernation on (default, 1 s)" "$idle_on" "$idle_on_n"
printf "%-34s %s bytes per connection (%s connections idle 3 s)\n" "hibernation off" "$idle_off" "$idle_off_n"
echo "(server RSS growth per connection; kernel socket memory not included)"
echo "========================================================================"
if [ "$tot_conns" != "$conns" ]; then
  echo "(held fewer than requested: see the generators' messages: fd limit or memory)"
  for ((k = 0; k < procs; k++)); do grep -h 'loadgen:' "$log/loadgen.$k.err" | grep -v -E 'established|holding' | head -3; done
fi
exit "$loadgen_rc"
