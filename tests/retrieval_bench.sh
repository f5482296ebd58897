#!/usr/bin/env bash
# The retrieval benchmark: multi-hop questions over a pinned corpus of real documentation shipped
# in Debian packages (tests/retrieval/corpus.manifest, verified by SHA-256), a synthetic
# tenant/confidentiality overlay, and hand-written two-hop cases (tests/retrieval/cases.json),
# each run clean, benign and poisoned (a follow-up proposal that names a tenant, filters, a
# principal, ...) under three controls:
#   none    no filters; the application honours a tenant a proposal names
#   acl     the caller's tenant filter applied afresh on every hop; proposal fields ignored
#   charter a scope bound once; follow-ups through Retrieval/FollowUp
# and a fourth measure: whether the answer derived from what was retrieved reaches the public
# recipient although it holds confidential or internal evidence (none and acl have no delivery
# gate; charter's delivery gate decides). Prints the table, then BM25 Recall@5 and MRR of the
# second hop within the caller's universe. Exits 1 when the charter control exposes any
# unauthorized evidence, leaks, or refuses a clean or benign follow-up.
#
# Usage: tests/retrieval_bench.sh [BUILD_DIR]   (default: build; needs redis-redisearch)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
charterd=$build/charterd
cli=$build/charter
manifest=$src/tests/retrieval/corpus.manifest
cases=$src/tests/retrieval/cases.json
for f in "$charterd" "$cli"; do
  [ -x "$f" ] || { echo "retrieval_bench: $f is missing: run ./deploy/build.sh" >&2; exit 2; }
done
[ -f /usr/lib/redis/modules/redisearch.so ] || {
  echo "retrieval_bench: RediSearch is missing: apt-get install redis-redisearch" >&2; exit 2; }

tmp=$(mktemp -d -t charter-retrieval.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# --- the corpus, checked against the manifest ------------------------------------------------
text_of() { if [[ $1 == *.gz ]]; then zcat "$1"; else cat "$1"; fi; }
# Paragraphs grouped into chunks of 300..1200 bytes, one JSON line each: {id, doc, text}.
chunks() {
  text_of "$2" |
    awk -v doc="$1" '
      function flush() { if (length(buf) > 0) { n++; printf "%s-%d\t%s\n", doc, n, buf; buf = "" } }
      /^[[:space:]]*$/ { if (length(buf) >= 300) flush(); else if (length(buf) > 0) buf = buf " "; next }
      { gsub(/\t/, " "); line = $0; if (length(buf) + length(line) > 1200) flush(); buf = (length(buf) ? buf " " : "") line }
      END { flush() }' |
    jq -R -c --arg doc "$1" 'split("\t") | {id: .[0], doc: $doc, text: .[1]}'
}
: >"$tmp/chunks.jsonl"
: >"$tmp/docs.jsonl"
while read -r doc tenant conf pkg version path sha; do
  [[ -z $doc || $doc == \#* ]] && continue
  [ -f "$path" ] || { echo "retrieval_bench: $path ($pkg) is missing: apt-get install $pkg" >&2; exit 2; }
  have=$(text_of "$path" | sha256sum | cut -d' ' -f1)
  if [ "$have" != "$sha" ]; then
    echo "retrieval_bench: $path: text SHA-256 $have, the manifest pins $sha ($pkg $version)" >&2
    exit 2
  fi
  now=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || echo "?")
  [ "$now" = "$version" ] || echo "retrieval_bench: note: $pkg is $now (manifest: $version); the text is the same" >&2
  chunks "$doc" "$path" >>"$tmp/chunks.jsonl"
  jq -n -c --arg d "$doc" --arg t "$tenant" --arg c "$conf" '{doc: $d, tenant: $t, conf: $c}' >>"$tmp/docs.jsonl"
done <"$manifest"

# Each chunk is a registered resource (labels from its document) and an indexed chunk.
jq -s -c --slurpfile docs <(jq -s . "$tmp/docs.jsonl") '
  ($docs[0] | map({key: .doc, value: .}) | from_entries) as $d
  | map(. + {tenant: $d[.doc].tenant, conf: $d[.doc].conf})' "$tmp/chunks.jsonl" >"$tmp/chunks.json"
jq '{
  name: "retrieval-bench",
  task: "Answer questions from the documentation a caller may read.",
  resources: map({id, title: (.doc + " part " + (.id | split("-") | last)),
                  confidentiality: .conf, integrity: "untrusted", content: .text}),
  recipients: [{id: "rb_public", clearance: "public"}, {id: "rb_staff", clearance: "confidential"}],
  actors: [{id: "rb_owner", kind: "human"}, {id: "rb_asker", kind: "agent"}],
  grants: [
    {id: "rb_root", grantee: "rb_owner", issuer: "rb_owner", tools: ["read_source", "send"],
     recipients: ["rb_public", "rb_staff"], resources: map(.id),
     valid_from: "2026-01-01T00:00:00Z", valid_to: "2036-01-01T00:00:00Z"},
    {id: "rb_ask", grantee: "rb_asker", delegated_from: "rb_root", tools: ["read_source", "send"],
     recipients: ["rb_public", "rb_staff"], resources: map(.id),
     valid_from: "2026-01-01T00:00:00Z", valid_to: "2036-01-01T00:00:00Z"}],
  steps: [{name: "ask", actor: "rb_asker", grant: "rb_ask", tools: ["read_source", "send"],
           recipients: ["rb_public", "rb_staff"], resources: map(.id), reads: [.[0].id], receives: [],
           output_title: "Answer", deliver: {tool: "send", recipient: "rb_public"},
           script: {content: "answer", handoff: ["output"]}}]}' "$tmp/chunks.json" >"$tmp/workflow.json"
jq '{chunks: map({chunkId: .id, resourceId: .id, tenant, visibility: .conf, revision: 1, text})}' \
  "$tmp/chunks.json" >"$tmp/ingest.json"

# --- a private charterd with its embedded database (RediSearch loaded) --------------------------
export CHARTER_OPERATOR_TOKEN=$(openssl rand -hex 24)
export CHARTER_VIEWER_TOKEN=$(openssl rand -hex 24)
export CHARTER_URL="ipc://$tmp/c.sock"
mkdir -m 700 "$tmp/data"
"$charterd" --graph retrieval-bench --data-dir "$tmp/data" --listen "$CHARTER_URL" \
  >"$tmp/charterd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do "$cli" health >/dev/null 2>&1 && break; sleep 0.1; done
"$cli" health >/dev/null || { cat "$tmp/charterd.log" >&2; exit 1; }
c() { "$cli" --json "$@"; }
c workflow apply "$tmp/workflow.json" >/dev/null
run=$(c run --mode external --workflow retrieval-bench | jq -r '.run.id')
ctx=$(c open-step "$run" ask | jq -r '.contextId')
indexed=$(c ingest "$tmp/ingest.json" | jq -r '.indexed')
ndocs=$(wc -l <"$tmp/docs.jsonl")
ncases=$(jq length "$cases")

# --- the cases ---------------------------------------------------------------------------------
declare -A exposed rejected lineage followups leaks runs
for k in none acl charter; do exposed[$k]=0; rejected[$k]=0; lineage[$k]=0; followups[$k]=0; leaks[$k]=0; runs[$k]=0; done
poisoned_total=0
clean_refused=0
recall=0
rr_sum=0
inv=0
gate_refused=0

# hits JSON (a SearchResponse) -> lines "tenant conf-level chunk artifact"
hits() { jq -r '(.results // [])[] | "\(.chunk.tenant) \(.artifact.conf // 0) \(.chunk.chunkId) \(.artifact.id)"'; }
# 1 when any hit of the files named lies outside the tenants given (space separated)
outside() {
  local allowed=" $1 "; shift
  cat "$@" | while read -r t _ _ _; do [[ $allowed == *" $t "* ]] || { echo 1; break; }; done
}
# 1 when any hit holds evidence above public
above_public() { cat "$@" | awk '$2 > 0 { print 1; exit }'; }
# scope-bind with the caller's tenants, or unrestricted
bind() {
  local t=$1; shift
  if [ "$t" = "*" ]; then c scope-bind "$ctx" --principal caller --unrestricted yes "$@"
  else c scope-bind "$ctx" --principal caller --filter "tenant=$t" "$@"; fi | jq -r .scopeId
}

for i in $(seq 0 $((ncases - 1))); do
  case_json=$(jq -c ".[$i]" "$cases")
  tenants=$(jq -r '.tenants | join(",")' <<<"$case_json")
  tenants_sp=${tenants//,/ }
  q1=$(jq -r .q1 <<<"$case_json")
  gold=$(jq -r .gold <<<"$case_json")
  gold_tenant=$(jq -r --arg g "$gold" '.[] | select(.id == $g) | .tenant' "$tmp/chunks.json")
  [[ " $tenants_sp " == *" $gold_tenant "* ]] || { echo "retrieval_bench: case $i: gold $gold is outside the caller's tenants" >&2; exit 2; }
  for variant in clean benign poisoned; do
    case $variant in
      clean) proposal=$(jq -c '{query: .q2}' <<<"$case_json") ;;
      *) proposal=$(jq -c ".$variant" <<<"$case_json") ;;
    esac
    q2=$(jq -r .query <<<"$proposal")
    [ "$variant" = poisoned ] && poisoned_total=$((poisoned_total + 1))
    # The tenant a proposal asks for, wherever it put it.
    asked=$(jq -r '[.tenant, .tenant_id, (.filters.tenant // [])[0], .options.tenant] | map(select(. != null)) | first // ""' <<<"$proposal")

    # none: no filters; a named tenant is obeyed.
    s=$(bind "*"); c search "$s" "$q1" | hits >"$tmp/h1"
    if [ -n "$asked" ]; then s2=$(bind "$asked"); else s2=$(bind "*"); fi
    c search "$s2" "$q2" | hits >"$tmp/h2"
    runs[none]=$((runs[none] + 1)); followups[none]=$((followups[none] + 1))
    [ -n "$(outside "$tenants_sp" "$tmp/h1" "$tmp/h2")" ] && exposed[none]=$((exposed[none] + 1))
    [ -n "$(above_public "$tmp/h1" "$tmp/h2")" ] && leaks[none]=$((leaks[none] + 1))

    # acl: the caller's filter on every hop, a fresh scope each time; proposal fields dropped.
    s=$(bind "$tenants"); c search "$s" "$q1" | hits >"$tmp/h1"
    s2=$(bind "$tenants"); c search "$s2" "$q2" | hits >"$tmp/h2"
    runs[acl]=$((runs[acl] + 1)); followups[acl]=$((followups[acl] + 1))
    [ -n "$(outside "$tenants_sp" "$tmp/h1" "$tmp/h2")" ] && exposed[acl]=$((exposed[acl] + 1))
    [ -n "$(above_public "$tmp/h1" "$tmp/h2")" ] && leaks[acl]=$((leaks[acl] + 1))

    # charter: one scope; the follow-up through FollowUp; the answer through the delivery gate.
    s=$(bind "$tenants" --max-follow-ups 3)
    r1=$(c search "$s" "$q1")
    hits <<<"$r1" >"$tmp/h1"
    : >"$tmp/h2"
    runs[charter]=$((runs[charter] + 1))
    q1id=$(jq -r .searchId <<<"$r1")
    if r2=$(c follow-up "$q1id" "$proposal" 2>"$tmp/err"); then
      followups[charter]=$((followups[charter] + 1))
      hits <<<"$r2" >"$tmp/h2"
      ok=$(jq -r --arg s "$s" --arg p "$q1id" \
        '(.lineage | length == 2) and .lineage[0].parentSearchId == $p and .lineage[1].searchId == $p
         and all(.lineage[]; .scopeId == $s)' <<<"$r2")
      [ "$ok" = true ] && lineage[charter]=$((lineage[charter] + 1))
      if [ "$variant" = clean ]; then
        rank=$(jq -r --arg g "$gold" '[(.results // [])[:5][] | .chunk.chunkId] | index($g) // empty' <<<"$r2")
        if [ -n "$rank" ]; then
          recall=$((recall + 1))
          rr_sum=$(awk -v s="$rr_sum" -v r="$rank" 'BEGIN { printf "%.6f", s + 1 / (r + 1) }')
        fi
      fi
      [ "$variant" = poisoned ] && echo "retrieval_bench: case $((i + 1)): a poisoned proposal was searched" >&2
    else
      if grep -q SCOPE_FIELD_REJECTED "$tmp/err"; then
        [ "$variant" = poisoned ] && rejected[charter]=$((rejected[charter] + 1))
      fi
      if [ "$variant" != poisoned ]; then
        clean_refused=$((clean_refused + 1))
        echo "retrieval_bench: case $((i + 1)) ($variant) was refused: $(cat "$tmp/err")" >&2
      fi
    fi
    [ -n "$(outside "$tenants_sp" "$tmp/h1" "$tmp/h2")" ] && exposed[charter]=$((exposed[charter] + 1))
    ids=$(cat "$tmp/h1" "$tmp/h2" | awk '{ print $4 }' | sort -u | tr '\n' ' ')
    if [ -n "${ids// /}" ]; then
      # shellcheck disable=SC2086
      if out=$(c record-output "$ctx" --title Answer --content "answer to: $q1" $ids 2>/dev/null); then
        aid=$(jq -r '.artifact.id' <<<"$out")
        inv=$((inv + 1))
        set +e
        c deliver "$ctx" "$aid" rb_public send "bench-$inv" >"$tmp/d" 2>/dev/null
        set -e
        if jq -e '.decision.outcome | tostring | test("ALLOW")' "$tmp/d" >/dev/null &&
           [ "$(jq -r '.artifact.conf // 0' <<<"$out")" -gt 0 ]; then
          leaks[charter]=$((leaks[charter] + 1))
        fi
        grep -q CLEARANCE_EXCEEDED "$tmp/d" && gate_refused=$((gate_refused + 1))
      fi
    fi
  done
done

# --- the table ---------------------------------------------------------------------------------
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "-"; else printf "%.0f%%", 100 * a / b }'; }
total=$((ncases * 3))
echo "retrieval benchmark: $ndocs documents, $indexed chunks, $ncases cases x 3 (clean, benign, poisoned)"
echo
printf '| %-34s | %-28s | %-30s | %-30s | %-26s |\n' "control" "unauthorized evidence exposed" \
  "scope-bearing proposals rejected before search" "follow-ups with a complete scope lineage" \
  "derived output leaked to public"
printf '|%s|%s|%s|%s|%s|\n' "------------------------------------" "------------------------------" \
  "--------------------------------" "--------------------------------" "----------------------------"
row() {
  printf '| %-34s | %-28s | %-30s | %-30s | %-26s |\n' "$1" \
    "${exposed[$2]}/$total ($(pct "${exposed[$2]}" $total))" \
    "${rejected[$2]}/$poisoned_total ($(pct "${rejected[$2]}" $poisoned_total))" \
    "${lineage[$2]}/${followups[$2]} ($(pct "${lineage[$2]}" "${followups[$2]}"))" \
    "${leaks[$2]}/$total ($(pct "${leaks[$2]}" $total))"
}
row "no filters" none
row "ACL filtering on every hop" acl
row "charter scopes + delivery gate" charter
echo
echo "charter: $gate_refused of $inv derived answers refused to the public recipient (CLEARANCE_EXCEEDED)"
awk -v r="$recall" -v n="$ncases" -v s="$rr_sum" \
  'BEGIN { printf "second hop, charter scope, clean: BM25 Recall@5 %.3f, MRR@5 %.3f (%d cases)\n", r / n, s / n, n }'

status=0
if [ "${exposed[charter]}" -ne 0 ] || [ "${leaks[charter]}" -ne 0 ] || [ "$clean_refused" -ne 0 ] ||
   [ "${rejected[charter]}" -ne "$poisoned_total" ]; then
  echo "retrieval_bench: FAIL: the charter control exposed, leaked, refused a clean follow-up or searched a poisoned one" >&2
  status=1
fi
exit $status
