#!/usr/bin/env bash
# Runs every benchmark executable (bench_*) in a build directory and prints their JSON lines.
#   bench/run_all.sh [build_dir/bench]     # default: build/bench
# Builds nothing. Result lines go to stdout, diagnostics to stderr; exits non-zero when any
# benchmark fails (the others still run).
set -u

dir="${1:-build/bench}"
if [[ ! -d "$dir" ]]; then
  echo "run_all.sh: no directory '$dir' (build the bench_* targets first)" >&2
  exit 2
fi

shopt -s nullglob
benches=()
for path in "$dir"/bench_*; do
  [[ -f "$path" && -x "$path" ]] && benches+=("$path")
done
if (( ${#benches[@]} == 0 )); then
  echo "run_all.sh: no bench_* executables in '$dir'" >&2
  exit 2
fi

failed=0
for path in "${benches[@]}"; do
  echo "run_all.sh: running $(basename "$path")" >&2
  if ! "$path"; then
    echo "run_all.sh: $(basename "$path") failed" >&2
    failed=1
  fi
done
exit "$failed"
