#!/usr/bin/env bash
# Runs everything GPU-related from a bundle (deploy/gpu/bundle.sh) on a GPU machine, within
# 8 minutes (its parts are bounded at 450 s, each killed 10 s after its bound): the kernel tests on the GPU, the MLP and CNN trained on it, and bench_gpu beside
# PyTorch CUDA. Writes each part's output to OUT_DIR, and a summary to stdout: eight files at
# most, what the device tool brings back. Needs only bash, coreutils and python3 (not make, not
# xz: python unpacks when tar cannot).
#   bash deploy/gpu/check.sh BUNDLE_DIR OUT_DIR
set -uo pipefail
out=${2:?usage: check.sh BUNDLE_DIR OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
python=${PYTHON:-python3}
packed=${1:?usage: check.sh BUNDLE_DIR OUT_DIR}/actorflow-gpu.tar.xz
[[ $packed == /* ]] || packed=$PWD/$packed # tar -C would read a relative one from elsewhere
bundle=$(mktemp -d /tmp/actorflow-gpu.XXXXXX)
if ! tar -C "$bundle" -xJf "$packed" 2>/dev/null &&
   ! "$python" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
       "$packed" "$bundle"; then
  echo "check.sh: cannot unpack $packed" | tee "$out/summary.txt" >&2
  exit 1
fi

# NVIDIA's pip libraries (cuDNN, NCCL, cuBLAS) where PyTorch has them, the toolkit's runtime,
# then ours.
nvidia_libs=$("$python" - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
print(":".join(sorted({os.path.dirname(p) for r in roots for p in glob.glob(os.path.join(r, "*", "lib", "*.so*"))})))
PY
)
if [[ -z "$nvidia_libs" ]]; then
  # The image's PyTorch environment, should python3 be another one.
  nvidia_libs=$(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib 2>/dev/null | paste -sd:)
fi
export LD_LIBRARY_PATH="$bundle/lib:${nvidia_libs}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export ACTORFLOW_BENCH_PYTHON="$python" ACTORFLOW_BENCH_SCRIPTS="$bundle/bench"
# The programs read Fashion-MNIST where `make` installs it.
if [[ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
  mkdir -p /usr/share/datasets && ln -sfn "$bundle/data" /usr/share/datasets/fashion-mnist
fi

failed=0
run() { # name, seconds, command...
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  # A process stuck in the driver may ignore SIGTERM: KILL it 10 s later.
  timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc after $((SECONDS - start)) s" | tee -a "$out/summary.txt"
  (( rc == 0 )) || failed=1
}

{
  nvidia-smi -L
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  # A library a program cannot find shows here, before it exits 127.
  ldd "$bundle"/bin/* | grep -E 'not found|cudnn|cudart|:$'
} >"$out/machine.txt" 2>&1
run kernel_tests 150 env ACTORFLOW_KERNEL_TEST_DEVICE=GPU ACTORFLOW_VERBOSE=1 \
  "$bundle/bin/devices_tests" "[kernels]"
# Training's own files (metrics, curve, event files) go back packed as one.
run mlp_train 60 "$bundle/bin/actorflow-train" --model mlp --gpus 1 --epochs 1 \
  --log-device-placement --output-dir "$bundle/out/mlp"
run cnn_train 90 "$bundle/bin/actorflow-train" --model cnn --gpus 1 --epochs 1 \
  --log-device-placement --output-dir "$bundle/out/cnn"
run bench_gpu 150 "$bundle/bin/bench_gpu" GPU
grep -h '^{' "$out/bench_gpu.log" >"$out/bench.jsonl"
tar -C "$bundle/out" -czf "$out/train-outputs.tgz" . 2>/dev/null
grep -h 'test accuracy\|examples/s:' "$out/mlp_train.log" "$out/cnn_train.log" | tee -a "$out/summary.txt"
# --gpus soft-places onto the CPU where no GPU opens: an exit 0 alone proves nothing.
for model in mlp cnn; do
  echo "$model: $(grep -cE ': /job:[^ ]*/device:GPU:0$' "$out/${model}_train.log") placements on GPU:0"
done | tee -a "$out/summary.txt"
grep -h '^{' "$out/bench_gpu.log" | tee -a "$out/summary.txt"
exit $failed
