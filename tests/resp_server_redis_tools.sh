#!/usr/bin/env bash
# resp_server against the real Redis tools (Debian's redis-tools):
#   1. redis-cli runs every supported command and the replies are checked;
#   2. redis-benchmark -t ping,set,get,incr,mset -n 100000 -c 50, with -P 1 and with -P 16;
#      any error output, a non-zero exit or a missing result line fails the test, and the INCR
#      counter must come out exactly at 100000 after each run;
#   3. the server must still be alive, have said nothing on stderr, and stop cleanly on SIGTERM.
# Usage: resp_server_redis_tools.sh path/to/resp_server
# Exit 77 (CTest SKIP_RETURN_CODE) when redis-cli or redis-benchmark is not installed.
set -euo pipefail
server=${1:?usage: $0 path/to/resp_server}
for tool in redis-cli redis-benchmark; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool not found (apt-get install redis-tools; scripts/install-deps.sh does)"
    exit 77
  fi
done
requests=${RESP_BENCH_REQUESTS:-100000}

tmp=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- server stdout:"; cat "$tmp/out" || true
  echo "--- server stderr:"; cat "$tmp/err" || true
  exit 1
}

# Created here: the background job opens them only once it runs, and the first sed below may
# come first (set -e would end the script on sed's "No such file").
: >"$tmp/out"
: >"$tmp/err"
"$server" --listen=127.0.0.1:0 >"$tmp/out" 2>"$tmp/err" &
pid=$!
port=
for _ in $(seq 1 200); do
  port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/out")
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || fail "server exited before listening"
  sleep 0.05
done
[ -n "$port" ] || fail "no 'listening on' line within 10 s"
echo "resp_server listening on 127.0.0.1:$port"

cli() { timeout 30 redis-cli --no-raw -h 127.0.0.1 -p "$port" "$@" 2>&1; }
checks=0
expect() {  # expect WANT COMMAND...
  local want=$1 got
  shift
  got=$(cli "$@") || fail "redis-cli $* exited non-zero: $got"
  [ "$got" = "$want" ] || fail "redis-cli $*: want $(printf %q "$want"), got $(printf %q "$got")"
  checks=$((checks + 1))
}
expect_sorted() {  # expect_sorted WANT COMMAND...: compares sorted lines (KEYS order is free)
  local want=$1 got
  shift
  got=$(cli "$@" | sed 's/^ *[0-9]*) //; s/^"\(.*\)"$/\1/' | sort) || fail "redis-cli $* failed"
  want=$(printf '%s\n' "$want" | sort)
  [ "$got" = "$want" ] || fail "redis-cli $*: want $(printf %q "$want"), got $(printf %q "$got")"
  checks=$((checks + 1))
}
expect_range() {  # expect_range LO HI COMMAND...: an (integer) reply within [LO, HI]
  local lo=$1 hi=$2 got n
  shift 2
  got=$(cli "$@")
  n=${got#(integer) }
  [[ "$n" =~ ^-?[0-9]+$ ]] && ((n >= lo && n <= hi)) || fail "redis-cli $*: want $lo..$hi, got $got"
  checks=$((checks + 1))
}

expect 'PONG' PING
expect '"hello world"' ECHO "hello world"
expect 'OK' SET foo bar
expect '"bar"' GET foo
expect '(nil)' GET missing
expect '(integer) 2' EXISTS foo missing foo
expect '(integer) 1' DEL foo missing
expect '(integer) 0' EXISTS foo
expect '(integer) 1' INCR counter
expect '(integer) 2' INCR counter
expect 'OK' SET notanumber abc
expect '(error) ERR value is not an integer or out of range' INCR notanumber
expect 'OK' MSET a 1 b 2 c 3
expect $'1) "1"\n2) "2"\n3) (nil)\n4) "3"' MGET a b nope c
expect '(error) ERR wrong number of arguments for '"'"'mset'"'"' command' MSET a 1 b
expect '(integer) -1' TTL a
expect '(integer) -2' TTL nope
expect '(integer) 1' EXPIRE a 100
expect_range 99 100 TTL a
expect '(integer) 0' EXPIRE nope 100
expect 'OK' SET ex v EX 100
expect_range 99 100 TTL ex
expect 'OK' SET px v PX 300
expect_range 1 300 PTTL px
sleep 0.5
expect '(nil)' GET px
expect '(integer) -2' TTL px
expect 'OK' SET nx 1 NX
expect '(nil)' SET nx 2 NX
expect '"1"' GET nx
expect 'OK' FLUSHALL
expect '(integer) 0' DBSIZE
expect '(empty array)' KEYS '*'
expect 'OK' MSET hello 1 hallo 2 hxllo 3 hllo 4 heeeello 5 other 6
expect_sorted $'hallo\nhello\nhxllo' KEYS 'h?llo'
expect_sorted $'hallo\nheeeello\nhello\nhllo\nhxllo' KEYS 'h*llo'
expect_sorted $'hallo\nhello' KEYS 'h[ae]llo'
expect_sorted $'hallo\nhxllo' KEYS 'h[^e]llo'
expect_sorted $'hallo\nheeeello\nhello\nhllo\nhxllo\nother' KEYS '*'
expect '(integer) 6' DBSIZE
expect 'OK' FLUSHALL
expect '(integer) 0' DBSIZE
expect 'OK' SELECT 0
expect $'1) "save"\n2) ""' CONFIG GET save
expect "(error) ERR unknown command 'NOSUCH', with args beginning with: 'x' " NOSUCH x
# Inline commands, as telnet or nc send them, pipelined in one write; QUIT closes.
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'PING\r\nSET inline "a b"\r\nGET inline\nQUIT\r\n' >&3
got=$(timeout 10 cat <&3 | od -An -c | tr -s ' \n' ' ')
exec 3<&-
want=$(printf '+PONG\r\n+OK\r\n$3\r\na b\r\n+OK\r\n' | od -An -c | tr -s ' \n' ' ')
[ "$got" = "$want" ] || fail "inline commands: want [$want], got [$got]"
expect '"a b"' GET inline
expect 'OK' FLUSHALL
echo "redis-cli: $checks checks passed"

bench() {  # bench PIPELINE
  local p=$1 log=$tmp/bench-P$1 t0 line name counter
  t0=$(date +%s%N)
  if ! timeout 600 redis-benchmark -h 127.0.0.1 -p "$port" -t ping,set,get,incr,mset \
      -n "$requests" -c 50 -P "$p" -q >"$log" 2>&1; then
    tr '\r' '\n' <"$log" | tail -20
    fail "redis-benchmark -P $p exited non-zero"
  fi
  # -q prints progress lines ending in \r and one result line per test.
  tr '\r' '\n' <"$log" | grep -v '^ *$' | grep -v 'rps=' >"$log.results" || true
  if grep -Eiq 'error|warning|unexpected|fail' "$log.results"; then
    cat "$log.results"
    fail "redis-benchmark -P $p reported errors"
  fi
  for name in PING_INLINE PING_MBULK SET GET INCR 'MSET \(10 keys\)'; do
    line=$(grep -E "^$name: [0-9.]+ requests per second" "$log.results") ||
      { cat "$log.results"; fail "redis-benchmark -P $p: no result line for $name"; }
    echo "  -P $p  $line"
  done
  echo "  -P $p took $((($(date +%s%N) - t0) / 1000000)) ms"
  # redis-benchmark's INCR hits one key, "counter:__rand_int__", once per request (with -P, the
  # pipelines in flight when it reaches -n are still sent: up to 50 x P more).
  counter=$(cli GET 'counter:__rand_int__' | tr -d '"')
  [[ "$counter" =~ ^[0-9]+$ ]] && ((counter >= requests && counter <= requests + 50 * p)) ||
    fail "after -P $p: counter:__rand_int__ is $counter, want $requests..$((requests + 50 * p))"
  echo "  -P $p INCR counter: $counter"
  expect 'OK' FLUSHALL
}
echo "redis-benchmark -t ping,set,get,incr,mset -n $requests -c 50:"
bench 1
bench 16

kill -0 "$pid" 2>/dev/null || fail "server died"
# Anything on stderr fails (a sanitizer report, an accept error), except the runtime watchdog's
# notes, which a loaded machine or a sanitizer build can trigger.
if grep -v '^weft: watchdog: ' "$tmp/err" | grep -q .; then fail "server wrote to stderr"; fi
notes=$(grep -c '^weft: watchdog: ' "$tmp/err" || true)
[ "$notes" -eq 0 ] || echo "note: $notes watchdog line(s) from the server (load or sanitizer)"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" -eq 0 ] || fail "server exited with $rc after SIGTERM"
grep -q 'shutting down' "$tmp/out" || fail "no shutdown message"
echo "PASS: resp_server with redis-cli ($checks checks) and redis-benchmark (-P 1, -P 16)"
