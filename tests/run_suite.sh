#!/usr/bin/env bash
# The whole test suite, as `make test` and CI run it: ctest over BUILD_DIR with JOBS at a time,
# and two guards that make a shrinking suite fail instead of passing unseen:
#  - ctest must list at least as many tests as tests/expected_test_count records (raise that
#    number in the commit that adds tests; lowering it is a decision to say in that commit);
#  - no test may end "Not Run" (a missing program, a failed fixture) or skipped, except the GPU
#    tests, which skip (exit 77, saying why) where the machine has no GPU.
# usage: tests/run_suite.sh BUILD_DIR JOBS
set -uo pipefail
build_dir=${1:?usage: run_suite.sh BUILD_DIR JOBS}
jobs=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
expected=$(tr -dc '0-9' < "$here/expected_test_count")

cd "$build_dir" || exit 2
listed=$(ctest -N | sed -n 's/^Total Tests: *\([0-9]*\).*/\1/p')
if [ -z "$listed" ]; then
  echo "run_suite: ctest -N listed no tests in $build_dir" >&2
  exit 1
fi
if [ "$listed" -lt "$expected" ]; then
  echo "run_suite: ctest lists $listed tests, fewer than the $expected recorded in tests/expected_test_count: a test disappeared" >&2
  exit 1
fi
if [ "$listed" -gt "$expected" ]; then
  echo "run_suite: ctest lists $listed tests, more than the $expected recorded: raise tests/expected_test_count to $listed"
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
ctest --output-on-failure -j "$jobs" --timeout 600 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

# After "The following tests did not run:", one line per test: "  12 - name (Skipped)".
not_run=$(sed -n '/^The following tests did not run:/,/^$/p' "$log" | grep -E '^[[:space:]]+[0-9]+ - ' || true)
unexpected=$(printf '%s\n' "$not_run" | grep -v -E '^[[:space:]]+[0-9]+ - .*GPU.*\(Skipped\)$' | grep -v '^$' || true)
if [ -n "$unexpected" ]; then
  echo "run_suite: tests that did not run (only the GPU tests may skip, on a machine without one):" >&2
  printf '%s\n' "$unexpected" >&2
  [ "$status" -ne 0 ] || status=1
fi
ran=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p' "$log" | tail -1)
if [ -n "$ran" ] && [ "$ran" -lt "$expected" ]; then
  echo "run_suite: ctest ran $ran tests, fewer than the $expected recorded" >&2
  [ "$status" -ne 0 ] || status=1
fi
exit "$status"
