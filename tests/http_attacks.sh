#!/usr/bin/env bash
# Replays the attacks on the two HTTP listeners against a real charterd --http (its open file
# limit at 512, as a small deployment has) and a real charter-mcp --http, and prints what each
# did to the process: memory (VmRSS now, VmHWM its peak, from /proc/PID/status) and open
# descriptors (/proc/PID/fd) before and after, and the answers the attacker got. It prints
# figures; it asserts nothing and is no CTest entry. The attacks (tests/http_attacks.mjs):
#   - 100 connections at once, each sending an 8 MB body without a token (then chunked);
#   - 2000 connections each holding a partial request head, one byte a second, for 15 s, while
#     `charter health` is asked over NNG (the listener the HTTP connections must not starve);
#   - HTTP/2 (gRPC): 200 connections of 32 calls each whose message never completes, held 12 s,
#     while `charter health` over NNG and /healthz over HTTP/1.1 are asked; then 100 connections
#     each opening and resetting 100 streams (the "rapid reset" flood);
#   - charter-mcp: 100 bodies of 4 MB without a credential, one credential initializing 70
#     sessions (then whether a second credential still gets one), 200 partial heads held 15 s.
# Only options every version has are used, so the same script measures an older build.
# Usage: tests/http_attacks.sh [BUILD_DIR]   (default: build; needs redis-server, node)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
for tool in redis-server redis-cli node; do
  command -v "$tool" >/dev/null || { echo "http_attacks.sh: $tool is missing" >&2; exit 1; }
done
attack=$src/tests/http_attacks.mjs
tmp=$(mktemp -d -t charter-attacks.XXXXXX)
chmod 700 "$tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# The attacker holds thousands of sockets; the servers get their own limits below.
ulimit -n "$(ulimit -Hn)"

free_port() {
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}
mem() { awk '/^VmRSS/ {r=$2} /^VmHWM/ {h=$2} END {printf "VmRSS %d MB, VmHWM %d MB", r/1024, h/1024}' "/proc/$1/status"; }
fds() { ls "/proc/$1/fd" | wc -l; }
say() { printf '  %-34s %s\n' "$1" "$2"; }
health() {
  if timeout 15 "$build/charter" --url "ipc://$tmp/c.sock" --timeout-ms 5000 health >/dev/null 2>&1; then
    echo ok
  else
    echo FAILED
  fi
}
# Runs a slowloris of n connections held hold_s seconds against hostport; samples pid's
# descriptors when all are open and again after sample_s seconds (with `charter health` when
# check is "health"), then prints the attacker's counts.
slowloris() {
  local pid=$1 hostport=$2 n=$3 hold=$4 sample=$5 check=${6:-}
  node "$attack" slowloris "$hostport" "$n" "$hold" >"$tmp/slow.out" &
  local a=$!
  for _ in $(seq 300); do grep -q '"ready"' "$tmp/slow.out" 2>/dev/null && break; sleep 0.1; done
  say "fds with $n partial heads open" "$(fds "$pid")"
  [ "$check" = health ] && say "charter health over NNG then" "$(health)"
  sleep "$sample"
  say "fds ${sample}s later" "$(fds "$pid")"
  [ "$check" = health ] && say "charter health over NNG then" "$(health)"
  wait "$a"
  say "attacker" "$(tail -1 "$tmp/slow.out")"
  sleep 1
  say "fds after the attacker left" "$(fds "$pid")"
}

redis-server --port 0 --unixsocket "$tmp/redis.sock" --unixsocketperm 700 --dir "$tmp" \
  --save '' --appendonly no --logfile "$tmp/redis.log" --maxclients 4000 &
pids+=($!)
for _ in $(seq 100); do redis-cli -s "$tmp/redis.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done

token=attack-operator-token-$RANDOM$RANDOM$RANDOM
export CHARTER_OPERATOR_TOKEN=$token CHARTER_TOKEN=$token
hport=$(free_port)
(ulimit -n 512; exec "$build/charterd" --redis "unix://$tmp/redis.sock" --graph "attacks_$$" \
  --listen "ipc://$tmp/c.sock" --workers 2 --http "127.0.0.1:$hport" --no-integrity-key) \
  2>"$tmp/charterd.log" &
cpid=$!
pids+=($cpid)
for _ in $(seq 100); do [ "$(health)" = ok ] && break; sleep 0.2; done
echo "charterd --http 127.0.0.1:$hport (pid $cpid, open file limit 512, $build)"
grep -h "HTTP" "$tmp/charterd.log" | sed 's/^/  log: /' || true
say "at start" "$(fds $cpid) fds, $(mem $cpid)"
say "100 x 8 MB bodies, no token" "$(node "$attack" bodies "127.0.0.1:$hport" /charter.v1.Runs/ListRuns 100 8000000)"
say "then" "$(fds $cpid) fds, $(mem $cpid)"
say "100 x 8 MB chunked, no token" "$(node "$attack" bodies "127.0.0.1:$hport" /charter.v1.Runs/ListRuns 100 8000000 chunked)"
say "then" "$(fds $cpid) fds, $(mem $cpid)"
slowloris "$cpid" "127.0.0.1:$hport" 2000 15 12 health
say "/healthz after" "$(curl -s -m 10 "http://127.0.0.1:$hport/healthz" || echo none)"
node "$attack" h2streams "127.0.0.1:$hport" "$token" 200 32 12 >"$tmp/h2.out" &
h2=$!
sleep 6
say "HTTP/2: 200 x 32 stalled calls" "$(fds $cpid) fds, $(mem $cpid)"
say "charter health over NNG then" "$(health)"
say "/healthz over HTTP/1.1 then" "$(curl -s -m 10 "http://127.0.0.1:$hport/healthz" || echo none)"
wait "$h2"
say "attacker" "$(tail -1 "$tmp/h2.out")"
say "HTTP/2: 100 x 100 reset streams" "$(node "$attack" h2reset "127.0.0.1:$hport" 100 100)"
sleep 1
say "then" "$(fds $cpid) fds, $(mem $cpid)"
say "at the end" "$(fds $cpid) fds, $(mem $cpid)"

mport=$(free_port)
printf 'attack-credential-a-0123456789\nattack-credential-b-0123456789\n' >"$tmp/creds"
CHARTER_URL="ipc://$tmp/c.sock" "$build/charter-mcp" --role research \
  --workflow "$src/deploy/workflows/procurement.json" --http "127.0.0.1:$mport" \
  --http-token-file "$tmp/creds" 2>"$tmp/mcp.log" &
mpid=$!
pids+=($mpid)
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$mport") 2>/dev/null && break; sleep 0.1; done
echo
echo "charter-mcp --http 127.0.0.1:$mport (pid $mpid)"
say "at start" "$(fds $mpid) fds, $(mem $mpid)"
say "100 x 4 MB bodies, no credential" "$(node "$attack" bodies "127.0.0.1:$mport" /mcp 100 4000000)"
say "then" "$(fds $mpid) fds, $(mem $mpid)"
say "credential a: 70 x initialize" "$(node "$attack" sessions "127.0.0.1:$mport" attack-credential-a-0123456789 70)"
say "credential b: 1 x initialize" "$(node "$attack" sessions "127.0.0.1:$mport" attack-credential-b-0123456789 1)"
slowloris "$mpid" "127.0.0.1:$mport" 200 15 12
say "at the end" "$(fds $mpid) fds, $(mem $mpid)"
