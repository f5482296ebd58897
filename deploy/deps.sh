#!/usr/bin/env bash
# Installs the Debian packages charter builds and runs with, when they are missing.
# As root it runs apt-get; otherwise it prints the apt-get line to run and exits 1.
set -euo pipefail

packages=(build-essential cmake pkg-config protobuf-c-compiler libprotobuf-c-dev libnng-dev
          libhiredis-dev libjansson-dev libssl-dev libcurl4-openssl-dev libcunit1-dev
          redis-server redis-tools redis-redisearch jq openssl
          libsystemd-dev help2man systemd
          # the fuzz targets (clang, libFuzzer and the sanitizer runtimes) and readable stacks
          clang libclang-rt-dev llvm
          nodejs protobuf-compiler prometheus chromium) # the HTTP suites (tests/connect)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Debian's nodejs comes without npm; the NodeSource build carries its own.
command -v npm >/dev/null 2>&1 || dpkg-query -W -f='${Status}' npm 2>/dev/null | grep -q 'install ok installed' ||
  missing+=(npm)
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
