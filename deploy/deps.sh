#!/usr/bin/env bash
# Installs the Debian packages charter builds and runs with, when they are missing.
# Usage: deploy/deps.sh          the build and the demo (deploy/build.sh, deploy/demo.sh)
#        deploy/deps.sh test     those, plus what the tests need (deploy/test.sh, sanitize.sh,
#                                fuzz.sh): RediSearch, the fuzz and sanitizer toolchain, the
#                                HTTP suites' node, protoc, promtool and chromium, what
#                                builds and installs the Python client's wheel offline, and
#                                python3-grpcio for the gRPC suite
# As root it runs apt-get; otherwise it prints the apt-get line to run and exits 1.
set -euo pipefail

packages=(build-essential cmake pkg-config protobuf-c-compiler libprotobuf-c-dev libnng-dev
          libhiredis-dev libjansson-dev libssl-dev libcurl4-openssl-dev libcunit1-dev
          libsystemd-dev libmicrohttpd-dev libnghttp2-dev help2man redis-server redis-tools jq openssl)
case ${1:-} in
  "") ;;
  test)
    packages+=(redis-redisearch systemd # the retrieval suites; systemd-analyze (systemd_units)
               # the fuzz targets (clang, libFuzzer and the sanitizer runtimes) and readable stacks
               clang libclang-rt-dev llvm
               nodejs protobuf-compiler prometheus chromium # the HTTP suites (tests/connect)
               # the Python client (tests/python): its runtime, the wheel's build backend, and a
               # venv to install it into with pip --no-index
               python3-protobuf python3-setuptools python3-wheel python3-pip python3-venv
               python3-grpcio) # the gRPC suite (tests/grpc) as a stock gRPC client
    ;;
  *) echo "deps.sh: unknown set \"$1\" (none for the build, or test)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Debian's nodejs comes without npm; the NodeSource build carries its own.
if [ "${1:-}" = test ]; then
  command -v npm >/dev/null 2>&1 || dpkg-query -W -f='${Status}' npm 2>/dev/null | grep -q 'install ok installed' ||
    missing+=(npm)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "charter: missing packages: ${missing[*]}" >&2
  echo "charter: install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "charter: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
