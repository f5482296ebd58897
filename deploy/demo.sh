#!/usr/bin/env bash
# The reference workflow, end to end: starts charterd on its embedded Redis in a temporary
# data folder (where it makes its integrity key at the first start), drives the procurement run
# through the charter CLI, prints each decision, checks it is the expected one, checks the
# public delivery's receipt offline with that key, and stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(readlink -f "${CHARTER_BUILD_DIR:-build}")
t0=$(date +%s)
if [ -x "$build/charterd" ]; then
  echo "demo: bringing the build in $build up to date"
else
  echo "demo: building charter into $build (the first build compiles and links about 280 files:"
  echo "demo: a few minutes on 2 cores; each is shown as it starts)"
fi
# One line per file compiled or program linked; nothing when the build is up to date.
./deploy/build.sh | awk '/^\[ *[0-9]+%\] (Building|Linking)/ { print "demo: " $0; fflush() }'
echo "demo: built in $(($(date +%s) - t0)) s; starting charterd on an embedded Redis"

tmp=$(mktemp -d -t charter-demo.XXXXXX)
chmod 700 "$tmp"
export CHARTER_OPERATOR_TOKEN=$(openssl rand -hex 24)
export CHARTER_URL="ipc://$tmp/charterd.sock"
pid=
stop() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    wait "$pid" || true
  fi
  rm -rf "$tmp"
}
trap stop EXIT

start() {
  "$build/charterd" --data-dir "$tmp/data" --listen "$CHARTER_URL" --quiet 2>>"$tmp/charterd.log" &
  pid=$!
  for _ in $(seq 100); do
    "$build/charter" health >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/charterd.log" >&2; exit 1; }
    sleep 0.1
  done
}
start
charter() { "$build/charter" "$@"; }
fail() { echo "demo: $*" >&2; exit 1; }
say() { printf '\n== %s\n' "$*"; }

say "charterd: $(charter health | head -n 1)"

say "1-3. Run the procurement workflow (scripted adversary follows the vendor_c injection)"
charter run | tee "$tmp/run.txt"
run=$(charter --json list --limit 1 | jq -r '.runs[0].id')
view=$(charter --json get "$run")
jq -e '[.events[] | select(.kind=="delivery_decided" and .outcome=="ALLOW")] | length == 1' <<<"$view" >/dev/null \
  || fail "expected the CFO delivery to be allowed"
jq -e '.events[] | select(.kind=="input_checked" and .outcome=="DENY" and (.codes|index("INPUT_OUT_OF_SCOPE")) and (.witness|test("^budget \\(confidential\\) → Internal recommendation → report step")))' <<<"$view" >/dev/null \
  || fail "expected the handoff to be denied INPUT_OUT_OF_SCOPE with the budget witness"
[ "$(jq -r .run.status <<<"$view")" = blocked ] || fail "expected the run to be blocked"

say "4. Revoke g_reporter, then recover"
charter revoke g_reporter
charter recover "$run" | tee "$tmp/recover1.txt"
charter --json get "$run" | jq -e '[.events[] | select(.kind=="delivery_decided" and .outcome=="DENY" and (.codes|index("GRANT_INVALID")))] | length == 1' >/dev/null \
  || fail "expected the recovery to be denied GRANT_INVALID"

say "   Restore g_reporter"
charter restore g_reporter

say "5. Recover from permitted inputs: public delivery"
charter recover "$run" | tee "$tmp/recover2.txt"
final=$(charter --json get "$run")
[ "$(jq -r .run.status <<<"$final")" = completed ] || fail "expected the run to be completed"
public=$(jq -r '.deliveries[] | select(.recipient=="public") | .content' <<<"$final")
[ -n "$public" ] || fail "expected a public delivery"
say "The public report, rendered by the server from approved fields"
printf '%s\n' "$public"
if grep -Eq 'CEILING|48[^0-9]?200|48[.,]2k' <<<"$public"; then fail "the public report leaks the budget"; fi

say "Events of run $run"
charter get "$run"

say "6. Restart charterd on the same data, revoke g_reporter again, replay the public delivery"
kill -TERM "$pid"; wait "$pid" || true
start
[ "$(charter --json get "$run" | jq -r .run.status)" = completed ] || fail "expected the run to reload completed"
charter revoke g_reporter >/dev/null
seq=$(charter --json get "$run" | jq -r '[.events[] | select(.kind=="delivery_decided" and .outcome=="ALLOW")] | last | .seq')
charter replay "$run" "$seq" | tee "$tmp/replay.txt"
charter --json replay "$run" "$seq" | jq -e '.matches == true and .replayed.outcome == "ALLOW"' >/dev/null \
  || fail "expected the replayed public delivery to be allowed from its recorded facts"
charter restore g_reporter >/dev/null

say "7. The evidence: the run's hash chain, and the public delivery's receipt checked offline with the key charterd made in its data folder"
charter audit "$run" | tee "$tmp/audit.txt"
grep -q "intact" "$tmp/audit.txt" || fail "expected the run's hash chain to be intact"
[ "$(stat -c %a "$tmp/data/integrity.key")" = 600 ] || fail "expected the integrity key to be mode 600"
inv=$(jq -r '.deliveries[] | select(.recipient=="public") | .invocationId' <<<"$final")
charter --json receipt "$run" "$inv" >"$tmp/receipt.json"
charter verify-receipt "$tmp/receipt.json" --key "$tmp/data/integrity.key" | tee "$tmp/verify.txt" \
  || fail "expected the receipt to verify under the integrity key"
say "demo: ok"
