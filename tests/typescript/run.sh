#!/usr/bin/env bash
# Builds the TypeScript client (clients/typescript) into its npm tarball, installs the tarball
# with --offline into a fresh consumer folder, and runs client.test.mjs there against a real
# charterd (CTest "typescript_client", label http).
# Usage: run.sh CHARTERD BUILD_DIR
# The one step that may reach the npm registry is `npm ci` of the package's pinned lock; it
# fills npm's cache, from which the consumer's install is served with --offline.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
charterd=$(realpath "${1:?usage: run.sh CHARTERD BUILD_DIR}")
build=$(realpath "${2:?usage: run.sh CHARTERD BUILD_DIR}")

for tool in node npm protoc tar; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool is missing (run deploy/deps.sh test as root)" >&2; exit 1; }
done
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

# Build in a copy that keeps clients/typescript and proto/ side by side, as the package's build
# script expects, so that the worktree stays clean; whatever a build by hand left there
# (node_modules, src/gen, dist, tarballs) stays out of the copy.
work="$build/typescript-client"
rm -rf "$work"
mkdir -p "$work/src/clients" "$work/src/proto" "$work/consumer"
tar -C "$root/clients" --exclude=typescript/node_modules --exclude=typescript/dist \
  --exclude=typescript/src/gen --exclude='typescript/*.tgz' -cf - typescript |
  tar -C "$work/src/clients" -xf -
cp "$root/proto/charter.proto" "$work/src/proto/"

pkg="$work/src/clients/typescript"
(cd "$pkg" && npm ci --loglevel=error && npm pack --loglevel=error --pack-destination "$work" >/dev/null)
tgz="$work/$(cd "$pkg" && node -p 'const p = require("./package.json"); `${p.name}-${p.version}.tgz`')"
[ -f "$tgz" ] || { echo "run.sh: npm pack made no $tgz" >&2; exit 1; }
echo "tarball: $(basename "$tgz"), $(stat -c %s "$tgz") bytes"

# The consumer: a project of its own whose lock pins the package's own dependency versions
# (consumer-lock.mjs), installed with npm ci --offline: no request at all, only npm's cache.
cd "$work/consumer"
node "$here/consumer-lock.mjs" "$pkg" "$tgz" "$work/consumer"
npm ci --offline --loglevel=error
cp "$here/client.test.mjs" "$here/consumer.ts" "$here/tsconfig.json" "$root/tests/connect/charterd.mjs" .

CHARTERD="$charterd" CHARTER_SOURCE_DIR="$root" CHARTER_TS_TARBALL="$tgz" exec node \
  --test-reporter=spec --test client.test.mjs
