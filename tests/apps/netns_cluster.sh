#!/usr/bin/env bash
# Multi-host test: SPEC's classic in-graph example (jobs canshu and gongzuo, two tasks each)
# with every task in its own network namespace (netns_lib.sh), so the tasks talk over real
# (virtual) links instead of loopback.
#
#   netns_cluster.sh ACTORFLOW_WORKER IN_GRAPH_LINREG
#
# Each task namespace runs one actorflow-worker; in_graph_linreg, in the bridge namespace,
# trains 1000 steps against them and its last "step W b" line must be within 1e-3 of W = 0.1,
# b = 0.3; then every worker gets SIGTERM and must exit 0 within 10 s. Skipped (exit 77, one
# "SKIPPED: <reason>" line) without root, iproute2 or namespace support. Exit 1 on a failure.
set -u

worker_bin=${1:?usage: netns_cluster.sh ACTORFLOW_WORKER IN_GRAPH_LINREG}
linreg_bin=${2:?usage: netns_cluster.sh ACTORFLOW_WORKER IN_GRAPH_LINREG}
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"

for b in "$worker_bin" "$linreg_bin"; do
  [[ -x $b ]] || fail "$b is not an executable"
done
netns_setup 4

spec='{"canshu": ["10.213.0.1:2221", "10.213.0.2:2222"], "gongzuo": ["10.213.0.3:2223", "10.213.0.4:2224"]}'
jobs=(canshu canshu gongzuo gongzuo)
tasks=(0 1 0 1)
for i in 0 1 2 3; do
  netns_start_task "$i" "$worker_bin" --cluster "$spec" --job "${jobs[$i]}" --task "${tasks[$i]}" --threads 1
done
netns_wait_serving
echo "four workers serving in ${task_ns[*]}"

# The client, in the bridge namespace, bounded by timeout(1).
timeout 60 ip netns exec "$br_ns" "$linreg_bin" --cluster "$spec" \
  > "$logs/client.out" 2> "$logs/client.err" &
client_pid=$!
wait "$client_pid"
client_rc=$?
client_pid=""
if ((client_rc != 0)); then
  ((client_rc == 124)) && fail "in_graph_linreg did not finish within 60 s"
  fail "in_graph_linreg exited with $client_rc"
fi
last=$(tail -n 1 "$logs/client.out")
echo "last line: $last"
if ! awk '{ d1 = $2 - 0.1; d2 = $3 - 0.3; if (d1 < 0) d1 = -d1; if (d2 < 0) d2 = -d2;
            exit !(NF == 3 && d1 < 1e-3 && d2 < 1e-3) }' <<< "$last"; then
  fail "expected W within 1e-3 of 0.1 and b within 1e-3 of 0.3, got: $last"
fi

netns_stop_tasks
echo "PASSED: trained across ${#task_ns[@]} network namespaces, every worker exited 0"
exit 0
