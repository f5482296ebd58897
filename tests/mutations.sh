#!/usr/bin/env bash
# Mutation check: removes one policy or database check at a time from a copy of the source tree
# and requires one of the chosen suites to fail for each. A clean baseline must build and pass
# first. A mutation whose text no longer matches exactly once, a build failure or a baseline
# failure is an ERROR, never a caught mutation.
#
# Usage: tests/mutations.sh [SOURCE_DIR]   (default: this script's tree), with CHARTER_TEST_REDIS
# set as for every suite. Optional: CHARTER_MUTATION_SUITES (suites to run, in order),
# CHARTER_MUTATION_ONLY (comma list of mutation names), CHARTER_MUTATION_SUITE_TIMEOUT (seconds,
# default 240), CHARTER_MUTATION_KEEP=1 (keep the copy and its logs).
# Exit status: 0 every mutation caught; 1 a mutation SURVIVED or was an ERROR; 2 the copy, the
# build or the baseline failed.
set -uo pipefail

started=$(date +%s)
src=$(cd "${1:-$(dirname "$0")/..}" && pwd) || { echo "mutations: no source tree at ${1:-}" >&2; exit 2; }
if [ -z "${CHARTER_TEST_REDIS:-}" ]; then
  echo "mutations: CHARTER_TEST_REDIS is not set (run it through CTest, which starts the test" \
    "Redis: ctest --test-dir build -R mutations; or start redis-server on a unix socket and" \
    "export CHARTER_TEST_REDIS=unix:///path/redis.sock)" >&2
  exit 2
fi
jobs=$(nproc 2>/dev/null || echo 2)
suite_timeout=${CHARTER_MUTATION_SUITE_TIMEOUT:-240}

work=$(mktemp -d -t charter-mutations.XXXXXX) || exit 2
chmod 700 "$work"
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  if [ "${CHARTER_MUTATION_KEEP:-0}" = 1 ]; then
    echo "mutations: kept $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
copy=$work/src
build=$work/build
logs=$work/logs
mkdir -p "$copy" "$build" "$logs" "$work/orig"

elapsed() { echo $(($(date +%s) - $1)); }
# A line for the log and, when CHARTER_TEST_PROGRESS names a file (deploy/test.sh shows it as it
# grows), for the person waiting: CTest prints a test's output only once it ends.
progress() {
  echo "$*"
  if [ -n "${CHARTER_TEST_PROGRESS:-}" ]; then echo "  $*" >>"$CHARTER_TEST_PROGRESS" || true; fi
}
fatal() {
  echo "mutations: ERROR: $*" >&2
  echo "mutations: ERROR after $(elapsed "$started") s" >&2
  exit 2
}
show_log() { echo "----- $1 (last 40 lines)" >&2; tail -n 40 "$1" >&2; echo "-----" >&2; }

# --- the mutations: name, the suite to try first, file, the exact text, its replacement ("\n" is
# a newline) ---------------------------------------------------------------------------------
# Each names the suite expected to catch it: that suite is built and run first, and only when
# it passes are the others built and run, in order. A wrong guess costs time, never a verdict.
names=() firsts=() files=() froms=() tos=()
mutation() { names+=("$1"); firsts+=("$2"); files+=("$3"); froms+=("$4"); tos+=("$5"); }

mutation "clearance (guard)" test_guard server/policy/guard.c \
  'if (at != NO_INDEX && flag_begin(&v, GUARD_CLEARANCE_EXCEEDED, &b)) {' \
  'if (0 && at != NO_INDEX && flag_begin(&v, GUARD_CLEARANCE_EXCEEDED, &b)) {'
mutation "input scope (guard)" test_guard server/policy/guard.c \
  'if (at != NO_INDEX && flag_begin(&v, GUARD_INPUT_OUT_OF_SCOPE, &b)) {' \
  'if (0 && at != NO_INDEX && flag_begin(&v, GUARD_INPUT_OUT_OF_SCOPE, &b)) {'
mutation "revocation (guard)" test_guard server/policy/guard.c \
  'if (g->revoked_at > 0 || g->revoked_at != g->revoked_at)' \
  'if (0 && (g->revoked_at > 0 || g->revoked_at != g->revoked_at))'
mutation "revocation (commit)" test_queries queries/delivery.lua \
  "if h.revoked_at and h.revoked_at ~= '' then" \
  "if false and h.revoked_at and h.revoked_at ~= '' then"
mutation "expiry (guard)" test_guard server/policy/guard.c \
  'if (!(now < g->valid_to))' \
  'if (0 && !(now < g->valid_to))'
mutation "expiry (commit)" test_queries queries/delivery.lua \
  'if not to or tnum >= to then' \
  'if not to then'
mutation "identity: grantee is the actor (guard)" test_guard server/policy/guard.c \
  'if (!mine && flag_begin(v, GUARD_IDENTITY_MISMATCH, &b)) {' \
  'if (0 && !mine && flag_begin(v, GUARD_IDENTITY_MISMATCH, &b)) {'
mutation "identity: context owner (guard)" test_guard server/policy/guard.c \
  'if (!owned && flag_begin(v, GUARD_IDENTITY_MISMATCH, &b)) {' \
  'if (0 && !owned && flag_begin(v, GUARD_IDENTITY_MISMATCH, &b)) {'
mutation "payload hash (commit)" test_queries queries/delivery.lua \
  'if payload.hash ~= payload_hash then' \
  'if false then'
mutation "payload bytes, content_sha1 (commit)" test_queries queries/delivery.lua \
  "if redis.sha1hex(payload.content or '') ~= content_sha1 then" \
  'if false then'
mutation "payload bytes vs hash (delivery gate)" test_mutation_gaps server/policy/evaluator.c \
  '*content_hash == '"'"'\0'"'"' || strcmp(payload_hash, content_hash) != 0) {' \
  '*content_hash == '"'"'\0'"'"') {'
mutation "event stored beyond the head (commit)" test_queries queries/delivery.lua \
  '{rf[4], rf[5]}, not seen)' \
  '{rf[4], rf[5]}, true)'
mutation "database clock: the epoch (commit)" test_evidence queries/delivery.lua \
  'local ts, tnum, tms = now()\n    local archived' \
  'local ts, tnum, tms = now()\n    tnum = 0\n    local archived'
# 2026-01-01T00:00:01Z: inside every reference grant's validity, long before today.
mutation "database clock: frozen in the past (commit)" test_mutation_gaps queries/delivery.lua \
  'local ts, tnum, tms = now()\n    local archived' \
  'local ts, tnum, tms = now()\n    tnum = 1767225601\n    local archived'
mutation "unique invocation (commit)" test_queries queries/delivery.lua \
  'local existing = seen and hash(dkey)' \
  'local existing = nil'
mutation "what is taken, in one EXISTS (commit)" test_queries queries/delivery.lua \
  "P .. ':archived_invocations:' .. archived_tag(inv)) > 0" \
  "P .. ':archived_invocations:' .. archived_tag(inv)) > 4"
mutation "cached: the context's owners (commit)" test_queries queries/delivery.lua \
  "if not same_ids(members(P .. ':context:' .. c.context .. ':owned_by'), c.owners) then" \
  'if false then'
mutation "cached: the decision's time on the database clock (commit)" test_queries queries/delivery.lua \
  'if at > tnum or tnum >= at + 5 then' \
  'if false then'
mutation "cached: the payload's own node (commit)" test_queries queries/delivery.lua \
  'if c and (pf[5] ~= c.kind' \
  'if false and c and (pf[5] ~= c.kind'
mutation "a completed run (commit)" test_queries queries/delivery.lua \
  "if status == 'completed' then" \
  'if false then'
mutation "label recomputation (guard)" test_guard server/policy/guard.c \
  'if (a->conf != lin->conf[i] || a->integrity != lin->integrity[i])' \
  'if (0 && (a->conf != lin->conf[i] || a->integrity != lin->integrity[i]))'
mutation "provenance: parent outside inputs (guard)" test_guard server/policy/guard.c \
  'if (hidden != NULL)' \
  'if (0 && hidden != NULL)'
mutation "provenance: input without edge (guard)" test_guard server/policy/guard.c \
  'if (unlinked != NULL)' \
  'if (0 && unlinked != NULL)'
mutation "public rendering (runner)" test_e2e server/runs/runner.c \
  's->rendered ? s->rendered : s->reply.content' \
  's->reply.content'
mutation "receipt chain head (attach)" test_signed_receipts queries/runs.lua \
  'if chain.prev ~= head or chain.seq ~= n + 1 then' \
  'if false then'
mutation "receipt chain continuity (verifier)" test_signed_receipts proto/receipt.c \
  'if (strcmp(or_empty(r->prev_receipt_hash), link_hash) != 0 || r->chain_seq != want_seq) {' \
  'if (0 && (strcmp(or_empty(r->prev_receipt_hash), link_hash) != 0 || r->chain_seq != want_seq)) {'
mutation "receipt signature (verifier)" test_signed_receipts proto/receipt.c \
  'if (EVP_DigestVerify(ctx, sig, 64, (const unsigned char *)text, len) != 1) {' \
  'if (0) {'
mutation "approval deadline (decide)" test_approval queries/approvals.lua \
  'if now_us >= (micros_of(h.deadline) or 0) then' \
  'if false then'
mutation "approval by the approver only (decide)" test_approval queries/approvals.lua \
  'if actor ~= h.approver then' \
  'if false then'
mutation "approval final (decide)" test_approval queries/approvals.lua \
  "if h.state ~= 'pending' then" \
  'if false then'
mutation "approval holds the send (deliver)" test_approval server/gates/deliver.c \
  'rc = send_hold(&s, out);' \
  '(void)send_hold;'
mutation "checkpoint consumed once (resume)" test_checkpoint queries/checkpoints.lua \
  "if redis.call('SISMEMBER', P .. ':checkpoints:consumed', ckpt) == 1 then" \
  'if false then'
mutation "checkpoint MAC (resume)" test_checkpoint server/evidence/checkpoint.c \
  'int rc = integrity_mac_verify(token, plen + b64len, token + len - 64);' \
  'int rc = STATUS_OK;'
mutation "checkpoint graph (resume)" test_checkpoint server/rpc/svc_runs.c \
  'if (strcmp(graph, store_graph(c->st)) != 0) {' \
  'if (0) {'
mutation "budget ceiling (CreateRun)" test_checkpoint server/rpc/svc_runs.c \
  '} else if (json_integer_value(asked) > ceiling[k]) {' \
  '} else if (0) {'
mutation "budget ceiling narrowing (workflow)" test_checkpoint server/policy/workflow.c \
  'if (up != NULL && json_integer_value(mine) > json_integer_value(up)) {' \
  'if (up != NULL && json_integer_value(mine) < 0) {'
mutation "recovery lease lapse (executor reap)" test_async server/runs/executor.c \
  '"queued,running,recovering,pending_approval",' \
  '"queued,running",'
mutation "approval waited for (runner)" test_approval server/runs/runner.c \
  'exec_await_approval(s->x, dr.approval)) {' \
  '(0 && exec_await_approval(s->x, dr.approval))) {'

# Applies one substitution to file: the text must occur exactly once. Prints the number of
# occurrences on failure. Returns 0 when applied.
apply() {
  MUT_FROM=$2 MUT_TO=$3 perl -0777 -i -pe '
    BEGIN { ($f, $t) = ($ENV{MUT_FROM}, $ENV{MUT_TO}); s/\\n/\n/g for $f, $t; }
    $n = () = /\Q$f\E/g;
    s/\Q$f\E/$t/ if $n == 1;
    END { print STDERR "$n\n"; exit($n == 1 ? 0 : 3); }' "$1" 2>"$work/apply.err"
}

# --- the suites ------------------------------------------------------------------------------
if [ -n "${CHARTER_MUTATION_SUITES:-}" ]; then
  read -r -a suites <<<"${CHARTER_MUTATION_SUITES//,/ }"
  explicit=1
else
  # The focused suites fastest first, then the ablation as a backstop: the first suite to fail
  # names what caught a mutation. test_races is left out for its running time (it races
  # hundreds of deliverers per round).
  suites=(test_guard test_evidence test_queries test_faults test_e2e test_mutation_gaps
    test_signed_receipts test_approval test_checkpoint test_ablation test_async)
  explicit=0
fi

# --- copy and build --------------------------------------------------------------------------
echo "mutations: copying $src"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Committed and untracked source files as they are in the working tree, nothing ignored.
  (cd "$src" && git ls-files -z -co --exclude-standard |
    while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -xf - -C "$copy" || fatal "could not copy $src"
else
  tar -C "$src" --exclude=./.git --exclude=./build --exclude='./build-*' -cf - . |
    tar -xf - -C "$copy" || fatal "could not copy $src"
fi

chosen=()
for s in "${suites[@]}"; do
  if [ -f "$copy/tests/$s.c" ]; then
    chosen+=("$s")
  elif [ "$explicit" = 1 ]; then
    fatal "suite $s has no tests/$s.c"
  fi
done
[ "${#chosen[@]}" -gt 0 ] || fatal "no suite to run"

t=$(date +%s)
progress "mutations: building ${chosen[*]} in a copy with $jobs jobs"
cmake -S "$copy" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$logs/configure.log" 2>&1 ||
  { show_log "$logs/configure.log"; fatal "cmake configure failed"; }
cmake --build "$build" -j"$jobs" --target "${chosen[@]}" >"$logs/build.log" 2>&1 ||
  { show_log "$logs/build.log"; fatal "the unmutated tree does not build"; }
progress "mutations: built in $(elapsed "$t") s; running the baseline"

# Runs the named suites (default: the chosen ones) in order; stops at the first that fails and
# prints its name, or prints nothing when all pass. prefix names each suite's log. A suite
# stops at its own first failed test (CHARTER_TEST_FAIL_FAST): one is all a verdict needs.
run_suites() {
  local prefix=$1 s
  shift
  [ "$#" -gt 0 ] || set -- "${chosen[@]}"
  for s in "$@"; do
    if ! (cd "$build" && CHARTER_TEST_FAIL_FAST=1 timeout "$suite_timeout" "./$s") \
      >"$logs/$prefix.$s.log" 2>&1; then
      echo "$s"
      return 1
    fi
  done
  return 0
}

t=$(date +%s)
if failed=$(run_suites baseline); then
  progress "mutations: baseline passed (${chosen[*]}) in $(elapsed "$t") s; ${#names[@]} mutations to run"
else
  show_log "$logs/baseline.$failed.log"
  fatal "baseline: $failed fails on the unmutated tree"
fi

# --- each mutation ---------------------------------------------------------------------------
results=() caught_by=()
survived=0 errors=0 ran=0
for i in "${!names[@]}"; do
  name=${names[$i]} file=${files[$i]}
  if [ -n "${CHARTER_MUTATION_ONLY:-}" ] && [[ ",${CHARTER_MUTATION_ONLY}," != *",$name,"* ]]; then
    continue
  fi
  ran=$((ran + 1))
  t=$(date +%s)
  target=$copy/$file
  saved=$work/orig/$i
  if [ ! -f "$target" ]; then
    results[i]=ERROR caught_by[i]="($file is missing)"
  elif ! cp -p "$target" "$saved"; then
    results[i]=ERROR caught_by[i]="(could not save $file)"
  elif ! apply "$target" "${froms[$i]}" "${tos[$i]}"; then
    results[i]=ERROR caught_by[i]="(text matches $(tail -n 1 "$work/apply.err") times, not 1)"
  else
    # The expected catcher first (when it is among the chosen suites), then the rest.
    first=() rest=()
    for s in "${chosen[@]}"; do
      if [ "$s" = "${firsts[$i]}" ]; then first=("$s"); else rest+=("$s"); fi
    done
    [ "${#first[@]}" -gt 0 ] || { first=("${rest[0]}"); rest=("${rest[@]:1}"); }
    if ! cmake --build "$build" -j"$jobs" --target "${first[@]}" >"$logs/m$i.build.log" 2>&1; then
      show_log "$logs/m$i.build.log"
      results[i]=ERROR caught_by[i]="(the mutated tree does not build)"
    elif failed=$(run_suites "m$i" "${first[@]}"); then
      if [ "${#rest[@]}" -eq 0 ]; then
        results[i]=SURVIVED caught_by[i]="-"
      elif ! cmake --build "$build" -j"$jobs" --target "${rest[@]}" >>"$logs/m$i.build.log" 2>&1; then
        show_log "$logs/m$i.build.log"
        results[i]=ERROR caught_by[i]="(the mutated tree does not build)"
      elif failed=$(run_suites "m$i" "${rest[@]}"); then
        results[i]=SURVIVED caught_by[i]="-"
      else
        results[i]=caught caught_by[i]=$failed
      fi
    else
      results[i]=caught caught_by[i]=$failed
    fi
  fi
  [ -f "$saved" ] && cp "$saved" "$target" && touch "$target"
  case ${results[$i]} in
    SURVIVED) survived=$((survived + 1)) ;;
    ERROR) errors=$((errors + 1)) ;;
  esac
  progress "$(printf 'mutations: %2d/%d %-44s %-8s %s (%s s)' "$((i + 1))" "${#names[@]}" "$name" \
    "${results[$i]}" "${caught_by[$i]}" "$(elapsed "$t")")"
done

# --- the table -------------------------------------------------------------------------------
w=(8 4 9 6)
for i in "${!names[@]}"; do
  [ -n "${results[$i]:-}" ] || continue
  cells=("${names[$i]}" "${files[$i]}" "${caught_by[$i]}" "${results[$i]}")
  for k in 0 1 2 3; do [ "${#cells[$k]}" -gt "${w[$k]}" ] && w[k]=${#cells[$k]}; done
done
line() { printf '| %-*s | %-*s | %-*s | %-*s |\n' "${w[0]}" "$1" "${w[1]}" "$2" "${w[2]}" "$3" "${w[3]}" "$4"; }
dashes() { printf '%*s' "$1" '' | tr ' ' -; }
echo
line mutation file "caught by" result
line "$(dashes "${w[0]}")" "$(dashes "${w[1]}")" "$(dashes "${w[2]}")" "$(dashes "${w[3]}")"
for i in "${!names[@]}"; do
  [ -n "${results[$i]:-}" ] || continue
  line "${names[$i]}" "${files[$i]}" "${caught_by[$i]}" "${results[$i]}"
done
echo
echo "mutations: $ran run, $((ran - survived - errors)) caught, $survived survived, $errors errors;" \
  "suites ${chosen[*]}; $(elapsed "$started") s in all"
if [ "$survived" -gt 0 ] || [ "$errors" -gt 0 ]; then
  exit 1
fi
exit 0
