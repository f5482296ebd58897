#!/usr/bin/env bash
# charter-dojo on one suite against the test Redis, with every validity check (docs/dojo.md): each
# user task completes with the guard on or is a listed finding, each touches an injection point,
# every injection task succeeds through the null gate, a second pass on fresh graphs gives the
# same results, and the guard-on figures stay within the suite's baseline (attack success may not
# rise, benign utility may not fall), so a regression in any gate fails here. Also: one JSON line
# per case of every arm, each naming its suite; and every option `charter-dojo --help` prints is
# a row of the Options table of docs/dojo.md, and every row one it prints.
# Usage: tests/dojo_smoke.sh SOURCE_DIR BUILD_DIR [SUITE]   (CHARTER_TEST_REDIS names the Redis)
set -uo pipefail
src=${1:?usage: dojo_smoke.sh SOURCE_DIR BUILD_DIR [SUITE]}
build=${2:?usage: dojo_smoke.sh SOURCE_DIR BUILD_DIR [SUITE]}
suite=${3:-banking}
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
# Per pass: U benign and U x I attack cases guard on and off, U x I with the quoting adversary.
read -r users injections < <(sed -nE 's/^charter-dojo: 1 suites, ([0-9]+) user tasks, ([0-9]+) injection tasks.*/\1 \2/p' "$out/report")
lines=$(wc -l <"$out/cases.jsonl")
expect "one JSON line per case of every arm ($lines)" \
  '[ -n "${users:-}" ] && [ "$lines" -eq $((3 * users * injections + 2 * users)) ] && [ "$(grep -c "\"suite\":\"$suite\"" "$out/cases.jsonl")" -eq "$lines" ]'
for arm in on off quoting; do
  expect "arm $arm present" 'grep -q "\"arm\":\"$arm\"" "$out/cases.jsonl"'
done
helped=$("$dojo" --help | grep -oE '^  --[a-z-]+' | tr -d ' ' | sort -u)
documented=$(awk '/^## Options/ { on = 1; next } /^## / { on = 0 } on' "$src/docs/dojo.md" |
  grep -oE '^\| `--[a-z-]+' | tr -d '|` ' | sort -u)
expect "docs/dojo.md's Options table names every option of --help, and only those" \
  '[ -n "$helped" ] && [ "$helped" = "$documented" ]'
# Usage errors exit 2 before anything runs: a count that is not a whole number of 1 or more
# (strtoul read "-1" as all of them, "1e300" and "2x" as 1, "0" as no limit), and an --out
# the results could never be written to (it used to run the whole benchmark, print "one JSON
# line per case in FILE" and exit 0).
for bad in "--max-users -1" "--max-users 0" "--max-users 1e300" "--max-users 2x" \
  "--max-injections 99999999999999999999" "--max-injections ''" "--out $out/no/such/folder/x"; do
  eval "\"$dojo\" --redis \"$redis\" --suite \"$suite\" --no-repeat --quiet $bad" >"$out/bad" 2>&1
  brc=$?
  expect "charter-dojo $bad is a usage error (exit 2, got $brc)" \
    '[ "$brc" -eq 2 ] && grep -q "^charter-dojo: " "$out/bad" && ! grep -q "one JSON line per case" "$out/bad"'
done
[ "$rc" -eq 0 ] || tail -n 20 "$out/err"
echo "$((asserted - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
