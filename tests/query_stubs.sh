#!/usr/bin/env bash
# Checks queries/stubs.pl, the generator of the typed C stubs of the query library: it makes the
# stubs from the real sources, and refuses, with one line naming the function, sources where a
# registered function's header has no "call:" line, where a header names a function the
# registration table does not register, and where a call line names another function.
# Usage: tests/query_stubs.sh SOURCE.lua...   (the library's sources in library order)
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: tests/query_stubs.sh SOURCE.lua..." >&2; exit 2; }
gen=$(dirname "$0")/../queries/stubs.pl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# run NAME EXPECTED_STATUS EXPECTED_LINE: stubs.pl over the copies in $work/src.
run() {
  local name=$1 want=$2 line=$3 out rc
  mkdir -p "$work/out"
  out=$(perl "$gen" "$work/out" "${copies[@]}" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qF -- "$line" <<<"$out"; then
    echo "query_stubs: $name: expected status $want and the line \"$line\"; got $rc:" >&2
    echo "$out" >&2
    failed=1
  else
    echo "query_stubs: $name: ok"
  fi
}

# fresh: copies of the real sources, in order.
fresh() {
  rm -rf "$work/src" "$work/out"
  mkdir -p "$work/src"
  copies=()
  for f in "$@"; do
    cp "$f" "$work/src/"
    copies+=("$work/src/$(basename "$f")")
  done
}

fresh "$@"
run "the real sources" 0 ""
for f in queries.h queries.c; do
  [ -s "$work/out/$f" ] || { echo "query_stubs: $f was not written" >&2; failed=1; }
done
grep -qF 'int q_get_approval(store *st, const char *approval_id, json_t **out);' \
  "$work/out/queries.h" || { echo "query_stubs: no q_get_approval stub" >&2; failed=1; }
grep -qF '{"charter_time", true},' "$work/out/queries.c" ||
  { echo "query_stubs: charter_time is not in the table as read only" >&2; failed=1; }

fresh "$@"
sed -i '/^call: get_approval(approval_id)$/d' "$work/src/approvals.lua"
run "a registered function without a call line" 1 \
  'approvals.lua: charter_get_approval: its header has no "call:" line'

fresh "$@"
printf '%s\n' '--[[ charter_orphan' 'call: orphan()' 'keys: P. args: none. ]]' \
  'local function charter_orphan(keys, args) end' >>"$work/src/blobs.lua"
run "a header of no registered function" 1 \
  "blobs.lua: the header charter_orphan names a function registry.lua's FUNCTIONS does not register"

fresh "$@"
sed -i 's/^call: get_blob(sha)$/call: put_blob(sha)/' "$work/src/blobs.lua"
run "a call line naming another function" 1 \
  "blobs.lua: charter_get_blob: call: put_blob(sha): names put_blob, but the header is charter_get_blob"

exit $failed
