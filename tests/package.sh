#!/usr/bin/env bash
# The Debian package: cpack builds it from the build tree, it holds every file an operator
# needs, its programs run from an unpacked root with no LD_LIBRARY_PATH (run paths relative to
# the binary), its charter.pc points into wherever it is unpacked, and every flag each program's
# --help names appears in its man page (the pages are made from --help, so they cannot drift).
# Usage: tests/package.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
tmp=$(mktemp -d -t charter-package.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL $*" >&2; fail=1; }

echo "package: cpack -G DEB"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/out" >"$tmp/cpack.log" 2>&1 \
  || { cat "$tmp/cpack.log" >&2; exit 1; }
deb=$(ls "$tmp"/out/charter_*_*.deb)
echo "package: $(basename "$deb") $(stat -c %s "$deb") bytes"

dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/contents"
for f in /usr/bin/charter /usr/bin/charterd /usr/bin/charter-bench /usr/bin/charter-mcp \
  /usr/share/man/man1/charter-mcp.1 /usr/lib/libcharter.so.0 \
  /usr/lib/libcharter.so /usr/include/charter/charter.h /usr/include/charter/receipt.h \
  /usr/include/charter/charter.pb-c.h /usr/lib/pkgconfig/charter.pc \
  /usr/lib/cmake/charter/charterConfig.cmake /usr/lib/cmake/charter/charterTargets.cmake \
  /usr/share/man/man1/charter.1 /usr/share/man/man1/charter-bench.1 \
  /usr/share/man/man8/charterd.8 /usr/share/charter/workflows/procurement.json \
  /usr/share/charter/workflows/support.json /usr/share/charter/workflows/workflow.schema.json \
  /usr/share/charter/workflows/procurement.test.json /usr/share/charter/workflows/support.test.json \
  /usr/share/charter/workflows/payments.json /usr/share/charter/workflows/inbox.json \
  /usr/share/charter/workflows/payments.test.json /usr/share/charter/workflows/inbox.test.json \
  /usr/share/charter/redis.conf /usr/lib/systemd/system/charterd.service \
  /usr/lib/systemd/system/charter-redis.service /usr/share/bash-completion/completions/charter; do
  grep -qx -- "$f" "$tmp/contents" && echo "ok   contains $f" || bad "the package lacks $f"
done

dpkg-deb -f "$deb" Depends >"$tmp/depends"
for d in libc6 libnng1 libhiredis0.14 libprotobuf-c1 libjansson4 libssl3 libcurl4 libsystemd0 libmicrohttpd12 libnghttp2-14 redis-server adduser; do
  grep -q "\\b$d\\b" "$tmp/depends" || bad "Depends lacks $d"
done
dpkg-deb -f "$deb" Recommends | grep -q '\bredis-redisearch\b' || bad "Recommends lacks redis-redisearch"
grep -q 'loadmodule' "$src/deploy/charter-redis.service" || bad "charter-redis.service does not load RediSearch"
dpkg-deb -e "$deb" "$tmp/control"
for s in postinst prerm postrm; do [ -x "$tmp/control/$s" ] || bad "no $s script"; done
grep -q 'adduser --system' "$tmp/control/postinst" || bad "postinst does not create the charter user"

root=$tmp/root
dpkg -x "$deb" "$root"
grep -q "^ExecStart=/usr/bin/charterd " "$root/usr/lib/systemd/system/charterd.service" \
  || bad "charterd.service does not start /usr/bin/charterd"
for p in charter charterd charter-bench charter-mcp; do
  if env -u LD_LIBRARY_PATH "$root/usr/bin/$p" --help >"$tmp/$p.help" 2>&1; then
    echo "ok   $p --help runs from the unpacked root"
  else
    bad "$p --help from the unpacked root: $(head -n 3 "$tmp/$p.help")"
  fi
  # -h is --help for every program, as users of such tools expect.
  env -u LD_LIBRARY_PATH "$root/usr/bin/$p" -h 2>&1 | cmp -s - "$tmp/$p.help" ||
    bad "$p -h does not print what $p --help prints"
done
env -u LD_LIBRARY_PATH "$root/usr/bin/charter" --version | grep -q "libcharter" \
  || bad "charter --version from the unpacked root"
cflags=$(PKG_CONFIG_PATH="$root/usr/lib/pkgconfig" pkg-config --cflags --libs --static charter)
case $cflags in
  *"$root/usr/lib/pkgconfig/../../include/charter"*-lcrypto*) echo "ok   charter.pc: $cflags" ;;
  *) bad "charter.pc does not point into the unpacked root or lacks -lcrypto: $cflags" ;;
esac

# Every flag of --help in the man page (help2man writes "-" as "\-").
check_man() { # program page
  local n=0
  for flag in $(grep -o -- '--[a-z][a-z-]*' "$tmp/$1.help" | sort -u); do
    n=$((n + 1))
    grep -qF -- "$(sed 's/-/\\-/g' <<<"$flag")" "$2" || bad "$(basename "$2") lacks $flag"
  done
  [ "$n" -gt 3 ] || bad "$1 --help names only $n flags"
  echo "ok   $(basename "$2"): $n flags of $1 --help"
}
check_man charter "$root/usr/share/man/man1/charter.1"
check_man charterd "$root/usr/share/man/man8/charterd.8"
check_man charter-bench "$root/usr/share/man/man1/charter-bench.1"
check_man charter-mcp "$root/usr/share/man/man1/charter-mcp.1"
# Every command of `charter help --commands` is in charter(1).
for c in $(env -u LD_LIBRARY_PATH "$root/usr/bin/charter" help --commands); do
  grep -qF -- "$(sed 's/-/\\-/g' <<<"$c")" "$root/usr/share/man/man1/charter.1" || bad "charter.1 lacks command $c"
done
# Every command answers `charter help COMMAND` and `charter COMMAND --help` with its usage, the
# same text both ways, and each option its usage line names is explained.
for c in $(env -u LD_LIBRARY_PATH "$root/usr/bin/charter" help --commands); do
  a=$(env -u LD_LIBRARY_PATH "$root/usr/bin/charter" help "$c") || bad "charter help $c failed"
  b=$(env -u LD_LIBRARY_PATH "$root/usr/bin/charter" "$c" --help) || bad "charter $c --help failed"
  [ "$a" = "$b" ] || bad "charter help $c and charter $c --help differ"
  grep -q "^usage: charter .*$c" <<<"$a" || bad "charter help $c has no usage line"
  for o in $(head -n 1 <<<"$a" | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    grep -q "^  $o " <<<"$a" || bad "charter help $c does not explain $o"
    grep -qF -- "$(sed 's/-/\\-/g' <<<"$o")" "$root/usr/share/man/man1/charter.1" || bad "charter.1 lacks $o of $c"
  done
  grep -qF ".SS $c" "$root/usr/share/man/man1/charter.1" || bad "charter.1 has no section for $c"
done
echo "ok   every command has help with its usage and options"
# The completion script loads and completes commands.
out=$(PATH="$root/usr/bin:$PATH" bash -c '. "$1"; COMP_WORDS=(charter ver); COMP_CWORD=1; _charter; echo "${COMPREPLY[*]}"' _ \
  "$root/usr/share/bash-completion/completions/charter")
[ "$out" = verify-receipt ] && echo "ok   completion: charter ver -> $out" || bad "completion of 'charter ver' gave '$out'"
# Every global option charter --help prints completes, and a global option's value before the
# command (charter --tenant acme get) is not taken for the command.
complete_line() {
  PATH="$root/usr/bin:$PATH" bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _charter
    echo "${COMPREPLY[*]}"' _ "$root/usr/share/bash-completion/completions/charter" "$@"
}
globals=$(complete_line charter --)
for o in $("$root/usr/bin/charter" --help | sed -n '/^global options/,/^commands:/p' |
  grep -oE '^  --[a-z-]+'); do
  grep -qw -- "$o" <<<"$globals" || bad "completion of 'charter --' lacks the global option $o"
done
out=$(complete_line charter --tenant acme --url tcp://127.0.0.1:1 li)
[ "$out" = list ] && echo "ok   completion: charter --tenant acme --url URL li -> $out" ||
  bad "completion of 'charter --tenant acme --url URL li' gave '$out'"

# A fresh install as the unit starts it: the unpacked charterd with the unit's ExecStart (its
# sockets and ports moved into this folder, since nothing here runs as root or under systemd)
# and $STATE_DIRECTORY, as StateDirectory= sets it, on a redis-server of its own. It must make
# its integrity key there, mode 0600, and serve /healthz, /metrics and the console on loopback.
unit=$root/usr/lib/systemd/system/charterd.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
grep -q -- '--http 127.0.0.1:7434' <<<"$exec_start" || bad "charterd.service does not serve HTTP on 127.0.0.1:7434"
grep -q -- 'integrity-key' <<<"$exec_start" && bad "charterd.service names a key option: the default key is the one in its StateDirectory"
grep -qx 'StateDirectory=charter' "$unit" || bad "charterd.service has no StateDirectory=charter"
redis-server --port 0 --unixsocket "$tmp/redis.sock" --unixsocketperm 700 --dir "$tmp" --save '' \
  --appendonly no --logfile "$tmp/redis.log" --daemonize yes --pidfile "$tmp/redis.pid"
for _ in $(seq 100); do redis-cli -s "$tmp/redis.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
mkdir -m 700 "$tmp/state"
args=$(sed -e "s|/usr/bin/charterd|$root/usr/bin/charterd|" \
  -e "s|unix:///run/charter-redis/redis.sock|unix://$tmp/redis.sock|" \
  -e "s|ipc:///run/charter/charterd.sock|ipc://$tmp/c.sock|" \
  -e "s|tcp://127.0.0.1:7433|tcp://127.0.0.1:0|" \
  -e "s|127.0.0.1:7434|127.0.0.1:0|" <<<"$exec_start")
# shellcheck disable=SC2086 # the unit's command line, split as systemd splits it
env -u LD_LIBRARY_PATH STATE_DIRECTORY="$tmp/state" CHARTER_OPERATOR_TOKEN=$(openssl rand -hex 24) \
  $args >"$tmp/charterd.log" 2>&1 &
cpid=$!
# Port 0: the system picks the ports as charterd binds them; charterd logs the HTTP one.
http_port=
for _ in $(seq 200); do
  [ -n "$http_port" ] || [ ! -f "$tmp/charterd.log" ] ||
    http_port=$(sed -n 's|.*serving HTTP/JSON and gRPC on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$tmp/charterd.log")
  [ -n "$http_port" ] && curl -sf "http://127.0.0.1:$http_port/healthz" >/dev/null 2>&1 && break
  kill -0 "$cpid" 2>/dev/null || break
  sleep 0.1
done
if curl -sf "http://127.0.0.1:$http_port/healthz" >/dev/null; then
  echo "ok   a fresh install serves /healthz on 127.0.0.1 (HTTP port $http_port here)"
else
  bad "a fresh install does not serve /healthz: $(cat "$tmp/charterd.log")"
fi
curl -sf "http://127.0.0.1:$http_port/metrics" | grep -q '^charter_' && echo "ok   ... and /metrics" \
  || bad "a fresh install serves no /metrics"
curl -sf "http://127.0.0.1:$http_port/" | grep -qi '<html' && echo "ok   ... and the console" \
  || bad "a fresh install serves no console"
[ "$(stat -c %a "$tmp/state/integrity.key" 2>/dev/null)" = 600 ] \
  && echo "ok   ... and made its integrity key in \$STATE_DIRECTORY, mode 600" \
  || bad "a fresh install made no integrity key in \$STATE_DIRECTORY: $(ls -la "$tmp/state")"
grep -q "made a new integrity key in $tmp/state/integrity.key" "$tmp/charterd.log" \
  || bad "a fresh install does not say it made its key: $(cat "$tmp/charterd.log")"
kill -TERM "$cpid" 2>/dev/null && wait "$cpid" || true
redis-cli -s "$tmp/redis.sock" shutdown nosave >/dev/null 2>&1 || true
exit $fail
