#!/usr/bin/env bash
# The test Redis as a CTest fixture: the entries redis_start (FIXTURES_SETUP test_redis) and
# redis_stop (FIXTURES_CLEANUP) run this before the first suite that needs the test Redis and
# after the last, so `ctest -R test_e2e` needs nothing from its caller. The folder is fixed (the
# build folder's test-redis/) because CTest cannot pass a setting from one entry to the others:
# the suites get CHARTER_TEST_REDIS=unix://DIR/redis.sock from their ENVIRONMENT property. The
# server is deploy/private-redis.sh's.
# Usage: tests/redis_fixture.sh start|stop DIR
# start stops a server an interrupted run left in DIR, empties DIR (mode 0700) and starts one.
set -euo pipefail
action=${1:-}
dir=${2:-}
if [ -z "$dir" ] || { [ "$action" != start ] && [ "$action" != stop ]; }; then
  echo "usage: redis_fixture.sh start|stop DIR" >&2
  exit 2
fi
. "$(dirname "$0")/../deploy/private-redis.sh"

# A unix socket path holds at most 107 bytes.
if [ ${#dir} -gt 96 ]; then
  echo "redis_fixture: $dir/redis.sock is longer than a unix socket path may be; use a build" \
    "folder with a shorter path" >&2
  exit 1
fi
private_redis_halt "$dir"
rm -rf "$dir"
[ "$action" = start ] || exit 0
mkdir -p "$dir"
chmod 700 "$dir"
private_redis_launch "$dir"
echo "redis_fixture: redis-server answers on $dir/redis.sock"
