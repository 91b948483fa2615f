#!/usr/bin/env bash
# Installs a built actorflow into a temporary prefix, then configures, builds and runs
# tests/install/consumer against it: proves that another CMake project can
# find_package(actorflow) and link actorflow::actorflow.
#   usage: install_and_consume.sh <actorflow build dir> <actorflow source dir>
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <actorflow build dir> <actorflow source dir>" >&2
  exit 2
fi
for dir in "$1" "$2"; do
  [[ -d "$dir" ]] || { echo "install test FAILED: no such directory: $dir" >&2; exit 1; }
done
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
[[ -f "$build_dir/cmake_install.cmake" ]] \
  || { echo "install test FAILED: $build_dir is not a configured actorflow build dir" >&2; exit 1; }
consumer_src="$source_dir/tests/install/consumer"
cmake_bin=${CMAKE_COMMAND:-cmake}

work=$(mktemp -d "${TMPDIR:-/tmp}/actorflow-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
consumer_build="$work/consumer-build"

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

generator_args=()
if command -v ninja >/dev/null 2>&1; then
  generator_args=(-G Ninja)
fi
launcher_args=()
if command -v ccache >/dev/null 2>&1; then
  launcher_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

echo "== configuring the consumer project against $prefix"
"$cmake_bin" -S "$consumer_src" -B "$consumer_build" "${generator_args[@]}" "${launcher_args[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" 2>&1 \
  || fail "configuring the consumer (find_package(actorflow) with CMAKE_PREFIX_PATH=$prefix) failed" \
          "$work/configure.log"

echo "== building the consumer"
"$cmake_bin" --build "$consumer_build" -j1 >"$work/build.log" 2>&1 \
  || fail "building the consumer against the installed actorflow failed" "$work/build.log"

echo "== running the consumer"
set +e
output=$("$consumer_build/actorflow_consumer" 2>&1)
rc=$?
set -e
echo "$output"
[[ $rc -eq 0 ]] || fail "the consumer exited with status $rc"
grep -qx "actorflow consumer: c = 12" <<<"$output" \
  || fail "the consumer printed no 'actorflow consumer: c = 12'"
echo "install test passed: an installed actorflow is found and linked by another CMake project"
