#!/usr/bin/env bash
# Checks server/ against its room table (docs/ARCHITECTURE.md): every file lives in a room, and
# every #include "room/file.h" of a file reaches only its own room or a room below it. Also: no
# include cycle between files or modules (x.c and x.h are one module), only db/ includes
# hiredis, policy/ (the pure rules) includes no I/O header (hiredis, NNG, curl, sockets, the
# clock), and no file calls assert() (compiled out under NDEBUG; INVARIANT stays on). And the
# database boundary: the raw call by name (db/store_raw.h) is included only by db/store.c (the
# generated stubs live in the build's gen folder) and tests/, no other file of server/, lib/,
# cmd/ or proto/ calls it, and none names a query function by a "charter_<name>" string literal
# (the stubs of queries.h are the way to call one). Prints the include graph by room and every
# violation; exits 1 when there is one.
# Usage: tests/layers.sh [SOURCE_DIR]
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
cd "$root/server"

# The rooms, lowest first: a room may include only itself and the rooms before it.
rooms=(core policy db workflow evidence gates runs rpc main)
declare -A rank
for i in "${!rooms[@]}"; do rank[${rooms[$i]}]=$i; done

# Headers only db/ may include, and headers policy/ may not include.
db_only='^(hiredis/|hiredis\.h)'
io_headers='^(hiredis/|nng/|curl/|systemd/|time\.h$|sys/time\.h$|sys/socket\.h$|netdb\.h$|unistd\.h$|fcntl\.h$|signal\.h$|pthread\.h$|sys/stat\.h$)'
# The evaluator's fingerprint prefix is computed once (pthread_once); that is no I/O.
policy_allowed='^policy/evaluator\.c pthread\.h$'

failed=0
fail() { echo "layers: $*" >&2; failed=1; }
edges=""
declare -A room_edges

shopt -s nullglob
for f in *; do
  [ -d "$f" ] || fail "$f is not in a room (server/ holds only the rooms)"
  [ -d "$f" ] && [ -z "${rank[$f]:-}" ] && fail "server/$f/ is not a room of the table (${rooms[*]})"
done
for room in "${rooms[@]}"; do
  [ -d "$room" ] || { fail "the room $room/ is missing"; continue; }
  for path in "$room"/*.c "$room"/*.h; do
    while read -r inc; do
      case $inc in
      */*)
        to=${inc%%/*}
        if [ -n "${rank[$to]:-}" ]; then
          [ -f "$inc" ] || fail "$path includes $inc, which does not exist"
          edges+="$path $inc"$'\n'
          [ "$to" != "$room" ] && room_edges["$room -> $to"]=$((${room_edges["$room -> $to"]:-0} + 1))
          if [ "${rank[$to]}" -gt "${rank[$room]}" ]; then
            fail "$path ($room) includes $inc: $to is above $room"
          fi
        fi
        ;;
      *)
        # A bare name must be a generated or proto/ header, never a file of a room.
        for r in "${rooms[@]}"; do
          [ -f "$r/$inc" ] && fail "$path includes \"$inc\": write \"$r/$inc\" (the include names the room)"
        done
        ;;
      esac
    done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$path")
    # assert() checks nothing under NDEBUG, which the shipped builds define: INVARIANT stays on.
    if grep -nE '(^|[^_[:alnum:]])assert\(' "$path" | grep -v '^[0-9]*: *\*' >/dev/null; then
      fail "$path calls assert(): use INVARIANT (core/invariant.h), which stays on in every build"
    fi
    while read -r sys; do
      if [[ $sys =~ $db_only ]] && [ "$room" != db ]; then
        fail "$path includes <$sys>: only db/ talks to Redis"
      fi
      if [ "$room" = policy ] && [[ $sys =~ $io_headers ]] && ! [[ "$path $sys" =~ $policy_allowed ]]; then
        fail "$path includes <$sys>: policy/ is pure (facts in, decisions out; no I/O or clock)"
      fi
    done < <(sed -n 's/^#include <\([^>]*\)>.*/\1/p' "$path")
  done
done

# No include cycle between files, nor between modules (x.c and x.h are one module).
if ! out=$(printf '%s' "$edges" | tsort 2>&1 >/dev/null) || [ -n "$out" ]; then
  fail "include cycle between files:"$'\n'"$out"
fi
mods=$(printf '%s' "$edges" | sed 's/\.[ch]\( \|$\)/\1/g' | awk '$1 != $2' | sort -u)
if ! out=$(printf '%s\n' "$mods" | tsort 2>&1 >/dev/null) || [ -n "$out" ]; then
  fail "include cycle between modules:"$'\n'"$out"
fi

# The raw call by name stays in the database layer.
cd "$root"
outside=(server/*/*.c server/*/*.h lib/*.c lib/*.h cmd/*/*.c cmd/*/*.h proto/*.c proto/*.h)
for f in "${outside[@]}"; do
  case $f in server/db/store.c | server/db/store_raw.h) continue ;; esac
  if grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]*/)?store_raw\.h[">]' "$f"; then
    fail "$f includes store_raw.h, the raw call private to db/store.c and the stubs"
  fi
  while IFS= read -r hit; do
    fail "$f:$hit: a raw call by name; call the function's stub (queries.h)"
  done < <(grep -nE '\b(store_call|store_call_list|store_call_json|store_call_on)[[:space:]]*\(' "$f" |
    cut -d: -f1)
done
mapfile -t fns < <(sed -n "s/^    {'\(charter_[a-z0-9_]*\)', .*/\1/p" queries/registry.lua)
[ "${#fns[@]}" -gt 0 ] || fail "no function found in queries/registry.lua's FUNCTIONS"
pattern="\"($(IFS='|'; echo "${fns[*]}"))\""
for f in "${outside[@]}"; do
  case $f in server/db/store.c | server/db/store_raw.h) continue ;; esac
  while IFS= read -r hit; do
    fail "$f:$hit: names a query function by a string literal; call its stub (queries.h)"
  done < <(grep -noE "$pattern" "$f" | cut -d: -f1,2)
done

echo "layers: includes between rooms (room -> room it reaches: includes)"
for e in $(printf '%s\n' "${!room_edges[@]}" | sed 's/ -> /->/' | sort -t'>' -k1,1); do
  printf '  %-22s %3d\n' "${e/->/ -> }" "${room_edges[${e/->/ -> }]}"
done
if [ $failed -eq 0 ]; then
  n=$(find "${rooms[@]/#/server/}" -name '*.[ch]' | wc -l)
  echo "layers: $n files in ${#rooms[@]} rooms (${rooms[*]}); no upward include, no cycle; only db/ includes hiredis; policy/ includes no I/O header; no assert()"
  echo "layers: the raw call by name stays in db/ (${#fns[@]} query functions, each called through its stub)"
fi
exit $failed
