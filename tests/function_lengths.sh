#!/usr/bin/env bash
# A ratchet on function length for the C sources (server/, lib/, cmd/, proto/): a function body
# may hold at most LIMIT lines, except the functions tests/function_lengths.txt lists, each with
# the length it had when the ratchet was set, which it may not exceed. A listed function that
# has shrunk is reported so its line can be lowered (or removed once it fits the limit): the
# list only ever goes down. Prints the distribution of lengths.
# The limit is 70 lines, TigerBeetle's: a function a reader can hold on one screen, which 96 %
# of charter's functions already were when the ratchet was set.
# Usage: tests/function_lengths.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
LIMIT=70
list=tests/function_lengths.txt

# One line per function: "<body lines> <file>:<name>". The style puts a function's braces in
# column one ("{" alone on its line, "}" first on its line); the name is read from the last
# line in column one with a "(" before the "{".
measure() {
  awk '
    /^\{$/ { start = NR; name = prev; next }
    /^\}/  { if (start) { n = NR - start - 1; sub(/\(.*/, "", name); k = split(name, a, /[ *]+/)
                          print n, FILENAME ":" a[k]; start = 0 }
             next }
    { if (!start && $0 !~ /^[ \t]/ && $0 ~ /\(/) prev = $0 }
  ' server/*/*.c lib/*.c cmd/*/*.c proto/*.c
}

declare -A allowed
while read -r n fn; do
  [ -z "${n:-}" ] || [ "${n:0:1}" = "#" ] && continue
  allowed[$fn]=$n
done <"$list"

failed=0
declare -A seen
total=0 over=0
while read -r n fn; do
  total=$((total + 1))
  seen[$fn]=$n
  max=${allowed[$fn]:-$LIMIT}
  if [ "$n" -gt "$max" ]; then
    if [ -n "${allowed[$fn]:-}" ]; then
      echo "function_lengths: $fn has $n lines; the ratchet allows it $max (it may shrink, not grow)" >&2
    else
      echo "function_lengths: $fn has $n lines, above the limit of $LIMIT: split it into its phases" >&2
    fi
    failed=1
  fi
  [ "$n" -gt "$LIMIT" ] && over=$((over + 1))
done < <(measure)

for fn in "${!allowed[@]}"; do
  n=${seen[$fn]:-}
  if [ -z "$n" ]; then
    echo "function_lengths: note: $fn is listed but gone; remove its line from $list"
  elif [ "$n" -le "$LIMIT" ]; then
    echo "function_lengths: note: $fn fits the limit now ($n lines); remove its line from $list"
  elif [ "$n" -lt "${allowed[$fn]}" ]; then
    echo "function_lengths: note: $fn shrank to $n lines; lower its line in $list"
  fi
done

measure | awk -v limit="$LIMIT" '
  { n = $1; if (n <= 25) a++; else if (n <= 50) b++; else if (n <= limit) c++; else if (n <= 100) d++; else e++ }
  END { printf "function_lengths: %d functions: %d of 1-25 lines, %d of 26-50, %d of 51-%d, %d of %d-100, %d above 100\n", NR, a, b, c, limit, d, limit + 1, e }'
[ $failed -eq 0 ] && echo "function_lengths: none above $LIMIT lines but the $over the ratchet lists, and none of those grew"
exit $failed
