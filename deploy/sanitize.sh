#!/usr/bin/env bash
# Builds charter twice more, each into its own build folder, and runs the suites under the
# sanitizers, each build's suites against the test Redis its CTest starts (tests/redis_fixture.sh):
#   build-asan  -fsanitize=address,undefined  every suite (the mutation run excepted: it
#               rebuilds the tree per mutation and checks policy, not memory)
#   build-tsan  -fsanitize=thread             the suites that run threads of their own
# ASan runs with its default options (leaks and ODR violations fail); undefined behaviour
# aborts (-fno-sanitize-recover=undefined). The only suppressions are the commented library
# findings in tests/sanitizers/. Prints each phase's wall time.
# Usage: deploy/sanitize.sh [asan|tsan]...   (both when none given)
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/deps.sh test

phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(asan tsan)
jobs=$(nproc)
# The suites that start threads in the test program (charterd's own workers run in every
# suite that starts one; these add client threads, callbacks and races on top).
tsan_suites='^(test_races|test_faults|test_client|test_rpc|test_evidence|test_provider|test_history)$'

export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$PWD/tests/sanitizers/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp"
unset ASAN_OPTIONS LSAN_OPTIONS

# The history checker's load phase, shortened under the sanitizers' slowdown.
export CHARTER_HISTORY_SECONDS=${CHARTER_HISTORY_SECONDS:-20}

declare -A took
failed=0
for phase in "${phases[@]}"; do
  t0=$(date +%s)
  case $phase in
    # Not the mutation run (it rebuilds the tree per mutation and checks policy, not memory),
    # nor the checks that run no charter code (packaging, units, documents, layers, the query
    # library's scopes and stubs, function lengths), nor the Python and TypeScript clients'
    # packaging suites (their charterd is exercised over HTTP by the http_* suites).
    asan) dir=build-asan; flags=address,undefined
          select=(-E '^(mutations|package|systemd_units|queries_readme|rules|layers|lua_scopes|query_stubs|lineage_history|lineage_history_bites|docs_api|docs_drift|function_lengths|python_client|typescript_client)$') ;;
    tsan) dir=build-tsan; flags=thread; select=(-R "$tsan_suites") ;;
    *) echo "sanitize.sh: unknown phase $phase (asan or tsan)" >&2; exit 2 ;;
  esac
  echo "== $phase: building $dir with -fsanitize=$flags"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHARTER_SANITIZE="$flags" >/dev/null
  # CPU time next to wall time: on a shared machine the wall time says little.
  TIMEFORMAT="== $phase: build took %R s wall, %U s user + %S s system CPU"
  time cmake --build "$dir" -j"$jobs" >/dev/null
  t1=$(date +%s)
  echo "== $phase: running suites (built in $((t1 - t0)) s)"
  TIMEFORMAT="== $phase: suites took %R s wall, %U s user + %S s system CPU"
  # A failing phase does not stop the next one: each sanitizer reports what it finds.
  result=passed
  time ctest --test-dir "$dir" --output-on-failure --timeout 900 -j"$jobs" "${select[@]}" ||
    { result=FAILED; failed=1; }
  t2=$(date +%s)
  took[$phase]="$result (build $((t1 - t0)) s, suites $((t2 - t1)) s)"
  echo "== $phase: ${took[$phase]}"
done
for phase in "${phases[@]}"; do echo "sanitize.sh: $phase ${took[$phase]}"; done
exit $failed
