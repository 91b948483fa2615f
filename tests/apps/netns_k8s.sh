#!/usr/bin/env bash
# Multi-host test of what actorflow-k8s's manifests describe, run without Kubernetes: for each
# mode (async, then sync between-graph training; 1 ps, 2 workers, one short epoch)
#   - actorflow-k8s renders the manifests and k8s_pods.py reads them back: every Job's pod, its
#     container command, env, volume mounts and restart policy, and the DNS names (headless
#     Services, the pod's own hostname.subdomain) that lead to it; it refuses what this test
#     does not emulate;
#   - each pod gets a network namespace of its own (netns_lib.sh, 10.213.0.(I+1)) whose
#     /etc/hosts maps every one of those names to the namespace of the pod it leads to, as the
#     cluster's DNS would;
#   - each pod's command runs there with its env only (and PATH, HOME, HOSTNAME), its
#     hostname, chrooted into a root of the host's top-level directories with the pod's volumes
#     mounted at their mountPath: an emptyDir is a fresh directory per pod, a PVC one per claim;
#     BIN_DIR comes first on PATH, where the image has actorflow's programs. Pods start
#     together, workers first (Kubernetes promises no order);
#   - every worker pod must exit 0 within 120 s, the chief having written metrics.csv, its
#     graph's picture and a checkpoint to its /logs and printed its test accuracy; then the ps
#     pod must exit 0 by itself within 20 s. With restartPolicy OnFailure an exit 0 completes
#     the pod's Job and anything else would have Kubernetes restart it, so every exit must be 0;
#     and nothing may be left running in the namespaces.
# In-graph mode is not run: its ps and worker Jobs run actorflow-worker, which serves until it
# is stopped, so those Jobs never complete by themselves.
#
#   netns_k8s.sh ACTORFLOW_K8S BIN_DIR       (BIN_DIR: actorflow-worker and actorflow-train)
#
# Skipped (exit 77, one "SKIPPED: <reason>" line) without root, iproute2, namespace support or
# python3's yaml. Exit 1 on a failure, after the last lines of every pod's output.
set -u

usage="usage: netns_k8s.sh ACTORFLOW_K8S BIN_DIR"
k8s_bin=${1:?$usage}
bin_dir=${2:?$usage}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/netns_lib.sh"

[[ -x $k8s_bin ]] || fail "$k8s_bin is not an executable"
[[ -d $bin_dir ]] || fail "$bin_dir is not a directory"
bin_dir=$(cd "$bin_dir" && pwd)
for b in actorflow-worker actorflow-train; do
  [[ -x $bin_dir/$b ]] || fail "$bin_dir/$b is not an executable"
done
for tool in /usr/bin/python3 unshare chroot mount; do
  command -v "$tool" > /dev/null 2>&1 || skip "$tool is not installed"
done
/usr/bin/python3 -c 'import yaml' 2> /dev/null || skip "python3's yaml (python3-yaml) is not installed"

# Short training: one epoch, one thread per worker (the ps takes the manifests' default, a
# thread per core).
train_flags="--threads 1"
pods=3 # 1 ps and 2 workers: a Job each
netns_setup "$pods"
# The pods' roots: empty directories here, each a tmpfs in its pod's own mount namespace. They
# are removed with rmdir only, never recursively: nothing of a pod's mounts is ever seen here.
roots=$(mktemp -d "${TMPDIR:-/tmp}/af-k8s-roots-$$.XXXXXX") || fail "mktemp failed"
trap 'netns_cleanup; rmdir "$roots"/* "$roots" 2> /dev/null' EXIT

# What runs as a pod, in its namespace after `ip netns exec NS unshare --mount --uts`:
#   pod_runtime ROOT HOSTNAME N  PATH SOURCE MODE (N times)  NAME=VALUE...  COMMAND...
# It builds the pod's root on a tmpfs at ROOT: the host's top-level directories bound in (so
# the /etc/hosts `ip netns exec` mounted comes along), but a volume's mountPath is the volume's
# directory; then execs the container's command there with that env alone. Every step is an
# exec, so the test's PID of the pod is the container's process.
pod_runtime='
set -eu
root=$1 name=$2 n=$3
shift 3
declare -A volume=() mode=()
for ((k = 0; k < n; ++k)); do
  volume[$1]=$2 mode[$1]=$3
  shift 3
done
mount -t tmpfs -o mode=755 pod-root "$root"
for entry in /*; do
  [[ -n ${volume[$entry]+set} ]] && continue
  if [[ -L $entry ]]; then
    ln -s "$(readlink "$entry")" "$root$entry"
  elif [[ -d $entry ]]; then
    mkdir "$root$entry"
    mount --rbind "$entry" "$root$entry"
  fi # plain files at the top level are not part of the image
done
for at in "${!volume[@]}"; do
  mkdir "$root$at"
  mount --bind "${volume[$at]}" "$root$at"
  [[ ${mode[$at]} == ro ]] && mount -o remount,bind,ro "$root$at"
done
hostname "$name"
exec chroot "$root" env -i "$@"
'

# host_path I PATH: where PATH in pod I lies here (through its volumes), or nothing.
host_path() {
  local -n mounts_of="pod_mounts_$1"
  local path=$2 k
  for ((k = 0; k < ${#mounts_of[@]}; k += 4)); do
    if [[ $path == "${mounts_of[k]}" || $path == "${mounts_of[k]}"/* ]]; then
      echo "${volume_dirs[$1:${mounts_of[k]}]}${path#"${mounts_of[k]}"}"
      return 0
    fi
  done
  return 1
}

# flag_of I FLAG: the value of FLAG in pod I's command (sh -c "exec ..."), or nothing.
flag_of() {
  local -n command_of="pod_command_$1"
  [[ ${command_of[*]} =~ (^| )"$2"\ ([^ ]+) ]] && echo "${BASH_REMATCH[2]}"
}

# reap I: true once pod I has exited, its exit code in exit_codes[I] and the seconds since the
# run started in exited_at[I]; false while it runs.
reap() {
  local i=$1
  [[ -n ${exit_codes[$i]+set} ]] && return 0
  kill -0 "${task_pids[$i]}" 2> /dev/null && return 1
  wait "${task_pids[$i]}"
  exit_codes[$i]=$?
  exited_at[$i]=$((SECONDS - started))
  unset 'task_pids[i]' # reaped: the cleanup must not signal its PID again
  return 0
}

# wait_pods BOUND I...: each pod I exits within BOUND s (from now). Meanwhile a pod in must_run
# that exits other than 0 fails the test at once (the others would wait for it in vain).
must_run=()
wait_pods() {
  local bound=$1 deadline=$((SECONDS + $1)) i running
  shift
  while true; do
    for i in "${must_run[@]}"; do
      if reap "$i" && ((exit_codes[$i] != 0)); then
        fail "$tag: ${pod_name[i]} exited ${exit_codes[$i]} after ${exited_at[$i]} s, while the workers trained"
      fi
    done
    running=()
    for i in "$@"; do
      reap "$i" || running+=("${pod_name[i]}")
    done
    ((${#running[@]} == 0)) && return 0
    ((SECONDS < deadline)) || fail "$tag: ${running[*]} still running after $bound s"
    sleep 0.2
  done
}

# run_manifests TAG FLAGS...: renders with FLAGS, runs the pods, checks how each ended.
run_manifests() {
  local tag=$1 i k ns pid rc name started=$SECONDS
  shift
  local dir=$logs/$tag
  mkdir -p "$dir" || fail "mkdir $dir"
  "$k8s_bin" "$@" > "$dir/manifests.yaml" 2> "$logs/$tag-actorflow-k8s.err" ||
    fail "$tag: actorflow-k8s $* exited with $?"
  local parsed
  parsed=$(/usr/bin/python3 "$here/k8s_pods.py" "$dir/manifests.yaml" 2> "$logs/$tag-k8s_pods.err") ||
    fail "$tag: k8s_pods.py refused the manifests of actorflow-k8s $*"
  unset pod_count pod_name pod_hostname pod_restart pod_task
  for ((i = 0; i < pods; ++i)); do
    unset "pod_command_$i" "pod_env_$i" "pod_mounts_$i" "pod_names_$i"
  done
  eval "$parsed"
  ((pod_count == pods)) || fail "$tag: $pod_count Jobs, this test made $pods namespaces"

  # The cluster's DNS: every pod's names, at its namespace's address, in every namespace.
  local hosts=$'127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
  for ((i = 0; i < pods; ++i)); do
    local -n names="pod_names_$i"
    ((${#names[@]} > 0)) && hosts+="10.213.0.$((i + 1))"$'\t'"${names[*]}"$'\n'
  done
  for ((i = 0; i < pods; ++i)); do
    netns_hosts "$i" <<< "$hosts"
  done

  # Volumes: an emptyDir per pod (and run), a directory per PVC claim shared by its pods.
  declare -gA volume_dirs=()
  local -a mount_args
  for ((i = pods - 1; i >= 0; --i)); do
    local -n mounts="pod_mounts_$i" cmd="pod_command_$i" env_of="pod_env_$i"
    mount_args=()
    for ((k = 0; k < ${#mounts[@]}; k += 4)); do
      if [[ ${mounts[k + 1]} == emptyDir ]]; then
        volume_dirs[$i:${mounts[k]}]=$dir/volumes/${pod_name[i]}/${mounts[k + 2]}
      else
        volume_dirs[$i:${mounts[k]}]=$dir/claims/${mounts[k + 2]}
      fi
      mkdir -p "${volume_dirs[$i:${mounts[k]}]}" || fail "mkdir ${volume_dirs[$i:${mounts[k]}]}"
      mount_args+=("${mounts[k]}" "${volume_dirs[$i:${mounts[k]}]}" "${mounts[k + 3]}")
    done
    name=${pod_hostname[i]:-${pod_name[i]}}
    mkdir -p "$roots/$i" || fail "mkdir $roots/$i"
    ip netns exec "${task_ns[$i]}" unshare --mount --uts --propagation private \
      bash -c "$pod_runtime" pod-runtime "$roots/$i" "$name" "$((${#mount_args[@]} / 3))" \
      "${mount_args[@]}" PATH="$bin_dir:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      HOME=/root HOSTNAME="$name" "${env_of[@]}" "${cmd[@]}" \
      > "$logs/$tag-${pod_name[i]}.out" 2> "$logs/$tag-${pod_name[i]}.err" &
    task_pids[$i]=$!
  done
  echo "$tag: started ${pod_name[*]} in ${task_ns[*]}"

  declare -gA exit_codes=() exited_at=()
  local workers=() ps=() chief=""
  for ((i = 0; i < pods; ++i)); do
    case ${pod_task[i]} in
      "ps "*) ps+=("$i") ;;
      "worker 0") chief=$i workers+=("$i") ;;
      *) workers+=("$i") ;;
    esac
  done
  [[ -n $chief && ${#ps[@]} -gt 0 ]] || fail "$tag: expected ps pods and a chief (worker 0): ${pod_task[*]}"
  local worker_bound=120 ps_bound=20
  # The ps may stop a moment before the last worker's process is gone: it stops once every
  # worker has said it finished.
  must_run=("${ps[@]}")
  wait_pods "$worker_bound" "${workers[@]}"
  must_run=()
  wait_pods "$ps_bound" "${ps[@]}"

  # Each exit as the pod's restart policy expects: 0 completes the Job; with OnFailure any other
  # code would have Kubernetes run the pod again, with Never it would fail the Job.
  local bad=()
  for ((i = 0; i < pods; ++i)); do
    rc=${exit_codes[$i]}
    echo "$tag: ${pod_name[i]} (${pod_task[i]}, restartPolicy ${pod_restart[i]}) exited $rc after ${exited_at[$i]} s"
    ((rc == 0)) || bad+=("${pod_name[i]} exited $rc, which restartPolicy ${pod_restart[i]} does not take as done")
  done
  ((${#bad[@]} == 0)) || fail "$tag: ${bad[*]}"
  # Nothing left behind in any namespace (the pods' processes were their namespaces' only ones).
  for ns in "$br_ns" "${task_ns[@]}"; do
    pid=$(ip netns pids "$ns" 2> /dev/null | tr '\n' ' ')
    [[ -z $pid ]] || fail "$tag: processes still running in $ns after every pod exited: $pid"
  done

  # The chief's work, in its /logs volume.
  local out metrics graph checkpoints accuracy
  out=$(flag_of "$chief" --output-dir) || fail "$tag: the chief's command has no --output-dir"
  metrics=$(host_path "$chief" "$out/metrics.csv") || fail "$tag: the chief's $out is on no volume"
  [[ -f $metrics ]] && (($(wc -l < "$metrics") >= 2)) ||
    fail "$tag: the chief wrote no metrics rows to $out/metrics.csv"
  graph=$(flag_of "$chief" --graph-out) && graph=$(host_path "$chief" "$graph") && [[ -s $graph ]] ||
    fail "$tag: the chief drew no graph (--graph-out)"
  checkpoints=$(flag_of "$chief" --checkpoint-dir) && checkpoints=$(host_path "$chief" "$checkpoints") &&
    [[ -n $(ls -A "$checkpoints" 2> /dev/null) ]] || fail "$tag: the chief wrote no checkpoint"
  accuracy=$(sed -n 's/^test accuracy: \([0-9.]*\)$/\1/p' "$logs/$tag-${pod_name[chief]}.out" | tail -n 1)
  [[ -n $accuracy ]] || fail "$tag: the chief printed no test accuracy"
  awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.5) }' || fail "$tag: test accuracy $accuracy, expected 0.5 or more"
  for i in "${workers[@]}"; do
    grep -q '^examples/s: ' "$logs/$tag-${pod_name[i]}.out" || fail "$tag: ${pod_name[i]} printed no examples/s"
  done
  echo "$tag: trained in $((SECONDS - started)) s, test accuracy $accuracy, $(($(wc -l < "$metrics") - 1)) metrics rows"
}

run_manifests async --name demo --ps 1 --workers 2 --epochs 1 --train-flags "$train_flags"
run_manifests sync --name demo --ps 1 --workers 2 --epochs 1 --mode sync --train-flags "$train_flags"
echo "PASSED: the pods actorflow-k8s renders (async and sync) trained across ${#task_ns[@]} network namespaces, every one exited 0 and nothing was left running"
exit 0
