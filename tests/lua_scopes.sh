#!/usr/bin/env bash
# Checks the scopes of the query library (queries/*.lua, concatenated into one Lua chunk): each
# file declares exactly one top-level local, its module table named after the file, then one
# `do ... end` block that ends on the file's last line and holds everything else (the block's
# body is not indented, so its top level is the lines that begin in column one). Lua allows 200
# active locals per function, the chunk included; this keeps the chunk's top level at one local
# per file and prints how many locals each file's block holds at its own top level, failing when
# one comes within 50 of the limit.
# Usage: tests/lua_scopes.sh SOURCE.lua...   (the library's sources in library order)
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: tests/lua_scopes.sh SOURCE.lua..." >&2; exit 2; }
limit=150
failed=0
top=0
for f in "$@"; do
  name=$(basename "$f" .lua)
  # Comment lines and long comments ("--[[ ... ]]") carry no code.
  out=$(awk -v name="$name" -v file="$f" -v limit="$limit" '
    BEGIN { state = "head"; blk = 0; bad = ""; last = "" }
    /^--\[\[/ { inlong = 1 }
    inlong { if ($0 ~ /\]\]/) inlong = 0; next }
    /^#!lua/ || /^--/ || /^[ \t]*$/ { next }
    {
      last = $0
      if (state == "head") {
        if (name == "registry" && $0 ~ /^do( |$)/) { state = "block"; next }
        if ($0 == "local " name " = {}") { state = "table"; next }
        bad = bad "\n  line " NR ": code before the module table \"local " name " = {}\""; state = "block"; next
      }
      if (state == "table") {
        if ($0 ~ /^do( |$)/) { state = "block"; next }
        bad = bad "\n  line " NR ": the module table is not followed by \"do\""; state = "block"; next
      }
      if ($0 ~ /^local /) {
        line = $0; sub(/^local (function )?/, "", line); sub(/[ (=].*/, "", line)
        n = split(line, names, ",")
        blk += n
      }
    }
    END {
      if (state != "block" || last != "end") bad = bad "\n  the file does not end with the block\x27s \"end\""
      printf "%d%s", blk, bad
    }' "$f")
  count=${out%%$'\n'*}
  problems=${out#"$count"}
  [ "$name" = registry ] || top=$((top + 1))
  printf 'lua_scopes: %-18s %3d locals in its block\n' "$name.lua" "$count"
  if [ -n "$problems" ]; then
    echo "lua_scopes: $f:$problems" >&2
    failed=1
  fi
  if [ "$count" -gt "$limit" ]; then
    echo "lua_scopes: $f: $count locals at the top of its block (Lua allows 200; keep it under $limit)" >&2
    failed=1
  fi
done
echo "lua_scopes: $top locals at the chunk's top level (one module table per file)"
exit $failed
