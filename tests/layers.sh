#!/usr/bin/env bash
# Checks the include structure of server/: no include cycle between files, no cycle between
# modules (x.c and x.h are one module) beyond the known ones listed below, and the domain never
# reaches the RPC layer (call.h, dispatch.h, services.h, wire.h, transport.h), directly or
# through another header. And the database layer's boundary: the raw call by name
# (server/store_raw.h) is included only by server/store.c and tests/ (the generated stubs live in
# the build's gen folder), no other server/ or client/ file calls it, and none names a query
# function by a "charter_<name>" string literal (the stubs of queries.h are the way to call one).
# Prints every violation; exits 1 when there is one.
# Usage: tests/layers.sh [SOURCE_DIR]
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
cd "$root/server"

# Module cycles being taken apart where they live (the model's provider types).
# An entry that no longer occurs is reported so it can be removed.
known_cycle_edges=("model provider")

# The domain: these must not include the RPC layer, even indirectly.
domain=(status.h role.h ids.h ids.c config.h config.c guard.h guard.c gate.h gate.c deliver.h
        deliver.c runner.h runner.c replay.h registry.h store.h workflow.h evlog.h)
rpc=(call.h dispatch.h services.h wire.h transport.h)

failed=0
declare -A deps
edges=""
for f in *.c *.h; do
  list=""
  while read -r h; do
    [ -f "$h" ] || continue
    list+="$h "
    edges+="$f $h"$'\n'
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
  deps[$f]=$list
done

# 1. File cycles: tsort names the files of a loop.
if ! out=$(printf '%s' "$edges" | tsort 2>&1 >/dev/null) || [ -n "$out" ]; then
  echo "layers: include cycle between files:" >&2
  echo "$out" >&2
  failed=1
fi

# 2. Module cycles, the known ones aside.
mods=$(printf '%s' "$edges" | sed 's/\.[ch]\( \|$\)/\1/g' | awk '$1 != $2' | sort -u)
for e in "${known_cycle_edges[@]}"; do
  if ! grep -qx "$e" <<<"$mods"; then
    echo "layers: note: the known module edge \"$e\" is gone; remove it from tests/layers.sh"
  fi
  mods=$(grep -vx "$e" <<<"$mods" || true)
done
if ! out=$(printf '%s\n' "$mods" | tsort 2>&1 >/dev/null) || [ -n "$out" ]; then
  echo "layers: include cycle between modules:" >&2
  echo "$out" >&2
  failed=1
fi

# 3. The domain does not depend on the RPC layer.
for f in "${domain[@]}"; do
  [ -f "$f" ] || continue
  declare -A seen=()
  todo=("$f")
  while [ ${#todo[@]} -gt 0 ]; do
    cur=${todo[0]}
    todo=("${todo[@]:1}")
    for h in ${deps[$cur]:-}; do
      [ -n "${seen[$h]:-}" ] && continue
      seen[$h]=$cur
      todo+=("$h")
    done
  done
  for r in "${rpc[@]}"; do
    if [ -n "${seen[$r]:-}" ]; then
      echo "layers: $f reaches the RPC layer: $r (included by ${seen[$r]})" >&2
      failed=1
    fi
  done
  unset seen
done

# 4. The raw call by name stays in the database layer.
cd "$root"
shopt -s nullglob
outside=(server/*.c server/*.h client/*.c client/*.h proto/*.c proto/*.h)
n_raw=0
for f in "${outside[@]}"; do
  case $f in server/store.c | server/store_raw.h) continue ;; esac
  if grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]*/)?store_raw\.h[">]' "$f"; then
    echo "layers: $f includes store_raw.h, the raw call private to server/store.c and the stubs" >&2
    failed=1
  fi
  while IFS= read -r hit; do
    echo "layers: $f:$hit: a raw call by name; call the function's stub (queries.h)" >&2
    failed=1
    n_raw=$((n_raw + 1))
  done < <(grep -nE '\b(store_call|store_call_list|store_call_json|store_call_on)[[:space:]]*\(' "$f" |
    cut -d: -f1)
done
mapfile -t fns < <(sed -n "s/^    {'\(charter_[a-z0-9_]*\)', .*/\1/p" queries/registry.lua)
if [ "${#fns[@]}" -eq 0 ]; then
  echo "layers: no function found in queries/registry.lua's FUNCTIONS" >&2
  failed=1
fi
pattern="\"($(IFS='|'; echo "${fns[*]}"))\""
for f in "${outside[@]}"; do
  case $f in server/store.c | server/store_raw.h) continue ;; esac
  while IFS= read -r hit; do
    echo "layers: $f:$hit: names a query function by a string literal; call its stub (queries.h)" >&2
    failed=1
  done < <(grep -noE "$pattern" "$f" | cut -d: -f1,2)
done

if [ $failed -eq 0 ]; then
  echo "layers: no include cycle; the domain (${#domain[@]} files) does not include the RPC layer;"
  echo "layers: store_raw.h is included by server/store.c and tests only; no server/ or client/ file"
  echo "layers: calls a query function by name (${#fns[@]} functions registered)"
fi
exit $failed
