#!/usr/bin/env bash
# charter-bench end to end on the test Redis, every workload with a few operations, so each one
# and each figure the report promises stays working: the invariant checks pass (exit 0), --json
# carries the figures (per operation, the three ceilings and the ratios to them, a median over
# --repeat), check-input reports its lineage and its second depth, and a lineage cut short by
# --lineage-budget is said to be unfinished (a FAIL line, exit 1), a SIGTERM to the whole
# process group stops the echo ceilings as interrupted (130), not failed, an echo server that
# dies is a FAIL line of its own, and --echo-server refuses arguments it cannot serve by. It asserts nothing about speed: the figures must be
# there, not be any size.
# Usage: tests/bench_smoke.sh SOURCE_DIR BUILD_DIR   (CHARTER_TEST_REDIS names the Redis)
set -uo pipefail
build=${2:?usage: bench_smoke.sh SOURCE_DIR BUILD_DIR}
bench=$build/charter-bench
redis=${CHARTER_TEST_REDIS:?CHARTER_TEST_REDIS is not set (run through ctest)}
[ -x "$bench" ] || { echo "bench_smoke: no charter-bench at $bench" >&2; exit 2; }
out=$(mktemp -d -t bench-smoke.XXXXXX)
trap 'rm -rf "$out"' EXIT
fails=0
ran=0
asserted=0

# run NAME EXPECTED_EXIT ARGS...: charter-bench --json ARGS into $out/NAME.json.
run() {
  local name=$1 want=$2
  shift 2
  ran=$((ran + 1))
  "$bench" --redis "$redis" --json "$@" >"$out/$name.json" 2>"$out/$name.err"
  local rc=$?
  asserted=$((asserted + 1))
  if [ "$rc" -ne "$want" ]; then
    echo "bench_smoke: FAIL $name: exit $rc, expected $want: charter-bench $*"
    tail -n 20 "$out/$name.err"
    fails=$((fails + 1))
    return 1
  fi
}

# expect NAME PERL: the Perl expression (over $j, the decoded report) holds for $out/NAME.json.
expect() {
  local name=$1 what=$2
  asserted=$((asserted + 1))
  if ! perl -MJSON::PP -e '
      local $/; open my $f, "<", $ARGV[0] or die; my $j = decode_json(<$f>);
      my $ok = eval $ARGV[1]; die $@ if $@; exit($ok ? 0 : 1)' "$out/$name.json" "$what"; then
    echo "bench_smoke: FAIL $name: $what"
    fails=$((fails + 1))
  fi
}

checks_pass='@{$j->{checks}} > 0 && !grep { !$_->{pass} } @{$j->{checks}}'
figure() { echo "defined \$j->{figures}{$1}{median}"; }

if run deliver 0 --workload deliver --threads 4 --runs 2 --count 40 --repeat 2 \
  --ceiling-duration 0.2; then
  expect deliver "$checks_pass"
  expect deliver '@{$j->{figures}{ops_per_s}{each}} == 2 && $j->{runs_done} == 2'
  for f in db_calls_per_op inner_commands_per_op redis_us_per_op redis_bytes_per_op \
    charterd_cpu_us_per_op noop_fcall_per_s echo_per_s echo_fcall_per_s ratio_to_noop_fcall \
    ratio_to_echo ratio_to_echo_fcall; do
    expect deliver "$(figure $f)"
  done
  expect deliver 'keys %{$j->{inner_commands_per_op}} > 0 && $j->{command} =~ /--repeat 2/'
fi
if run deliver_same 0 --workload deliver-same --threads 4 --rounds 3 --repeat 2 --no-ceiling; then
  expect deliver_same "$checks_pass"
  expect deliver_same '(grep { $_->{name} eq "exactly one delivery per round" &&
                               $_->{detail} =~ /^6 committed/ } @{$j->{checks}}) == 1'
fi
if run check_input 0 --workload check-input --depth 30 --compare-depth 5 --threads 2 --count 10 \
  --no-ceiling; then
  expect check_input "$checks_pass"
  expect check_input '$j->{lineage}{finished} && $j->{lineage}{reached} == 30'
  expect check_input 'defined $j->{lineage}{last_ms_per_output} &&
                      defined $j->{lineage}{db_calls_per_output}'
  expect check_input "$(figure compare_p50_ms) && $(figure p50_ratio_to_compare_depth)"
fi
if run lineage_cut 1 --workload check-input --depth 5000 --lineage-budget 0.001 --threads 1 \
  --count 1 --no-ceiling; then
  expect lineage_cut '!$j->{lineage}{finished} && $j->{lineage}{reached} < 5000'
  expect lineage_cut '$j->{lineage}{why} =~ /lineage-budget/ && $j->{runs_done} == 0'
  expect lineage_cut '(grep { !$_->{pass} && $_->{name} =~ /lineage/ } @{$j->{checks}}) == 1'
fi
if run health 0 --workload health --threads 4 --count 50 --ceiling-duration 0.2; then
  expect health "$(figure ratio_to_echo) && $(figure ratio_to_echo_fcall)"
fi
for w in echo echo-fcall; do
  if run "$w" 0 --workload "$w" --threads 4 --count 200 --no-ceiling; then
    expect "$w" "$checks_pass"
    expect "$w" '$j->{answered} == 200'
  fi
done
if run echo_fcall_calls 0 --workload echo-fcall --threads 2 --count 100 --no-ceiling; then
  expect echo_fcall_calls "$(figure db_calls_per_op)"
fi

# A SIGTERM to the whole process group (timeout(1), a service manager) while the echo server
# process serves the load: the bench stops as interrupted (130), the echo server still reports
# its count (no check fails for it) and no process of the group is left.
# echo_load NAME LAUNCHER ARGS...: LAUNCHER (setsid, or env for none) charter-bench --json
# --workload ARGS --threads 2 --duration 60 --no-ceiling in the background into $out/NAME.*,
# and waits until it says on stderr that its echo server is ready (serving, its signals set:
# a signal sent before would test the server's start, not a stop under load). Sets load_pid
# and load_child; returns 1 (a FAIL counted, the bench killed) when no server said so within
# 20 s or the bench ended first.
echo_load() {
  local name=$1 launcher=$2
  shift 2
  ran=$((ran + 1))
  asserted=$((asserted + 1))
  "$launcher" "$bench" --redis "$redis" --json --workload "$@" --threads 2 --duration 60 \
    --no-ceiling >"$out/$name.json" 2>"$out/$name.err" &
  load_pid=$! load_child=
  for _ in $(seq 200); do
    load_child=$(sed -n 's/^charter-bench: echo server \([0-9]*\) ready on .*/\1/p' \
      "$out/$name.err" | head -n 1)
    [ -n "$load_child" ] && return 0
    kill -0 "$load_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench_smoke: FAIL $name: no echo server said it was ready"
  kill -KILL "$load_pid" 2>/dev/null
  wait "$load_pid"
  fails=$((fails + 1))
  return 1
}

# exit_is NAME RC WANT WHY: a FAIL (with the bench's last lines) unless RC is WANT.
exit_is() {
  if [ "$2" -ne "$3" ]; then
    echo "bench_smoke: FAIL $1: exit $2, expected $3 ($4)"
    tail -n 5 "$out/$1.err"
    fails=$((fails + 1))
  fi
}

interrupted_by_group() {
  local name=group_term_$1
  echo_load "$name" setsid "$1" || return
  kill -TERM -- "-$(ps -o pgid= -p "$load_pid" | tr -d ' ')"
  wait "$load_pid"
  exit_is "$name" $? 130 "interrupted, every check passed"
  expect "$name" "$checks_pass"
  asserted=$((asserted + 1))
  if kill -0 "$load_child" 2>/dev/null; then
    echo "bench_smoke: FAIL $name: the echo server process $load_child was left running"
    kill -KILL "$load_child"
    fails=$((fails + 1))
  fi
}
interrupted_by_group echo
interrupted_by_group echo-fcall

# An echo server process that dies under the load: the report says its ceiling is suspect
# (a FAIL line naming the server, exit 1), and does not count the death as an FCALL.
echo_server_killed() {
  local name=echo_killed
  echo_load "$name" env echo --timeout-ms 2000 || return
  kill -KILL "$load_child"
  kill -INT "$load_pid"
  wait "$load_pid"
  exit_is "$name" $? 1 "a FAIL line"
  expect "$name" 'grep { !$_->{pass} && $_->{name} =~ /echo server process ran until/ } @{$j->{checks}}'
  expect "$name" '!grep { $_->{name} =~ /FCALL/ } @{$j->{checks}}'
}
echo_server_killed

# charter-bench --echo-server refuses arguments it cannot serve by (exit 2, one "error" line)
# instead of serving something else: counts are digits, echo-fcall needs a worker, and the
# Redis URL is one it can open.
echo_server_refuses() {
  ran=$((ran + 1))
  asserted=$((asserted + 1))
  local said rc
  said=$("$bench" --echo-server "ipc://$out/refused.sock" "$@" </dev/null)
  rc=$?
  if [ "$rc" -ne 2 ] || [ "${said#error }" = "$said" ]; then
    echo "bench_smoke: FAIL --echo-server $*: exit $rc, said \"$said\" (expected exit 2 and an error line)"
    fails=$((fails + 1))
  fi
}
echo_server_refuses 0 1
echo_server_refuses 1 ""
echo_server_refuses " 4" 1
echo_server_refuses 4 +1
echo_server_refuses 4 0 "$redis"
echo_server_refuses 4 1 ab
echo_server_refuses 4 1 unix://

# The echo without --redis reads no Redis, and --no-ceiling measures no ceiling: the report
# claims neither (no used_memory line or key, no "then the ceilings" in the figures' heading).
echo_without_redis() {
  local name=echo_no_redis rc
  ran=$((ran + 2))
  asserted=$((asserted + 1))
  "$bench" --workload echo --threads 2 --count 100 --no-ceiling >"$out/$name.txt" \
    2>"$out/$name.err"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "bench_smoke: FAIL $name: exit $rc, expected 0"
    tail -n 5 "$out/$name.err"
    fails=$((fails + 1))
  fi
  for line in '^redis memory' 'then the ceilings'; do
    asserted=$((asserted + 1))
    if grep -q -- "$line" "$out/$name.txt"; then
      echo "bench_smoke: FAIL $name: the report says \"$(grep -- "$line" "$out/$name.txt")\""
      fails=$((fails + 1))
    fi
  done
  "$bench" --json --workload echo --threads 2 --count 100 --no-ceiling >"$out/$name.json" \
    2>>"$out/$name.err"
  expect "$name" '!exists $j->{redis_used_memory} && $j->{answered} == 100'
}
echo_without_redis

echo "bench_smoke: $ran runs of charter-bench"
echo "$((asserted - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
