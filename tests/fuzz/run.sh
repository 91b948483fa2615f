#!/usr/bin/env bash
# Runs one fuzzer over its corpus kept in the repo for a bounded time, writing new inputs to a
# scratch directory (never into the repo), and fails on any crash, leak or sanitizer report.
#   tests/fuzz/run.sh FUZZER_BINARY CORPUS_DIR SECONDS [OUT_DIR]
# OUT_DIR keeps what it found (for `make fuzz`, to merge into the corpus by hand).
set -euo pipefail
binary=$1 corpus=$2 seconds=$3
out=${4:-}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if [ -n "$out" ]; then mkdir -p "$out"; else out=$scratch/new; mkdir -p "$out"; fi
# -rss_limit_mb: the decoders must refuse before allocating; 1 GiB catches one that does not.
exec "$binary" -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$scratch/" "$out" "$corpus"
