#!/usr/bin/env bash
# Makes what `make gpu-check` runs on a GPU machine that has CUDA 13, its driver and PyTorch
# with NVIDIA's pip libraries, but none of our Debian libraries and no network: the GPU test
# and benchmark programs of a CUDA build, the shared libraries they need that such a machine
# lacks (CAF, Cap'n Proto, spdlog, fmt, OpenBLAS), the PyTorch baseline scripts and
# Fashion-MNIST.
#   deploy/gpu/bundle.sh BUILD_DIR BUNDLE_DIR
# Everything goes into BUNDLE_DIR/actorflow-gpu.tar.xz beside check.sh, which unpacks it there:
# the device tool carries at most 64 MiB, and OpenBLAS alone is 36 MiB unpacked.
set -euo pipefail
build=${1:?usage: bundle.sh BUILD_DIR BUNDLE_DIR}
bundle=${2:?usage: bundle.sh BUILD_DIR BUNDLE_DIR}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)

programs=("$build/tests/devices_tests" "$build/apps/actorflow-train" "$build/bench/bench_gpu")
for p in "${programs[@]}"; do
  [[ -x "$p" ]] || { echo "bundle.sh: $p is missing: build it first (make gpu-bundle does)" >&2; exit 1; }
done
if [[ -z "$(find "$build/devices" -name 'libactorflow_cuda.a' -print -quit 2>/dev/null)" ]]; then
  echo "bundle.sh: $build has no CUDA device library (configure it with -DACTORFLOW_WITH_CUDA=ON)" >&2
  exit 1
fi

rm -rf "$bundle"
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/bin" "$staging/lib" "$staging/bench" "$staging/data"
for p in "${programs[@]}"; do
  cp "$p" "$staging/bin/"
  strip --strip-unneeded "$staging/bin/$(basename "$p")"
done
# Libraries the GPU machine's image has itself (glibc, libstdc++ newer than ours, zlib) or gets
# from CUDA and PyTorch's NVIDIA packages stay behind; the rest travel.
keep_out='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcudnn|libnccl|libz\.)'
for p in "${programs[@]}"; do
  ldd "$p" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ ! "$name" =~ $keep_out ]]; then
    cp -L "$path" "$staging/lib/$name"
    strip --strip-unneeded "$staging/lib/$name" 2>/dev/null || true
  fi
done
cp "$source_dir/bench/torch_gpu.py" "$source_dir/bench/torch_mlp.py" "$staging/bench/"
cp /usr/share/datasets/fashion-mnist/*.gz "$staging/data/"
mkdir -p "$bundle"
tar -C "$staging" -cJf "$bundle/actorflow-gpu.tar.xz" bin lib bench data
cp "$source_dir/deploy/gpu/check.sh" "$bundle/"
size=$(du -sm "$bundle" | cut -f1)
echo "bundle.sh: $bundle is ${size} MiB" >&2
# The device tool carries 64 MiB with the working tree (about 6.3 MiB tracked).
if (( size > 57 )); then
  echo "bundle.sh: over 57 MiB: with the working tree it would not travel to the GPU machine" >&2
  exit 1
fi
