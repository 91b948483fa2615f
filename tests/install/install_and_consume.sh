#!/usr/bin/env bash
# Installs a built actorflow into a temporary prefix, checks what the installed headers
# include, then configures, builds and runs a project against the install:
#   consumer  (default) tests/install/consumer: another CMake project can find_package(actorflow)
#             and link actorflow::actorflow;
#   embedding examples/embedding: a CAF application embedding actorflow (embedding_host) and
#             its deterministic test (embedding_deterministic_test) build and pass.
#   between_graph examples/between_graph: a program of its own on the installed training
#             library, run as two workers beside two installed actorflow-worker ps tasks on
#             loopback ports, once, then again on the same checkpoints (it goes on from them),
#             then in synchronous rounds (--sync) from checkpoints of their own.
#   usage: install_and_consume.sh <actorflow build dir> <actorflow source dir> [consumer|embedding|between_graph]
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 <actorflow build dir> <actorflow source dir> [consumer|embedding|between_graph]" >&2
  exit 2
fi
mode=${3:-consumer}
if [[ "$mode" != consumer && "$mode" != embedding && "$mode" != between_graph ]]; then
  echo "usage: $0 <actorflow build dir> <actorflow source dir> [consumer|embedding|between_graph]" >&2
  exit 2
fi
for dir in "$1" "$2"; do
  [[ -d "$dir" ]] || { echo "install test FAILED: no such directory: $dir" >&2; exit 1; }
done
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
[[ -f "$build_dir/cmake_install.cmake" ]] \
  || { echo "install test FAILED: $build_dir is not a configured actorflow build dir" >&2; exit 1; }
case "$mode" in
  consumer) consumer_src="$source_dir/tests/install/consumer" ;;
  embedding) consumer_src="$source_dir/examples/embedding" ;;
  between_graph) consumer_src="$source_dir/examples/between_graph" ;;
esac
cmake_bin=${CMAKE_COMMAND:-cmake}

work=$(mktemp -d "${TMPDIR:-/tmp}/actorflow-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
consumer_build="$work/$mode-build"

fail() {
  echo "install test FAILED: $1" >&2
  if [[ -n "${2:-}" && -f "$2" ]]; then
    echo "----- last lines of $(basename "$2") -----" >&2
    tail -n 60 "$2" >&2
  fi
  exit 1
}

echo "== installing $build_dir into $prefix"
"$cmake_bin" --install "$build_dir" --prefix "$prefix" >"$work/install.log" 2>&1 \
  || fail "cmake --install $build_dir failed" "$work/install.log"
[[ -f "$prefix/lib/cmake/actorflow/actorflowConfig.cmake" ||
   -n "$(find "$prefix" -name actorflowConfig.cmake -print -quit)" ]] \
  || fail "no actorflowConfig.cmake was installed under $prefix"

# Every installed header must include only the standard library, POSIX (<sys/...>), CAF (which
# actorflow::actorflow passes on) and other installed actorflow headers: a consumer gets no
# other include directory (no Eigen, no Cap'n Proto).
include_root="$prefix/include"
[[ -d "$include_root/actorflow" ]] || fail "no headers were installed under $include_root/actorflow"
header_problems=""
standard_header='^<[a-z_0-9]+>$'
while IFS= read -r header; do
  while IFS= read -r included; do
    case "$included" in
      '<caf/'* | '<sys/'*) ;;
      '<actorflow/'*)
        name=${included#<}; name=${name%>}
        [[ -f "$include_root/$name" ]] \
          || header_problems+="${header#$include_root/} includes $included, which is not installed"$'\n' ;;
      '<'*)
        # Standard headers have neither a directory nor an extension.
        [[ "$included" =~ $standard_header ]] \
          || header_problems+="${header#$include_root/} includes $included, from a dependency actorflow does not pass on"$'\n' ;;
      '"'*)
        # The headers include each other as "graph/graph.hpp", from <prefix>/include/actorflow.
        name=${included#\"}; name=${name%\"}
        [[ -f "$include_root/actorflow/$name" || -f "$(dirname "$header")/$name" ]] \
          || header_problems+="${header#$include_root/} includes $included, which is not installed"$'\n' ;;
    esac
  done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*([<"][^>"]+[>"]).*/\1/p' "$header")
done < <(find "$include_root/actorflow" -type f)
[[ -z "$header_problems" ]] || fail "installed headers include what consumers do not get:"$'\n'"$header_problems"

generator_args=()
if command -v ninja >/dev/null 2>&1; then
  generator_args=(-G Ninja)
fi
launcher_args=()
if command -v ccache >/dev/null 2>&1; then
  launcher_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

echo "== configuring $consumer_src against $prefix"
"$cmake_bin" -S "$consumer_src" -B "$consumer_build" "${generator_args[@]}" "${launcher_args[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" 2>&1 \
  || fail "configuring $consumer_src (find_package(actorflow) with CMAKE_PREFIX_PATH=$prefix) failed" \
          "$work/configure.log"

echo "== building $consumer_src"
"$cmake_bin" --build "$consumer_build" -j1 >"$work/build.log" 2>&1 \
  || fail "building $consumer_src against the installed actorflow failed" "$work/build.log"

# Runs a built program with a bound; sets `output` and `rc`.
run_program() {
  echo "== running $1"
  set +e
  output=$(timeout 120 "$consumer_build/$1" 2>&1)
  rc=$?
  set -e
  echo "$output"
  [[ $rc -ne 124 ]] || fail "$1 did not finish within 120 s"
  [[ $rc -eq 0 ]] || fail "$1 exited with status $rc"
}

# Two ps tasks (the installed actorflow-worker) and two workers (the example) on free loopback
# ports; every process is bounded, and the ps tasks this script started are stopped at the end.
# usage: run_between_graph STEPS CHECKPOINT_DIR [--sync]
run_between_graph() {
  local steps=$1 checkpoints=$2
  shift 2
  local spec="{\"ps\": [\"127.0.0.1:${ports[0]}\", \"127.0.0.1:${ports[1]}\"], \"worker\": [\"127.0.0.1:${ports[2]}\", \"127.0.0.1:${ports[3]}\"]}"
  local ps_pids=()
  for task in 0 1; do
    timeout 300 "$prefix/bin/actorflow-worker" --cluster "$spec" --job ps --task $task --threads 1 \
      >"$work/ps$task.log" 2>&1 &
    ps_pids+=($!)
  done
  local worker_pids=()
  for task in 0 1; do
    timeout 180 "$consumer_build/between_graph" --cluster "$spec" --task $task --steps "$steps" \
      --checkpoint-dir "$checkpoints" "$@" >"$work/worker$task.log" 2>&1 &
    worker_pids+=($!)
  done
  local failed=""
  for task in 0 1; do
    wait "${worker_pids[$task]}" || failed+=" worker $task (status $?)"
  done
  kill -TERM "${ps_pids[@]}" 2>/dev/null || true
  wait "${ps_pids[@]}" 2>/dev/null || true
  for task in 0 1; do
    echo "--- worker $task"; cat "$work/worker$task.log"
  done
  [[ -z "$failed" ]] || fail "between_graph failed:$failed" "$work/worker0.log"
}

if [[ "$mode" == between_graph ]]; then
  mapfile -t ports < <(/usr/bin/python3 -c '
import socket
held = [socket.socket() for _ in range(4)]
for s in held: s.bind(("127.0.0.1", 0))
for s in held: print(s.getsockname()[1])')
  echo "== running between_graph: 2 ps, 2 workers, 400 global steps"
  run_between_graph 400 "$work/checkpoints"
  # Each worker stops once it sees the global step at 400; the other's steps in flight may
  # take it a little past (asynchronous workers, as TF's StopAtStepHook). Each worker's last
  # loss is near the noise-free model's 0 (it starts at about 1.3).
  grep -qE "^worker 0: global step 40[0-9], last loss 0\.00[0-9]+$" "$work/worker0.log" \
    || fail "the chief did not end at global step 400-409 with a loss below 0.01" "$work/worker0.log"
  grep -qE "^worker 1: global step 40[0-9], last loss 0\.00[0-9]+$" "$work/worker1.log" \
    || fail "worker 1 did not end at global step 400-409 with a loss below 0.01" "$work/worker1.log"
  # The chief's last checkpoint is of the global step it ended at.
  last=$(sed -nE 's/^worker 0: global step ([0-9]+),.*/\1/p' "$work/worker0.log")
  [[ -f "$work/checkpoints/ckpt-$last.afckpt" ]] || fail "the chief wrote no checkpoint at step $last"
  echo "== running between_graph again on the same checkpoints, to 500 global steps"
  run_between_graph 500 "$work/checkpoints"
  grep -q "restored .*ckpt-$last.afckpt: training goes on from global step $last" "$work/worker0.log" \
    || fail "the chief did not restore the checkpoint of step $last" "$work/worker0.log"
  grep -qE "^worker 0: global step 50[0-9], last loss 0\.00[0-9]+$" "$work/worker0.log" \
    || fail "the chief did not go on to global step 500" "$work/worker0.log"
  echo "== running between_graph --sync: 200 rounds of both workers' gradients"
  run_between_graph 200 "$work/sync-checkpoints" --sync
  # The rounds are the global step: both stop at exactly 200, and the chief's checkpoint holds it.
  for task in 0 1; do
    grep -qE "^worker $task: global step 200, last loss 0\.00[0-9]+$" "$work/worker$task.log" \
      || fail "worker $task did not end at global step 200 with a loss below 0.01" "$work/worker$task.log"
  done
  [[ -f "$work/sync-checkpoints/ckpt-200.afckpt" ]] || fail "the chief wrote no checkpoint at round 200"
  echo "install test passed: examples/between_graph trains on the installed training library"
elif [[ "$mode" == consumer ]]; then
  run_program actorflow_consumer
  grep -qx "actorflow consumer: c = 12" <<<"$output" \
    || fail "the consumer printed no 'actorflow consumer: c = 12'"
  echo "install test passed: an installed actorflow is found and linked by another CMake project"
else
  run_program embedding_host
  number='-?[0-9.]+(e-?[0-9]+)?'
  grep -qxE "trained W=$number b=$number" <<<"$output" \
    || fail "embedding_host printed no 'trained W=<w> b=<b>' line"
  grep -qxE "pulled W=$number" <<<"$output" || fail "embedding_host printed no 'pulled W=<w>' line"
  grep -qx "pushed W=0.5 read back 0.5" <<<"$output" \
    || fail "embedding_host printed no 'pushed W=0.5 read back 0.5' line"
  run_program embedding_deterministic_test
  echo "install test passed: examples/embedding builds against an installed actorflow and runs"
fi
