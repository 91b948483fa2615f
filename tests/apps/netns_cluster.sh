#!/usr/bin/env bash
# Multi-host test: SPEC's classic in-graph example (jobs canshu and gongzuo, two tasks each)
# with every task in its own network namespace, so the tasks talk over real (virtual) links
# instead of loopback.
#
#   netns_cluster.sh ACTORFLOW_WORKER IN_GRAPH_LINREG
#
# Layout, all inside namespaces this script creates (names carry $$, nothing is added to the
# host's namespace, no default route, the addresses never leave these namespaces):
#   af-br-$$   a Linux bridge br0 with 10.213.0.100/24: the client runs here
#   af-tI-$$   (I = 0..3) eth0 with 10.213.0.(I+1)/24, a veth whose peer vbI is a port of br0
# Each task namespace runs one actorflow-worker; in_graph_linreg trains 1000 steps against
# them and its last "step W b" line must be within 1e-3 of W = 0.1, b = 0.3; then every
# worker gets SIGTERM and must exit 0 within 10 s.
#
# Needs root, iproute2 and the right to create network namespaces, veths and a bridge. When
# any of these is missing it prints one "SKIPPED: <reason>" line and exits 77, which ctest
# (SKIP_RETURN_CODE 77) reports as skipped. Exit 1 on a failure.
set -u

SKIP=77
worker_bin=${1:?usage: netns_cluster.sh ACTORFLOW_WORKER IN_GRAPH_LINREG}
linreg_bin=${2:?usage: netns_cluster.sh ACTORFLOW_WORKER IN_GRAPH_LINREG}

skip() { echo "SKIPPED: $*"; exit "$SKIP"; }
fail() { echo "FAILED: $*" >&2; exit 1; }

for b in "$worker_bin" "$linreg_bin"; do
  [[ -x $b ]] || fail "$b is not an executable"
done
[[ $EUID == 0 ]] || skip "not running as root (network namespaces need root)"
command -v ip > /dev/null 2>&1 || skip "ip (iproute2) is not installed"
command -v timeout > /dev/null 2>&1 || skip "timeout (coreutils) is not installed"

br_ns="af-br-$$"
task_ns=("af-t0-$$" "af-t1-$$" "af-t2-$$" "af-t3-$$")
created_ns=()   # namespaces this script made, deleted on exit (their links go with them)
worker_pids=()  # processes this script started, killed on exit if still running
client_pid=""
logs=$(mktemp -d "${TMPDIR:-/tmp}/af-netns-$$.XXXXXX") || fail "mktemp failed"

cleanup() {
  local pid ns
  # timeout(1) passes a SIGTERM on to the client; a SIGKILL would leave the client behind.
  [[ -n $client_pid ]] && kill -TERM "$client_pid" 2> /dev/null && sleep 0.5
  for pid in "${worker_pids[@]}" $client_pid; do
    if kill -0 "$pid" 2> /dev/null; then
      kill -KILL "$pid" 2> /dev/null
      wait "$pid" 2> /dev/null
    fi
  done
  for ns in "${created_ns[@]}"; do
    ip netns delete "$ns" 2> /dev/null
  done
  rm -rf -- "$logs"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# Namespaces. A failure to create the first one is the environment (no CAP_SYS_ADMIN, no
# /var/run/netns, ...): skip.
if ! err=$(ip netns add "$br_ns" 2>&1); then
  skip "cannot create a network namespace: ${err//$'\n'/ }"
fi
created_ns+=("$br_ns")
for ns in "${task_ns[@]}"; do
  ip netns add "$ns" || fail "ip netns add $ns failed"
  created_ns+=("$ns")
done

# The bridge and the veth pairs. Both ends are created directly inside our namespaces. A
# kernel without bridge or veth support is the environment too: skip.
if ! err=$(ip -n "$br_ns" link add br0 type bridge 2>&1); then
  skip "cannot create a bridge in a network namespace: ${err//$'\n'/ }"
fi
ip -n "$br_ns" link set lo up || fail "lo up in $br_ns"
ip -n "$br_ns" addr add 10.213.0.100/24 dev br0 || fail "address on br0"
ip -n "$br_ns" link set br0 up || fail "br0 up"
for i in 0 1 2 3; do
  ns=${task_ns[$i]}
  if ! err=$(ip -n "$br_ns" link add "vb$i" type veth peer name eth0 netns "$ns" 2>&1); then
    skip "cannot create a veth pair between network namespaces: ${err//$'\n'/ }"
  fi
  ip -n "$br_ns" link set "vb$i" master br0 || fail "vb$i into br0"
  ip -n "$br_ns" link set "vb$i" up || fail "vb$i up"
  ip -n "$ns" link set lo up || fail "lo up in $ns"
  ip -n "$ns" addr add "10.213.0.$((i + 1))/24" dev eth0 || fail "address in $ns"
  ip -n "$ns" link set eth0 up || fail "eth0 up in $ns"
done

spec='{"canshu": ["10.213.0.1:2221", "10.213.0.2:2222"], "gongzuo": ["10.213.0.3:2223", "10.213.0.4:2224"]}'
jobs=(canshu canshu gongzuo gongzuo)
tasks=(0 1 0 1)

dump_logs() {
  local f
  for f in "$logs"/*; do
    [[ -f $f ]] || continue
    echo "---- ${f##*/}" >&2
    tail -n 40 "$f" >&2
  done
}

# Workers: `ip netns exec` execs the worker, so the saved PID is the worker's own.
for i in 0 1 2 3; do
  ip netns exec "${task_ns[$i]}" "$worker_bin" --cluster "$spec" --job "${jobs[$i]}" \
    --task "${tasks[$i]}" --threads 1 > "$logs/worker$i.out" 2> "$logs/worker$i.err" &
  worker_pids+=("$!")
done

# Every worker prints "serving on" once it listens: wait at most 20 s for all of them.
deadline=$((SECONDS + 20))
for i in 0 1 2 3; do
  until grep -q "serving on" "$logs/worker$i.out" 2> /dev/null; do
    if ! kill -0 "${worker_pids[$i]}" 2> /dev/null; then
      dump_logs
      fail "worker $i (/job:${jobs[$i]}/task:${tasks[$i]}) exited before serving"
    fi
    if ((SECONDS >= deadline)); then
      dump_logs
      fail "worker $i (/job:${jobs[$i]}/task:${tasks[$i]}) not serving within 20 s"
    fi
    sleep 0.1
  done
done
echo "four workers serving in ${task_ns[*]}"

# The client, in the bridge namespace, bounded by timeout(1).
timeout 60 ip netns exec "$br_ns" "$linreg_bin" --cluster "$spec" \
  > "$logs/client.out" 2> "$logs/client.err" &
client_pid=$!
wait "$client_pid"
client_rc=$?
client_pid=""
if ((client_rc != 0)); then
  dump_logs
  ((client_rc == 124)) && fail "in_graph_linreg did not finish within 60 s"
  fail "in_graph_linreg exited with $client_rc"
fi
last=$(tail -n 1 "$logs/client.out")
echo "last line: $last"
if ! awk '{ d1 = $2 - 0.1; d2 = $3 - 0.3; if (d1 < 0) d1 = -d1; if (d2 < 0) d2 = -d2;
            exit !(NF == 3 && d1 < 1e-3 && d2 < 1e-3) }' <<< "$last"; then
  dump_logs
  fail "expected W within 1e-3 of 0.1 and b within 1e-3 of 0.3, got: $last"
fi

# Clean shutdown: SIGTERM each worker, each must exit 0 within 10 s.
for pid in "${worker_pids[@]}"; do
  kill -TERM "$pid" 2> /dev/null
done
deadline=$((SECONDS + 10))
status=0
for i in 0 1 2 3; do
  pid=${worker_pids[$i]}
  while kill -0 "$pid" 2> /dev/null && ((SECONDS < deadline)); do
    sleep 0.1
  done
  if kill -0 "$pid" 2> /dev/null; then
    echo "FAILED: worker $i still running 10 s after SIGTERM" >&2
    status=1
    continue
  fi
  wait "$pid"
  rc=$?
  if ((rc != 0)); then
    echo "FAILED: worker $i exited with $rc after SIGTERM" >&2
    status=1
  fi
done
if ((status != 0)); then
  dump_logs
  exit 1
fi
echo "PASSED: trained across ${#task_ns[@]} network namespaces, every worker exited 0"
exit 0
