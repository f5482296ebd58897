#!/usr/bin/env bash
# charter-dojo on one suite against the test Redis, with every validity check (docs/dojo.md): each
# user task completes with the guard on or is a listed finding, each touches an injection point,
# every injection task succeeds through the null gate, a second pass on fresh graphs gives the
# same results, and the guard-on figures stay within the suite's baseline (attack success may not
# rise, benign utility may not fall), so a regression in any gate fails here. Also: one JSON line
# per case, each naming its suite, arm and user task.
# Usage: tests/dojo_smoke.sh BUILD_DIR [SUITE]   (CHARTER_TEST_REDIS names the Redis)
set -uo pipefail
build=${1:?usage: dojo_smoke.sh BUILD_DIR [SUITE]}
suite=${2:-banking}
redis=${CHARTER_TEST_REDIS:?CHARTER_TEST_REDIS is not set (run through ctest)}
dojo=$build/charter-dojo
[ -x "$dojo" ] || { echo "dojo_smoke: no charter-dojo at $dojo" >&2; exit 2; }
out=$(mktemp -d -t dojo-smoke.XXXXXX)
trap 'rm -rf "$out"' EXIT
fails=0
asserted=0
expect() {
  asserted=$((asserted + 1))
  if ! eval "$2"; then
    echo "dojo_smoke: FAIL $1"
    fails=$((fails + 1))
  fi
}
"$dojo" --redis "$redis" --suite "$suite" --check --out "$out/cases.jsonl" >"$out/report" 2>"$out/err"
rc=$?
cat "$out/report"
expect "charter-dojo --check exits 0 (every validity check passed)" '[ "$rc" -eq 0 ]'
expect "the report has no FAIL line" '! grep -q "^FAIL" "$out/report"'
expect "the determinism check ran" 'grep -q "^PASS a second pass" "$out/report"'
expect "one JSON line per case of both arms" '[ "$(grep -c "\"suite\":\"$suite\"" "$out/cases.jsonl")" -eq "$(wc -l <"$out/cases.jsonl")" ] && [ "$(wc -l <"$out/cases.jsonl")" -gt 0 ]'
expect "both arms present" 'grep -q "\"arm\":\"on\"" "$out/cases.jsonl" && grep -q "\"arm\":\"off\"" "$out/cases.jsonl"'
[ "$rc" -eq 0 ] || tail -n 20 "$out/err"
echo "$((asserted - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
