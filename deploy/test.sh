#!/usr/bin/env bash
# Builds charter and runs every test (CTest over the CUnit suites) against a private
# redis-server on a unix socket in a temporary folder, stopped afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/deps.sh test
./deploy/build.sh
build=${CHARTER_BUILD_DIR:-build}

. deploy/private-redis.sh
private_redis_start

# Long tests (mutations) write progress lines here; they are shown as they come, since CTest
# prints a test's own output only when it ends.
export CHARTER_TEST_PROGRESS="$private_redis_dir/progress"
: >"$CHARTER_TEST_PROGRESS"
tail -n +1 -f "$CHARTER_TEST_PROGRESS" &
tailpid=$!
trap 'kill "$tailpid" 2>/dev/null; private_redis_stop' EXIT

ctest --test-dir "$build" --output-on-failure --timeout 600 "$@"
