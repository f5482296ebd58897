#!/usr/bin/env bash
# Builds charter and runs every test (CTest over the CUnit suites) against a private
# redis-server on a unix socket in a temporary folder, stopped afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/build.sh
build=${CHARTER_BUILD_DIR:-build}

tmp=$(mktemp -d -t charter-test.XXXXXX)
chmod 700 "$tmp"
tailpid=
stop() {
  [ -n "$tailpid" ] && kill "$tailpid" 2>/dev/null
  if [ -f "$tmp/redis.pid" ]; then
    kill "$(cat "$tmp/redis.pid")" 2>/dev/null || true
    for _ in $(seq 50); do [ -f "$tmp/redis.pid" ] || break; sleep 0.1; done
  fi
  rm -rf "$tmp"
}
trap stop EXIT

redis-server --port 0 --unixsocket "$tmp/redis.sock" --unixsocketperm 700 --dir "$tmp" \
  --save '' --appendonly no --daemonize yes --pidfile "$tmp/redis.pid" \
  --logfile "$tmp/redis.log" --maxclients 2000 \
  $( [ -f /usr/lib/redis/modules/redisearch.so ] && echo --loadmodule /usr/lib/redis/modules/redisearch.so )
for _ in $(seq 100); do
  redis-cli -s "$tmp/redis.sock" ping >/dev/null 2>&1 && break
  sleep 0.1
done
redis-cli -s "$tmp/redis.sock" ping >/dev/null || { echo "test.sh: redis-server did not start; see $tmp/redis.log" >&2; cat "$tmp/redis.log" >&2; exit 1; }

export CHARTER_TEST_REDIS="unix://$tmp/redis.sock"
# Long tests (mutations) write progress lines here; they are shown as they come, since CTest
# prints a test's own output only when it ends.
export CHARTER_TEST_PROGRESS="$tmp/progress"
: >"$CHARTER_TEST_PROGRESS"
tail -n +1 -f "$CHARTER_TEST_PROGRESS" &
tailpid=$!
ctest --test-dir "$build" --output-on-failure --timeout 600 "$@"
