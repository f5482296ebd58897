#!/usr/bin/env bash
# Builds charter and runs every test (CTest over the CUnit suites) against a private
# redis-server on a unix socket in a temporary folder, stopped afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/build.sh
build=${CHARTER_BUILD_DIR:-build}

. deploy/private-redis.sh
private_redis_start

ctest --test-dir "$build" --output-on-failure --timeout 600 "$@"
