# Network namespaces for multi-host tests, sourced by netns_*.sh: a bridge namespace where the
# client runs (br0, 10.213.0.100/24) and one namespace per task (eth0, 10.213.0.(I+1)/24, a veth
# whose peer vbI is a port of br0). Names carry the sourcing script's $$; nothing is added to
# the host's namespace, there is no default route, and the addresses never leave these
# namespaces. Missing root, iproute2 or kernel support: one "SKIPPED: <reason>" line, exit 77.
#
#   source netns_lib.sh
#   netns_setup 4                              # br_ns, task_ns[0..3], $logs
#   netns_start_task 0 "$worker" --cluster ... # in task_ns[0]; stdout/err in $logs/task0.*
#   netns_wait_serving                         # every task printed "serving on" within 20 s
#   netns_stop_tasks                           # SIGTERM, each must exit 0 within 10 s
#   netns_hosts 0 <<< "10.213.0.2 name"        # /etc/hosts of what task_ns[0] runs from now on
# An EXIT trap kills what was started (tasks, $client_pid) and deletes the namespaces and the
# hosts files.

SKIP=77
skip() { echo "SKIPPED: $*"; exit "$SKIP"; }
fail() { echo "FAILED: $*" >&2; netns_dump_logs; exit 1; }

br_ns="af-br-$$"
task_ns=()
created_ns=()   # namespaces made here, deleted on exit (their links go with them)
task_pids=()    # processes started here, killed on exit if still running
client_pid=""
logs=""
hosts_dirs=()     # /etc/netns/<ns> made by netns_hosts, deleted on exit
made_etc_netns="" # set when netns_hosts made /etc/netns itself

netns_cleanup() {
  local pid ns dir
  # timeout(1) passes a SIGTERM on to the client; a SIGKILL would leave the client behind.
  [[ -n $client_pid ]] && kill -TERM "$client_pid" 2> /dev/null && sleep 0.5
  for pid in "${task_pids[@]}" $client_pid; do
    if kill -0 "$pid" 2> /dev/null; then
      kill -KILL "$pid" 2> /dev/null
      wait "$pid" 2> /dev/null
    fi
  done
  for ns in "${created_ns[@]}"; do
    ip netns delete "$ns" 2> /dev/null
  done
  for dir in "${hosts_dirs[@]}"; do
    rm -rf -- "$dir"
  done
  [[ -n $made_etc_netns ]] && rmdir /etc/netns 2> /dev/null
  [[ -n $logs ]] && rm -rf -- "$logs"
}

netns_dump_logs() {
  local f
  [[ -n $logs ]] || return 0
  for f in "$logs"/*; do
    [[ -f $f ]] || continue
    echo "---- ${f##*/}" >&2
    tail -n 40 "$f" >&2
  done
}

# netns_setup N: the bridge namespace and N task namespaces, wired up.
netns_setup() {
  local n=$1 i ns err
  [[ $EUID == 0 ]] || skip "not running as root (network namespaces need root)"
  command -v ip > /dev/null 2>&1 || skip "ip (iproute2) is not installed"
  command -v timeout > /dev/null 2>&1 || skip "timeout (coreutils) is not installed"
  logs=$(mktemp -d "${TMPDIR:-/tmp}/af-netns-$$.XXXXXX") || fail "mktemp failed"
  trap netns_cleanup EXIT
  trap 'exit 1' INT TERM HUP
  # A failure to create the first namespace is the environment (no CAP_SYS_ADMIN, ...): skip.
  if ! err=$(ip netns add "$br_ns" 2>&1); then
    skip "cannot create a network namespace: ${err//$'\n'/ }"
  fi
  created_ns+=("$br_ns")
  for ((i = 0; i < n; ++i)); do
    ns="af-t$i-$$"
    ip netns add "$ns" || fail "ip netns add $ns failed"
    created_ns+=("$ns")
    task_ns+=("$ns")
  done
  # A kernel without bridge or veth support is the environment too: skip.
  if ! err=$(ip -n "$br_ns" link add br0 type bridge 2>&1); then
    skip "cannot create a bridge in a network namespace: ${err//$'\n'/ }"
  fi
  ip -n "$br_ns" link set lo up || fail "lo up in $br_ns"
  ip -n "$br_ns" addr add 10.213.0.100/24 dev br0 || fail "address on br0"
  ip -n "$br_ns" link set br0 up || fail "br0 up"
  for ((i = 0; i < n; ++i)); do
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
}

# netns_start_task I COMMAND ARGS...: runs the command in task namespace I (`ip netns exec`
# execs it, so the saved PID is the command's own).
netns_start_task() {
  local i=$1
  shift
  ip netns exec "${task_ns[$i]}" "$@" > "$logs/task$i.out" 2> "$logs/task$i.err" &
  task_pids[$i]=$!
}

# Every started task prints "serving on" once it listens: at most 20 s for all of them.
netns_wait_serving() {
  local deadline=$((SECONDS + 20)) i
  for i in "${!task_pids[@]}"; do
    until grep -q "serving on" "$logs/task$i.out" 2> /dev/null; do
      kill -0 "${task_pids[$i]}" 2> /dev/null || fail "task $i exited before serving"
      ((SECONDS < deadline)) || fail "task $i not serving within 20 s"
      sleep 0.1
    done
  done
}

# SIGTERM to every task; each must exit 0 within 10 s.
netns_stop_tasks() {
  local pid i rc deadline status=0
  for pid in "${task_pids[@]}"; do
    kill -TERM "$pid" 2> /dev/null
  done
  deadline=$((SECONDS + 10))
  for i in "${!task_pids[@]}"; do
    pid=${task_pids[$i]}
    while kill -0 "$pid" 2> /dev/null && ((SECONDS < deadline)); do
      sleep 0.1
    done
    if kill -0 "$pid" 2> /dev/null; then
      echo "FAILED: task $i still running 10 s after SIGTERM" >&2
      status=1
      continue
    fi
    wait "$pid"
    rc=$?
    if ((rc != 0)); then
      echo "FAILED: task $i exited with $rc after SIGTERM" >&2
      status=1
    fi
  done
  ((status == 0)) || fail "not every task stopped cleanly"
}

# netns_hosts I: standard input becomes the hosts file of task namespace I: `ip netns exec`
# bind-mounts /etc/netns/<ns>/hosts over /etc/hosts for what it starts there. Called again, it
# rewrites the file. The directory (and /etc/netns, when made here) is deleted on exit.
netns_hosts() {
  local ns=${task_ns[$1]:?netns_hosts: no task namespace $1}
  if [[ ! -d /etc/netns ]]; then
    mkdir /etc/netns || fail "mkdir /etc/netns failed"
    made_etc_netns=1
  fi
  if [[ ! -d /etc/netns/$ns ]]; then
    mkdir "/etc/netns/$ns" || fail "mkdir /etc/netns/$ns failed"
    hosts_dirs+=("/etc/netns/$ns")
  fi
  cat > "/etc/netns/$ns/hosts" || fail "writing /etc/netns/$ns/hosts failed"
}
