#!/usr/bin/env bash
# Runs charterd's gRPC suites (CTest "grpc_python", "grpc_npm_ci", "grpc_js"):
#   run.sh python CHARTERD BUILD_DIR   tests/grpc/test_grpc.py with Debian's python3-grpcio; the
#                                      message classes are made by protoc from proto/ into
#                                      BUILD_DIR/grpc-python
#   run.sh setup                       npm ci of the pinned @grpc/grpc-js and @grpc/proto-loader
#   run.sh js CHARTERD BUILD_DIR       tests/grpc/grpc.test.mjs with them
# Every suite starts its own charterd on the test Redis (CHARTER_TEST_REDIS) or an embedded one.
# Debian's /usr/bin/python3 is used (CHARTER_PYTHON overrides it): python3-grpcio and
# python3-protobuf are installed for it, not for another Python on PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
suite=${1:?usage: run.sh python|setup|js [CHARTERD BUILD_DIR]}
case "$suite" in
python)
  charterd=$(realpath "${2:?charterd path}")
  build=$(realpath "${3:?build dir}")
  py=${CHARTER_PYTHON:-/usr/bin/python3}
  command -v protoc >/dev/null || { echo "run.sh: protoc is missing (run deploy/deps.sh test as root)" >&2; exit 1; }
  for m in grpc google.protobuf; do
    "$py" -c "import $m" 2>/dev/null ||
      { echo "run.sh: $py lacks the module $m (run deploy/deps.sh test as root)" >&2; exit 1; }
  done
  gen="$build/grpc-python"
  rm -rf "$gen"
  mkdir -p "$gen"
  protoc --proto_path="$root/proto" --python_out="$gen" charter.proto health.proto \
    reflection.proto reflection_v1alpha.proto
  cd "$gen"
  CHARTERD="$charterd" PYTHONPATH="$gen:$root/tests" exec "$py" "$here/test_grpc.py" -v
  ;;
setup)
  cd "$here"
  for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is missing (run deploy/deps.sh test as root)" >&2; exit 1; }
  done
  npm ci --no-audit --no-fund --loglevel=error
  ;;
js)
  charterd=$(realpath "${2:?charterd path}")
  build=$(realpath "${3:?build dir}")
  cd "$here"
  if [ ! -d node_modules ]; then "$0" setup; fi
  CHARTERD="$charterd" CHARTER_BUILD_DIR="$build" CHARTER_SOURCE_DIR="$root" exec node \
    --test-reporter=spec --test grpc.test.mjs
  ;;
*)
  echo "run.sh: unknown suite $suite" >&2
  exit 2
  ;;
esac
