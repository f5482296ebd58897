#!/usr/bin/env bash
# Configures and builds charter into ./build (or $CHARTER_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/deps.sh
build=${CHARTER_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)"
