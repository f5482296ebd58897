#!/usr/bin/env bash
# Builds charter and runs its tests with CTest. The suites that need Redis get the private test
# redis-server CTest starts and stops itself (the fixture of tests/redis_fixture.sh), so this
# script starts none.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
Usage: deploy/test.sh [--quick] [CTest arguments...]
Builds charter (deploy/build.sh) and runs every CTest entry, one at a time.
  --quick     only the unit and integration tiers: no fault injection, nothing slow
  -h, --help  this text
Every entry has one tier, a CTest label:
  unit         no server (the guard, workflows, codecs, dispatch tables, source checks)
  integration  a real Redis and/or real charterd processes
  fault        faults injected: killed processes and databases, paused Redis, races
  slow         over about a minute: mutations, cluster, package, npm and browser suites
Other arguments go to CTest, e.g. -R test_rpc, -E mutations, -L fault, -j2.
EOF
}

quick=0
args=()
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    -h | --help) usage; exit 0 ;;
    *) args+=("$arg") ;;
  esac
done

./deploy/deps.sh test
./deploy/build.sh
build=${CHARTER_BUILD_DIR:-build}

# Long tests (mutations) write progress lines here; they are shown as they come, since CTest
# prints a test's own output only when it ends.
CHARTER_TEST_PROGRESS=$(mktemp -t charter-progress.XXXXXX)
export CHARTER_TEST_PROGRESS
tail -n +1 -f "$CHARTER_TEST_PROGRESS" &
tailpid=$!
trap 'kill "$tailpid" 2>/dev/null; rm -f "$CHARTER_TEST_PROGRESS"' EXIT

select=()
[ "$quick" = 0 ] || select=(-L '^(unit|integration)$')
ctest --test-dir "$build" --output-on-failure --timeout 600 "${select[@]}" "${args[@]}"
