#!/usr/bin/env bash
# Runs one of charterd's HTTP suites in node (CTest label "http"):
#   run.sh setup                      npm ci of the pinned packages (package-lock.json), then the
#                                     Connect client generated from proto/charter.proto into gen/
#                                     (protoc with protoc-gen-es; no buf needed)
#   run.sh connect|metrics|console CHARTERD BUILD_DIR
#                                     that suite against a real charterd (CHARTER_TEST_REDIS, set
#                                     by deploy/test.sh, or an embedded database)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
suite=${1:?usage: run.sh setup|connect|metrics|console [CHARTERD BUILD_DIR]}
case "$suite" in
setup)
  for tool in node npm protoc; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is missing (run deploy/deps.sh test as root)" >&2; exit 1; }
  done
  npm ci --no-audit --no-fund --loglevel=error
  rm -rf gen
  mkdir gen
  protoc --plugin=protoc-gen-es=node_modules/.bin/protoc-gen-es --es_out=gen \
    --es_opt=target=js --proto_path=../../proto charter.proto
  ;;
connect | metrics | console)
  if [ ! -d node_modules ] || [ ! -f gen/charter_pb.js ]; then "$0" setup; fi
  CHARTERD=${2:?charterd path} CHARTER_BUILD_DIR=${3:?build dir} exec node --test-reporter=spec \
    --test "$suite.test.mjs"
  ;;
*)
  echo "run.sh: unknown suite $suite" >&2
  exit 2
  ;;
esac
