#!/usr/bin/env bash
# Drives charter-mcp with the official MCP TypeScript SDK (pinned in package.json and
# package-lock.json) over stdio and Streamable HTTP against a real charterd and a real Redis:
# the roles of procurement and support, the live tools of payments, refusals, smuggling and bad
# input (tests/mcp/mcp.test.mjs).
# Usage: run.sh SOURCE_DIR BUILD_DIR [conformance|gateway]; with "conformance", runs the
# official conformance suite against the HTTP transport instead (tests/mcp/conformance.sh: the
# conformance fixture, and a real step);
# with "gateway", charter-mcp fronts real MCP servers (tests/mcp/gateway.test.mjs). Installs
# nodejs/npm with apt when missing and the npm packages into BUILD_DIR/mcp-node (npm ci, only
# when the lock file changed).
set -euo pipefail
src=$1
build=$2
what=${3:-sdk}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get install -y nodejs npm >/dev/null
fi
node_dir=$build/mcp-node
mkdir -p "$node_dir"
if ! cmp -s "$src/tests/mcp/package-lock.json" "$node_dir/package-lock.json" \
   || [ ! -d "$node_dir/node_modules/@modelcontextprotocol/sdk" ]; then
  cp "$src/tests/mcp/package.json" "$src/tests/mcp/package-lock.json" "$node_dir/"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi

tmp=$(mktemp -d -t charter-mcp-test.XXXXXX)
chmod 700 "$tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

redis=${CHARTER_TEST_REDIS:-}
if [ -z "$redis" ]; then
  redis-server --port 0 --unixsocket "$tmp/redis.sock" --unixsocketperm 700 --dir "$tmp" \
    --save '' --appendonly no --logfile "$tmp/redis.log" &
  pids+=($!)
  for _ in $(seq 100); do redis-cli -s "$tmp/redis.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis=unix://$tmp/redis.sock
fi

token=mcp-test-operator-token-$RANDOM$RANDOM
export CHARTER_OPERATOR_TOKEN=$token
# An integrity key, so the async-run tools' run receipts can be issued.
head -c 32 /dev/urandom > "$tmp/integrity.key"
chmod 600 "$tmp/integrity.key"
"$build/charterd" --redis "$redis" --graph "mcp_test_$$_$RANDOM" --data-dir "$tmp/data" \
  --listen "ipc://$tmp/charterd.sock" --workers 2 --quiet --integrity-key "$tmp/integrity.key" \
  --workflow "$src/deploy/workflows/procurement.json" 2>"$tmp/charterd.log" &
pids+=($!)
for _ in $(seq 100); do
  "$build/charter" --url "ipc://$tmp/charterd.sock" health >/dev/null 2>&1 && break
  sleep 0.1
done
"$build/charter" --url "ipc://$tmp/charterd.sock" health >/dev/null \
  || { echo "run.sh: charterd did not start" >&2; cat "$tmp/charterd.log" >&2; exit 1; }

export CHARTER_MCP="$build/charter-mcp" CHARTER_CLI="$build/charter"
export CHARTER_URL="ipc://$tmp/charterd.sock" CHARTER_TOKEN=$token
if [ "$what" = conformance ]; then
  "$src/tests/mcp/conformance.sh" "$src" "$build"
  exit $?
fi
export CHARTER_WORKFLOWS="$src/deploy/workflows"
export NODE_PATH="$node_dir/node_modules"
if [ "$what" = gateway ]; then
  cp "$src/tests/mcp/gateway.test.mjs" "$src/tests/mcp/downstream.mjs" \
    "$src/tests/mcp/downstream-http.mjs" "$src/tests/mcp/hostile-http.mjs" \
    "$src/tests/mcp/mailpay.mjs" "$node_dir/"
  node "$node_dir/gateway.test.mjs"
  exit $?
fi
cp "$src/tests/mcp/mcp.test.mjs" "$node_dir/"
node "$node_dir/mcp.test.mjs"
