#!/usr/bin/env bash
# The systemd units pass `systemd-analyze verify` (offline: no systemd as PID 1 needed) with
# their ExecStart pointed at this build's charterd and this tree's redis.conf, and keep the
# hardening the README promises. Usage: tests/systemd_units.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
if ! command -v systemd-analyze >/dev/null; then
  echo "systemd_units: systemd-analyze is missing (apt-get install systemd)" >&2
  exit 1
fi
tmp=$(mktemp -d -t charter-units.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for unit in charterd.service charter-redis.service; do
  sed -e "s|/usr/bin/charterd|$build/charterd|" -e "s|/usr/share/charter/redis.conf|$src/deploy/redis.conf|" \
    "$src/deploy/$unit" >"$tmp/$unit"
done
fail=0
# --man=no: the man pages are checked by the package test, from the package.
if ! (cd "$tmp" && systemd-analyze verify --man=no ./charterd.service ./charter-redis.service); then
  echo "FAIL systemd-analyze verify" >&2
  fail=1
fi
need() { # unit line
  if grep -qx -- "$2" "$tmp/$1"; then echo "ok   $1: $2"; else echo "FAIL $1 lacks: $2" >&2; fail=1; fi
}
for unit in charterd.service charter-redis.service; do
  for line in 'Type=notify' 'User=charter' 'NoNewPrivileges=yes' 'ProtectSystem=strict' \
    'ProtectHome=yes' 'PrivateTmp=yes' 'CapabilityBoundingSet=' 'SystemCallFilter=@system-service' \
    'RestrictNamespaces=yes' 'UMask=0077'; do
    need "$unit" "$line"
  done
done
need charterd.service 'StateDirectory=charter'
need charterd.service 'Requires=charter-redis.service'
need charter-redis.service 'StateDirectory=charter-redis'
# redis.conf names no path: the unit passes them.
if grep -Eq '^(dir|unixsocket|logfile|pidfile) +/' "$src/deploy/redis.conf"; then
  echo "FAIL redis.conf names a path" >&2
  fail=1
fi
# Exposure as systemd rates it (offline); printed for the README, not judged beyond "OK" or better.
for unit in charterd.service charter-redis.service; do
  level=$(cd "$tmp" && systemd-analyze security --offline=true "./$unit" 2>/dev/null | grep 'Overall exposure' || true)
  echo "$level"
  case $level in *SAFE* | *OK*) ;; *) echo "FAIL $unit exposure: $level" >&2; fail=1 ;; esac
done
exit $fail
