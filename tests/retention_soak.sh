#!/usr/bin/env bash
# A soak benchmark of retention, not a timed test: it asserts nothing about speed or memory and
# is not a CTest entry. On a private Redis it starts one charterd with a short --retention and
# drives deliveries for several minutes in rounds: each round is one charter-bench run of the
# deliver workload on fresh runs (whose invariants charter-bench checks and prints PASS/FAIL,
# exiting 1 on a FAIL), after which those runs are cancelled, so they end and become due. Every
# INTERVAL seconds it prints Redis's used_memory, the deliveries committed so far, the runs
# archived (charterd's /metrics), the compact invocation records Redis keeps and the archive
# folder's size: after the first retention period plus the invocation window the memory should
# stay flat while the archives grow. At the end every archive is audited offline (charter audit
# --archive) and the figures are summed up.
#
# Usage: tests/retention_soak.sh [--build DIR] [--rounds N] [--round-seconds S]
#                                [--retention DURATION] [--invocation-window DURATION]
#                                [--threads N] [--interval S]
# Defaults: build ./build, 10 rounds of 25 s, --retention 20s, charterd's default invocation
# window (7d), 8 threads, memory every 10 s.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build rounds=10 round_s=25 retention=20s window= threads=8 interval=10
while [ $# -gt 0 ]; do
  case $1 in
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  --invocation-window) window=$2 ;;
  --build) build=$2 ;;
  --rounds) rounds=$2 ;;
  --round-seconds) round_s=$2 ;;
  --retention) retention=$2 ;;
  --threads) threads=$2 ;;
  --interval) interval=$2 ;;
  *) echo "retention_soak: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done

. "$root/deploy/private-redis.sh"
private_redis_start
sock=${CHARTER_TEST_REDIS#unix://}
work=$(mktemp -d /tmp/charter-soak.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
http=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export CHARTER_OPERATOR_TOKEN=soak-operator-token-$(openssl rand -hex 16)
export CHARTER_URL=tcp://127.0.0.1:$port
charterd_pid= printer_pid=

cleanup() {
  [ -n "$printer_pid" ] && kill "$printer_pid" 2>/dev/null || true
  [ -n "$charterd_pid" ] && kill "$charterd_pid" 2>/dev/null && wait "$charterd_pid" 2>/dev/null || true
  rm -rf "$work"
  private_redis_stop
}
trap cleanup EXIT

"$build/charterd" --redis "$CHARTER_TEST_REDIS" --graph soak --listen "$CHARTER_URL" \
  --http "127.0.0.1:$http" --data-dir "$work/data" --archive-dir "$work/archive" \
  --retention "$retention" ${window:+--invocation-window "$window"} --no-integrity-key \
  >"$work/charterd.log" 2>&1 &
charterd_pid=$!
for _ in $(seq 100); do "$build/charter" health >/dev/null 2>&1 && break; sleep 0.1; done

metric() { curl -s "http://127.0.0.1:$http/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
used() { redis-cli -s "$sock" info memory | awk -F: '/^used_memory:/ { print $2 }' | tr -d '\r'; }

start=$(date +%s)
(
  while :; do
    printf 'soak: t=%4ss used_memory=%-10s archived_runs=%-5s records_kept=%-8s archived_bytes=%-10s archive_dir=%s\n' \
      $(($(date +%s) - start)) "$(used)" "$(metric charter_archived_runs_total)" \
      "$(metric charter_archived_invocation_records)" "$(metric charter_archived_bytes_total)" \
      "$(du -sh "$work/archive" 2>/dev/null | cut -f1)"
    sleep "$interval"
  done
) &
printer_pid=$!

fails=0
for r in $(seq "$rounds"); do
  before=$("$build/charter" --json list --limit 1000 | python3 -c 'import json,sys; print(" ".join(sorted(x["id"] for x in json.load(sys.stdin).get("runs",[]))))')
  if ! "$build/charter-bench" --url "$CHARTER_URL" --workload deliver --threads "$threads" \
    --runs 4 --duration "$round_s" --no-ceiling >"$work/bench.log" 2>&1; then
    fails=$((fails + 1))
  fi
  grep -E '^(PASS|FAIL)' "$work/bench.log" | sed "s/^/soak: round $r: /"
  # Cancel the runs this round created: they end, and past the retention they are archived.
  for run in $("$build/charter" --json list --limit 1000 | python3 -c 'import json,sys; print(" ".join(x["id"] for x in json.load(sys.stdin).get("runs",[]) if x.get("status") in ("created","running")))'); do
    case " $before " in *" $run "*) ;; *) "$build/charter" cancel "$run" >/dev/null ;; esac
  done
done

# Let the last rounds' runs pass the retention period and be archived, and with a window their
# compact records expire (at most one and a half windows after the last archive).
seconds() {
  local n=${1%[smhd]}
  case $1 in *d) echo $((n * 86400)) ;; *h) echo $((n * 3600)) ;; *m) echo $((n * 60)) ;; *) echo "$n" ;; esac
}
secs=$(seconds "$retention") tail_s=0
case $window in ''|0|off|forever) ;; *) tail_s=$(($(seconds "$window") * 3 / 2)) ;; esac
sleep $((secs * 2 + tail_s + interval))
kill "$printer_pid" 2>/dev/null || true
printer_pid=
bad=0 files=0
while IFS= read -r f; do
  files=$((files + 1))
  "$build/charter" audit --archive "$f" >/dev/null || { bad=$((bad + 1)); echo "soak: NOT intact: $f"; }
done < <(find "$work/archive" -name '*.charter-archive')
"$build/charter" audit --archive "$work/archive/soak" | sed 's/^/soak: /' || bad=$((bad + 1))
echo "soak: $rounds rounds of ${round_s}s, retention $retention, invocation window" \
  "${window:-default}: rounds with a FAIL: $fails; archives: $files, audited offline and intact:" \
  "$((files - bad)); used_memory at the end: $(used); compact records kept:" \
  "$(metric charter_archived_invocation_records)"
grep 'retention pass' "$work/charterd.log" | tail -n 3 | sed 's/^/soak: /'
[ "$fails" -eq 0 ] && [ "$bad" -eq 0 ]
