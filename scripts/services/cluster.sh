# The three-node RabbitMQ cluster of scripts/services.sh (its cluster-* commands):
# sourced by it, not run on its own; it uses the helpers and STATE defined there,
# and runs under its `set -euo pipefail`.
# shellcheck shell=bash disable=SC2153,SC2164

# --- The three-node cluster ---------------------------------------------------
#
# Each node is Debian's RabbitMQ started from /usr/lib/rabbitmq/bin as the
# calling user (root here), not through /usr/sbin's wrappers: as root those
# switch to the rabbitmq user with su, which sets HOME to /var/lib/rabbitmq
# (so the single node's cookie), runs in that directory and writes the startup
# log over the single node's /var/log/rabbitmq/startup_log.
# A node keeps everything under .services/cluster/push-<letter>. The nodes and
# our rabbitmqctl calls share a cookie of their own (.services/cluster/.erlang.cookie;
# Erlang reads $HOME/.erlang.cookie), not the single node's: with another
# cookie no command can cluster the single node with these by mistake.

CLUSTER_DIR="$STATE/cluster"
CLUSTER_HOST="$(hostname -s)"
RABBITMQ_BIN=/usr/lib/rabbitmq/bin
read -r -a CLUSTER_PORTS <<<"${CLUSTER_AMQP_PORTS:-5681 5682 5683}"

cluster_check_ports() {
  local port
  if [[ ${#CLUSTER_PORTS[@]} -ne 3 ]]; then log "cluster: CLUSTER_AMQP_PORTS needs three ports, got '${CLUSTER_AMQP_PORTS:-}'"; return 64; fi
  for port in "${CLUSTER_PORTS[@]}"; do
    # The distribution port is the AMQP port + 20000, like RabbitMQ's default
    # for one node; 5672 would share the single node's 25672.
    if [[ ! $port =~ ^[0-9]+$ ]] || ((port < 1024 || port > 45535 || port == 5672)); then
      log "cluster: bad AMQP port '$port' (1024-45535, not 5672)"; return 64
    fi
  done
}

cluster_node() { printf 'push-%s@%s\n' "$1" "$CLUSTER_HOST"; }

cluster_port() {
  case "$1" in a) echo "${CLUSTER_PORTS[0]}" ;; b) echo "${CLUSTER_PORTS[1]}" ;; c) echo "${CLUSTER_PORTS[2]}" ;; esac
}

cluster_url() { printf 'amqp://guest:guest@127.0.0.1:%s\n' "$(cluster_port "$1")"; }

# a, b, c, push-a or push-a@<host> -> a
cluster_letter() {
  case "$1" in
    a | b | c) echo "$1" ;;
    push-[abc] | push-[abc]"@$CLUSTER_HOST") local rest=${1#push-}; echo "${rest%%@*}" ;;
    *) log "cluster: no node '$1' (a, b, c, or push-a@$CLUSTER_HOST and so on)"; return 64 ;;
  esac
}

# The environment of node $1's VM and of rabbitmqctl against it. Every file a
# node would otherwise take from /etc/rabbitmq or /var/lib/rabbitmq is named,
# so that none of the single node's configuration or data applies; RABBITMQ_*
# variables of the caller are dropped for the same reason. Only in subshells.
cluster_env() {
  local letter=$1 dir="$CLUSTER_DIR/push-$1" port var
  port=$(cluster_port "$letter")
  for var in $(compgen -e); do if [[ $var == RABBITMQ_* ]]; then unset "$var"; fi; done
  export HOME="$CLUSTER_DIR"
  export RABBITMQ_NODENAME
  RABBITMQ_NODENAME=$(cluster_node "$letter")
  export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$port" RABBITMQ_DIST_PORT="$((port + 20000))"
  export RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" RABBITMQ_PID_FILE="$dir/pid"
  # No plugins: the management plugin would want port 15672 on every node.
  export RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins"
  export RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" RABBITMQ_ADVANCED_CONFIG_FILE="$dir/advanced.config"
  export RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf"
  # Inter-node traffic on the loopback interface only (it listens on all by default).
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS='-kernel inet_dist_use_interface {127,0,0,1}'
  # rabbitmqctl is an Erlang node too and listens on a port of a range,
  # 35672-35682 by default for every rabbitmqctl on the machine; ours take
  # another range so that the single node's users never run short of ports.
  export RABBITMQ_CTL_DIST_PORT_MIN=35690 RABBITMQ_CTL_DIST_PORT_MAX=35719
}

# rabbitmqctl (or another CLI tool with CLUSTER_TOOL) against node $1.
cluster_ctl() {
  local letter=$1; shift
  # A CLI VM that fails to start (no cookie, say) would leave an
  # erl_crash.dump in the caller's directory: none is written.
  (cluster_env "$letter" && ERL_CRASH_DUMP_SECONDS=0 exec "$RABBITMQ_BIN/${CLUSTER_TOOL:-rabbitmqctl}" -n "$(cluster_node "$letter")" "$@")
}

# PIDs of node $1's Erlang VM started from this checkout, found by their
# environment: RabbitMQ 3.10 names the node once booted, so the command line
# does not say which node a beam.smp is.
cluster_vm_pids() {
  local node base proc comm environ
  node=$(cluster_node "$1")
  base="$CLUSTER_DIR/push-$1/mnesia"
  for proc in /proc/[0-9]*; do
    # read, not $(cat): no process per process, the scan stays a few ms.
    comm=""
    read -r comm 2>/dev/null <"$proc/comm" || true
    [[ $comm == beam.smp ]] || continue
    environ=$(tr '\0' '\n' 2>/dev/null <"$proc/environ") || continue
    if grep -qx "RABBITMQ_NODENAME=$node" <<<"$environ" && grep -qx "RABBITMQ_MNESIA_BASE=$base" <<<"$environ"; then
      echo "${proc#/proc/}"
    fi
  done
}

cluster_any_vm() { [[ -n "$(cluster_vm_pids a)$(cluster_vm_pids b)$(cluster_vm_pids c)" ]]; }

cluster_cookie() {
  mkdir -p "$CLUSTER_DIR"
  if [[ -s "$CLUSTER_DIR/.erlang.cookie" ]]; then return; fi
  # Erlang refuses a cookie file that others can read.
  (umask 077 && head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$CLUSTER_DIR/.erlang.cookie")
  chmod 400 "$CLUSTER_DIR/.erlang.cookie"
}

cluster_launch() {
  local letter=$1 dir="$CLUSTER_DIR/push-$1"
  mkdir -p "$dir/log"
  echo '[].' >"$dir/enabled_plugins"
  # Our own file, even this nearly empty one, so that an /etc/rabbitmq/rabbitmq.conf
  # written for the single node never applies here.
  cat >"$dir/rabbitmq.conf" <<CONF
# Written by scripts/services.sh: node push-$letter of the local test cluster.
# Listeners, ports and directories come from the environment (cluster_env).
# guest may connect from 127.0.0.1 only (RabbitMQ's default, said here).
loopback_users.guest = true
CONF
  log "cluster: starting $(cluster_node "$letter") on 127.0.0.1:$(cluster_port "$letter")"
  (
    cluster_env "$letter"
    cd "$dir"
    # Its own session: a Ctrl-C in the terminal that ran cluster-up must not reach it.
    setsid nohup "$RABBITMQ_BIN/rabbitmq-server" >>"$dir/startup.log" 2>&1 </dev/null &
  )
}

# Waits until node $1's application has started and its AMQP port answers.
cluster_await() {
  local letter=$1 deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    # Fails at once until the node has registered with epmd: ask again.
    if cluster_ctl "$letter" -q await_startup --timeout 10 >/dev/null 2>&1; then
      wait_port "$(cluster_port "$letter")" "$(cluster_node "$letter")" 30
      return
    fi
    if [[ -z "$(cluster_vm_pids "$letter")" ]]; then
      log "cluster: $(cluster_node "$letter") exited while starting; the end of $CLUSTER_DIR/push-$letter/startup.log:"
      tail -n 15 "$CLUSTER_DIR/push-$letter/startup.log" >&2 || true
      return 1
    fi
    sleep 0.5
  done
  log "cluster: $(cluster_node "$letter") did not start within $2 s; see $CLUSTER_DIR/push-$letter/log"
  return 1
}

# Nodes as node $1 sees them, sorted, on one line: rabbit_nodes:all() are the
# members, rabbit_nodes:all_running() those whose application runs.
cluster_seen_by() {
  local out
  out=$(cluster_ctl "$1" -q eval "rabbit_nodes:$2().") || return 1
  tr -d "[]' \n" <<<"$out" | tr ',' '\n' | sort | paste -sd ' ' -
}

cluster_all_nodes() { local l; for l in a b c; do cluster_node "$l"; done | sort | paste -sd ' ' -; }

# A letter whose VM runs and whose AMQP port answers, a first.
cluster_running_letter() {
  local letter
  for letter in a b c; do
    if answers "$(cluster_port "$letter")" && [[ -n "$(cluster_vm_pids "$letter")" ]]; then echo "$letter"; return; fi
  done
  log "cluster: no node runs (scripts/services.sh cluster-up)"
  return 1
}

# Node $1 (b or c) leaves whatever cluster it remembers and joins push-a's.
cluster_join() {
  local letter=$1 node a own
  node=$(cluster_node "$letter")
  a=$(cluster_node a)
  own=$(cluster_seen_by "$letter" all)
  log "cluster: $node joins $a"
  cluster_ctl "$letter" -q stop_app >/dev/null
  if [[ "$own" != "$node" ]]; then
    # Left from an earlier cluster: a reset tells the members it knows;
    # force_reset when they cannot be told.
    cluster_ctl "$letter" -q reset >/dev/null 2>&1 || cluster_ctl "$letter" -q force_reset >/dev/null
  fi
  # push-a may still count it as a member (its state was lost): joining
  # would then be taken as done, with the node on its own data.
  if [[ " $(cluster_seen_by a all) " == *" $node "* ]]; then cluster_ctl a -q forget_cluster_node "$node" >/dev/null; fi
  cluster_ctl "$letter" -q join_cluster "$a" >/dev/null
  cluster_ctl "$letter" -q start_app >/dev/null
}

cluster_up() {
  local letter port all running
  local -a launched=()
  rabbitmq_install
  cluster_cookie
  all=$(cluster_all_nodes)
  for letter in a b c; do
    if [[ -n "$(cluster_vm_pids "$letter")" ]]; then continue; fi
    port=$(cluster_port "$letter")
    if answers "$port"; then
      log "cluster: something else answers on 127.0.0.1:$port (another checkout's cluster? its cluster-down)"
      return 1
    fi
    cluster_launch "$letter"
    launched+=("$letter")
    mark_started cluster
  done
  if [[ ${#launched[@]} -eq 0 ]] && running=$(cluster_seen_by a all_running 2>/dev/null) && [[ "$running" == "$all" ]]; then
    log "cluster: already up ($all)"
  else
    # The nodes boot together: a node that was in the cluster waits for
    # its peers' tables before it starts, so one at a time could never finish.
    for letter in a b c; do cluster_await "$letter" 180; done
    for letter in b c; do
      if [[ " $(cluster_seen_by a all_running) " != *" $(cluster_node "$letter") "* ]]; then cluster_join "$letter"; fi
    done
    for _ in $(seq 1 60); do
      running=$(cluster_seen_by a all_running || true)
      if [[ "$running" == "$all" ]]; then break; fi
      sleep 0.5
    done
    if [[ "$running" != "$all" ]]; then
      log "cluster: push-a sees '$running' running, not all three; scripts/services.sh cluster-down, then cluster-up, starts afresh"
      return 1
    fi
    log "cluster: up ($all) after ${SECONDS} s"
  fi
  for letter in a b c; do cluster_url "$letter"; done
}

# Waits until no VM of node $1 is left and its AMQP port is closed.
cluster_wait_gone() {
  local letter=$1 seconds=$2
  for _ in $(seq 1 "$((seconds * 4))"); do
    if [[ -z "$(cluster_vm_pids "$letter")" ]] && ! answers "$(cluster_port "$letter")"; then return 0; fi
    sleep 0.25
  done
  log "cluster: $(cluster_node "$letter") still there after ${seconds} s"
  return 1
}

cluster_kill() {
  local letter pids
  letter=$(cluster_letter "$1")
  pids=$(cluster_vm_pids "$letter")
  if [[ -z "$pids" ]]; then log "cluster: $(cluster_node "$letter") is not running"; return 0; fi
  # SIGKILL: a crash, the node says nothing to its peers or clients.
  # shellcheck disable=SC2086
  kill -9 $pids
  cluster_wait_gone "$letter" 30
  log "cluster: killed $(cluster_node "$letter") (pid $pids)"
}

cluster_start() {
  local letter node peer="" l
  letter=$(cluster_letter "$1")
  node=$(cluster_node "$letter")
  if [[ -n "$(cluster_vm_pids "$letter")" ]]; then
    log "cluster: $node already has a VM"
  else
    if [[ ! -d "$CLUSTER_DIR/push-$letter/mnesia" ]]; then log "cluster: $node has no state; scripts/services.sh cluster-up"; return 1; fi
    cluster_launch "$letter"
  fi
  cluster_await "$letter" 180
  for l in a b c; do
    if [[ $l != "$letter" ]] && answers "$(cluster_port "$l")"; then peer=$l; break; fi
  done
  if [[ -z "$peer" ]]; then log "cluster: $node runs; no other node runs to be back in a cluster with"; return 0; fi
  # Back in the cluster once a peer counts it as running.
  for _ in $(seq 1 120); do
    if [[ " $(cluster_seen_by "$peer" all_running || true) " == *" $node "* ]]; then
      log "cluster: $node runs and is back in the cluster"
      return 0
    fi
    sleep 0.25
  done
  log "cluster: $node runs but $(cluster_node "$peer") does not count it as running"
  return 1
}

cluster_down() {
  local letter pids all=""
  for letter in a b c; do
    pids=$(cluster_vm_pids "$letter")
    all+=" $pids"
  done
  # SIGKILL and no orderly stop: the state is deleted next, and a broken
  # node that would not stop must not survive cluster-down.
  if [[ -n "${all// /}" ]]; then
    log "cluster: killing the nodes' VMs (pids$all)"
    # shellcheck disable=SC2086
    kill -9 $all 2>/dev/null || true
  fi
  for letter in a b c; do cluster_wait_gone "$letter" 30; done
  rm -rf "$CLUSTER_DIR"
  log "cluster: down, state deleted"
}

cluster_status() {
  local letter pids state runner
  for letter in a b c; do
    pids=$(cluster_vm_pids "$letter")
    if [[ -z "$pids" ]]; then state="stopped"
    elif answers "$(cluster_port "$letter")"; then state="running (pid $pids)"
    else state="VM up, AMQP port closed (starting, or application stopped; pid $pids)"
    fi
    printf '%s\t127.0.0.1:%s\t%s\n' "$(cluster_node "$letter")" "$(cluster_port "$letter")" "$state"
  done
  if runner=$(cluster_running_letter 2>/dev/null); then
    printf 'members (seen from %s): %s\n' "$(cluster_node "$runner")" "$(cluster_seen_by "$runner" all)"
    printf 'running (seen from %s): %s\n' "$(cluster_node "$runner")" "$(cluster_seen_by "$runner" all_running)"
  fi
}

# Column $2 of list_queues for queue $1 (in vhost $3, / by default).
cluster_queue_item() {
  local queue=$1 item=$2 vhost=${3:-/} runner out
  runner=$(cluster_running_letter)
  out=$(cluster_ctl "$runner" -q list_queues -p "$vhost" --no-table-headers name "$item" | awk -F '\t' -v q="$queue" '$1 == q { print $2 }')
  if [[ -z "$out" ]]; then log "cluster: no queue '$queue' in vhost $vhost (or no $item)"; return 1; fi
  echo "$out"
}

cluster_leader() { cluster_queue_item "$1" leader "${2:-/}"; }

cluster_members() { cluster_queue_item "$1" members "${2:-/}" | tr -d '[] ' | tr ',' '\n'; }

cluster_online() { cluster_queue_item "$1" online "${2:-/}" | tr -d '[] ' | tr ',' '\n'; }

# The node(s) a client connection is on: by its connection name (what the
# client gave as connection_name) or by its local port number. Each node has
# its own AMQP port, and the connection's server port tells which.
cluster_connection_node() {
  local key=$1 runner ports port letter found=""
  runner=$(cluster_running_letter)
  # Any node lists the connections of the whole cluster. 3.10 has no
  # user_provided_name column: the name is in the client properties, printed
  # as [{"connection_name","the name"},...].
  ports=$(cluster_ctl "$runner" -q list_connections --no-table-headers port peer_port client_properties |
    awk -F '\t' -v k="$key" '(k ~ /^[0-9]+$/ && $2 == k) || index($3, "{\"connection_name\",\"" k "\"}") { print $1 }')
  for port in $ports; do
    for letter in a b c; do
      if [[ "$(cluster_port "$letter")" == "$port" ]]; then found+="$(cluster_node "$letter")"$'\n'; fi
    done
  done
  if [[ -z "$found" ]]; then log "cluster: no connection '$key' on the cluster"; return 1; fi
  printf '%s' "$found" | sort -u
}
