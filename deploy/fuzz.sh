#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang, AddressSanitizer and UBSan into
# build-fuzz and runs each for a bounded time on a copy of its committed corpus
# (tests/fuzz/corpus/<target>). Fails on any crash, leak, timeout or out-of-memory; prints the
# executions and the coverage each target reached. The reproducer of a failure is left in
# build-fuzz/findings/<target>/.
# Usage: deploy/fuzz.sh [seconds per target (default 60)] [target...]
# Longer runs: deploy/fuzz.sh 3600 fuzz_request, or run build-fuzz/tests/fuzz/<target>
# directly with libFuzzer's options (-jobs=N, -max_total_time=S) on the corpus folder.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/deps.sh test
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi
build=build-fuzz

t0=$(date +%s)
CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHARTER_FUZZ=ON \
  -DCHARTER_SANITIZE=address,undefined >/dev/null
TIMEFORMAT="fuzz.sh: build took %R s wall, %U s user + %S s system CPU"
time cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >/dev/null
echo "fuzz.sh: built ${targets[*]} in $(($(date +%s) - t0)) s"

export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$PWD/tests/sanitizers/ubsan.supp"
unset ASAN_OPTIONS
failed=0
summary=()
for t in "${targets[@]}"; do
  bin=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
  [ -n "$bin" ] || { echo "fuzz.sh: no program $t in $build" >&2; exit 1; }
  work="$build/corpus/$t"
  findings="$build/findings/$t"
  rm -rf "$work" "$findings"
  mkdir -p "$work" "$findings"
  cp tests/fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  log="$build/$t.log"
  echo "== $t: $seconds s on $(ls "$work" | wc -l) seeds"
  rc=0
  "$bin" "$work" "${dict[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  corpus=$(ls "$work" | wc -l)
  if [ "$rc" -ne 0 ] || ls "$findings"/* >/dev/null 2>&1; then
    failed=1
    echo "fuzz.sh: $t FAILED (exit $rc); reproducer in $findings, log $log" >&2
    grep -E 'ERROR|SUMMARY|runtime error|==[0-9]+==' "$log" | head -20 >&2 || true
    summary+=("$t FAILED execs=${execs:-?} cov=${cov:-?} ft=${ft:-?}")
  else
    summary+=("$t ok execs=${execs:-?} cov=${cov:-?} features=${ft:-?} corpus=$corpus")
  fi
done
printf 'fuzz.sh: %s\n' "${summary[@]}"
exit $failed
