#!/usr/bin/env bash
# Makes sure RabbitMQ and a MongoDB-compatible server are up on 127.0.0.1 for
# development and tests, on a machine without Docker.
#
#   scripts/services.sh up      start what is not running (idempotent), wait until both answer
#   scripts/services.sh down    stop everything this script started: what `up` started, the three-node
#                               cluster (deleting its state) and private stand-ins left by tests
#   scripts/services.sh status  say what answers
#   scripts/services.sh running print which of rabbitmq, mongo, cluster, private-mongo run now, one a line
#   scripts/services.sh stop NAME...  stop those (names as `running` prints them), whoever started them
#   scripts/services.sh wipe    down, then delete every service's state (the stand-in's data and jars
#                               stay only with WIPE_KEEP_JARS=1): the next `up` starts as on a new machine
#
# For the fault tests, which take the local services away under load:
#   scripts/services.sh stop-rabbitmq | start-rabbitmq   stop/start the broker application (rabbitmqctl stop_app/start_app)
#   scripts/services.sh stop-mongo | start-mongo         stop (SIGTERM) / start the MongoDB stand-in
#   scripts/services.sh add-amqp-user NAME PASSWORD      (re)create a broker user with full permissions on /
#
# For tests that need a MongoDB stand-in of their own (to pause it without
# touching the shared one on 27017):
#   scripts/services.sh mongo-jars       fetch the stand-in's jars if missing; print the folder they are in
#   scripts/services.sh private-mongo    run a stand-in in the foreground: in memory, on 127.0.0.1, any free
#                                        port; prints "listening on 127.0.0.1:PORT" (scripts/mongo-stand-in.java)
#
# A service is skipped when its URL is given (AMQP_URL / MONGODB_URL) or when
# something already answers on its port.
# - RabbitMQ: Debian's rabbitmq-server, installed with apt-get when missing.
# - MongoDB: the mongo-java-server stand-in (de.bwaldvogel:mongo-java-server-h2-backend
#   from Maven Central, H2 file-backed, localhost:27017), fetched with Maven.
#
# A three-node RabbitMQ cluster beside the single node, for tests of quorum
# queues and node failures (the single node on 5672 is never touched):
#   scripts/services.sh cluster-up            start push-a, push-b, push-c@<short hostname> (idempotent), cluster
#                                             them, wait until all three run; print their AMQP URLs on stdout
#   scripts/services.sh cluster-down          kill the three nodes and delete their state (.services/cluster)
#   scripts/services.sh cluster-status        which nodes run, and the membership seen from a running one
#   scripts/services.sh cluster-kill NODE     SIGKILL a node's Erlang VM (a crash), wait until its port is closed
#   scripts/services.sh cluster-start NODE    start a killed/stopped node, wait until it runs in the cluster again
#   scripts/services.sh cluster-leader QUEUE  print the node that leads a quorum queue
#   scripts/services.sh cluster-members QUEUE print a quorum queue's member nodes, one a line
#   scripts/services.sh cluster-online QUEUE  print the members of a quorum queue that are online, one a line
#   scripts/services.sh cluster-connection-node NAME|CLIENT_PORT   print the node a client connection is on
#   scripts/services.sh cluster-ctl NODE ARGS...  run rabbitmqctl against a node (with the cluster's cookie;
#                                             CLUSTER_TOOL=rabbitmq-queues or rabbitmq-diagnostics runs that tool)
# NODE is a, b, c, or a full node name; QUEUE is in vhost / unless a VHOST follows it.
# Ports: AMQP 5681-5683 on 127.0.0.1 (CLUSTER_AMQP_PORTS: three ports separated by
# spaces), Erlang distribution at AMQP port + 20000, no plugins. guest/guest from
# 127.0.0.1. A node stopped with `cluster-ctl NODE stop_app` is started again with
# `cluster-ctl NODE start_app`: cluster-up and cluster-start start nodes whose VM is gone.
set -euo pipefail
# A service outlives the test run that started it only on purpose
# (KEEP_SERVICES=1); scripts/run-tests.sh kills what carries its run's mark,
# so the services started here do not carry it, and are stopped in order.
# Which run launched what is written down instead (started-by-run), so that
# a run stops only what it launched.
RUN_MARK="${MATRIX_PUSH_TEST_RUN:-}"
unset MATRIX_PUSH_TEST_RUN

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STATE="$ROOT/.services"
STARTED="$STATE/started"
MONGO_DIR="$STATE/mongo"
MONGO_VERSION="1.47.0"
mkdir -p "$STATE"
touch "$STARTED"

log() { printf 'services: %s\n' "$*" >&2; }

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local port=$1 what=$2 seconds=$3
  for _ in $(seq 1 "$((seconds * 4))"); do
    if answers "$port"; then return 0; fi
    sleep 0.25
  done
  log "$what did not answer on port $port within ${seconds}s"
  return 1
}

mark_started() {
  grep -qx "$1" "$STARTED" || echo "$1" >>"$STARTED"
  if [[ -n "$RUN_MARK" ]]; then echo "$1 $RUN_MARK" >>"$STATE/started-by-run"; fi
}

rabbitmq_install() {
  if ! command -v rabbitmq-server >/dev/null 2>&1 && [[ ! -x /usr/sbin/rabbitmq-server ]]; then
    log "RabbitMQ: installing Debian's rabbitmq-server"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq rabbitmq-server >/dev/null
  fi
}

rabbitmq_up() {
  if [[ -n "${AMQP_URL:-}" ]]; then log "RabbitMQ: using AMQP_URL"; return; fi
  if answers 5672; then log "RabbitMQ: already answering on 5672"; return; fi
  rabbitmq_install
  export PATH="$PATH:/usr/sbin"
  log "RabbitMQ: starting"
  rabbitmq-server -detached
  mark_started rabbitmq
  # The node takes a moment to register before await_startup can reach it;
  # until then rabbitmqctl fails at once, so ask again.
  local ready=0
  for _ in $(seq 1 60); do
    if rabbitmqctl -q await_startup --timeout 10 >/dev/null 2>&1; then ready=1; break; fi
    sleep 1
  done
  if [[ $ready -ne 1 ]]; then log "RabbitMQ did not finish starting; see /var/log/rabbitmq"; return 1; fi
  wait_port 5672 RabbitMQ 60
  log "RabbitMQ: up on 127.0.0.1:5672"
}

mongo_jars() {
  if compgen -G "$MONGO_DIR/lib/mongo-java-server-h2-backend-*.jar" >/dev/null; then return; fi
  log "MongoDB stand-in: fetching mongo-java-server $MONGO_VERSION from Maven Central"
  mkdir -p "$MONGO_DIR"
  cat >"$MONGO_DIR/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.matrix-push-worker</groupId>
  <artifactId>mongo-stand-in</artifactId>
  <version>1</version>
  <dependencies>
    <dependency>
      <groupId>de.bwaldvogel</groupId>
      <artifactId>mongo-java-server-h2-backend</artifactId>
      <version>$MONGO_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-simple</artifactId>
      <version>2.0.17</version>
    </dependency>
  </dependencies>
</project>
POM
  mvn -q -B -f "$MONGO_DIR/pom.xml" dependency:copy-dependencies -DoutputDirectory="$MONGO_DIR/lib" -DincludeScope=runtime
}

mongo_up() {
  if [[ -n "${MONGODB_URL:-}" ]]; then log "MongoDB: using MONGODB_URL"; return; fi
  if answers 27017; then log "MongoDB: already answering on 27017"; return; fi
  mongo_jars
  # After stop-mongo, start again on the data file the stopped server used
  # (it may belong to another checkout that started it).
  local data="$MONGO_DIR/data.mv"
  if [[ -f "$MONGO_DIR/stopped-data-file" ]]; then data="$(cat "$MONGO_DIR/stopped-data-file")"; rm -f "$MONGO_DIR/stopped-data-file"; fi
  log "MongoDB stand-in: starting (data in $data)"
  setsid nohup java -Xmx1g -cp "$MONGO_DIR/lib/*" de.bwaldvogel.mongo.H2MongoServer "$data" \
    >"$MONGO_DIR/server.log" 2>&1 </dev/null &
  echo $! >"$MONGO_DIR/pid"
  mark_started mongo
  wait_port 27017 "MongoDB stand-in" 60
  log "MongoDB stand-in: up on 127.0.0.1:27017"
}

down() {
  if grep -qx mongo "$STARTED"; then stop_service mongo; fi
  if grep -qx rabbitmq "$STARTED"; then stop_service rabbitmq; fi
  # Only this script starts these two, so they always go.
  if [[ -n "$(private_mongo_pids)" ]]; then stop_service private-mongo; fi
  if cluster_any_vm; then stop_service cluster; fi
  : >"$STARTED"
}

# The single broker's VM: Debian's rabbitmq-server runs it as the rabbitmq
# user (the cluster's nodes run as the caller), also while its application
# is stopped (stop-rabbitmq) and the port is closed.
rabbitmq_vm_pids() { pgrep -u rabbitmq -x beam.smp 2>/dev/null || true; }

# Stand-ins that tests run in the foreground (private-mongo), left behind
# when the test process was killed; maybe still paused with SIGSTOP.
private_mongo_pids() { pgrep -f "^java .*$ROOT/scripts/mongo-stand-in.java" 2>/dev/null || true; }

cluster_any_vm() { [[ -n "$(cluster_vm_pids a)$(cluster_vm_pids b)$(cluster_vm_pids c)" ]]; }

running() {
  if answers 5672 || [[ -n "$(rabbitmq_vm_pids)" ]]; then echo rabbitmq; fi
  if answers 27017 || [[ -n "$(mongo_pid || true)" ]]; then echo mongo; fi
  if cluster_any_vm; then echo cluster; fi
  if [[ -n "$(private_mongo_pids)" ]]; then echo private-mongo; fi
}

stop_service() {
  local pid pids
  case "$1" in
    mongo)
      pid="$(mongo_pid || true)"
      if [[ -n "$pid" ]]; then
        log "MongoDB stand-in: stopping"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 80); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -9 "$pid" 2>/dev/null || true
      fi
      rm -f "$MONGO_DIR/pid"
      sed -i '/^mongo$/d' "$STARTED"
      ;;
    rabbitmq)
      log "RabbitMQ: stopping"
      rabbitmqctl_ -q stop >/dev/null 2>&1 || true
      for _ in $(seq 1 120); do [[ -z "$(rabbitmq_vm_pids)" ]] && break; sleep 0.25; done
      pids="$(rabbitmq_vm_pids)"
      # shellcheck disable=SC2086
      if [[ -n "$pids" ]]; then log "RabbitMQ: did not stop in 30 s; killing it"; kill -9 $pids 2>/dev/null || true; fi
      sed -i '/^rabbitmq$/d' "$STARTED"
      ;;
    cluster) cluster_down ;;
    private-mongo)
      pids="$(private_mongo_pids)"
      if [[ -n "$pids" ]]; then
        log "private MongoDB stand-ins: killing (pid $pids)"
        # shellcheck disable=SC2086
        kill -CONT $pids 2>/dev/null || true
        # shellcheck disable=SC2086
        kill -9 $pids 2>/dev/null || true
      fi
      ;;
    *) log "stop: no service '$1' (rabbitmq, mongo, cluster, private-mongo)"; return 64 ;;
  esac
}

wipe() {
  local name
  for name in $(running); do stop_service "$name"; done
  if [[ "${WIPE_KEEP_JARS:-}" == 1 ]]; then
    rm -rf "$MONGO_DIR/data.mv" "$MONGO_DIR/stopped-data-file" "$MONGO_DIR/server.log" "$STATE/cluster"
  else
    rm -rf "$STATE"
  fi
  # The single broker's queues and users of earlier runs.
  if [[ -d /var/lib/rabbitmq/mnesia ]]; then rm -rf /var/lib/rabbitmq/mnesia; fi
  log "wiped: every service stopped and its state deleted"
}

# A PID is the stand-in's only if its command line says so: a PID file left
# from before a restart may name any process by now.
is_stand_in() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -q "^java .*de.bwaldvogel.mongo.H2MongoServer"; }

mongo_pid() {
  local pid
  if [[ -f "$MONGO_DIR/pid" ]]; then
    pid="$(cat "$MONGO_DIR/pid")"
    if is_stand_in "$pid"; then echo "$pid"; return; fi
  fi
  pgrep -f '^java .*de.bwaldvogel.mongo.H2MongoServer' | head -n 1
}

stop_mongo() {
  local pid
  pid="$(mongo_pid || true)"
  if [[ -z "$pid" ]]; then log "MongoDB stand-in: not running"; return; fi
  # Its last argument is its data file; start-mongo reuses it.
  mkdir -p "$MONGO_DIR"
  tr '\0' '\n' <"/proc/$pid/cmdline" | tail -n 1 >"$MONGO_DIR/stopped-data-file"
  # SIGTERM: the stand-in closes its H2 store cleanly, so nothing written is lost.
  kill "$pid"
  for _ in $(seq 1 80); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  log "MongoDB stand-in: stopped"
}

rabbitmqctl_() { PATH="$PATH:/usr/sbin" rabbitmqctl "$@"; }

start_rabbitmq_app() {
  rabbitmqctl_ -q start_app >/dev/null
  rabbitmqctl_ -q await_startup --timeout 60 >/dev/null
  wait_port 5672 RabbitMQ 60
  log "RabbitMQ: application started"
}

add_amqp_user() {
  rabbitmqctl_ -q delete_user "$1" >/dev/null 2>&1 || true
  rabbitmqctl_ -q add_user "$1" "$2" >/dev/null
  rabbitmqctl_ -q set_permissions -p / "$1" '.*' '.*' '.*' >/dev/null
  log "RabbitMQ: user $1 ready"
}

status() {
  answers 5672 && log "RabbitMQ answers on 5672" || log "RabbitMQ: nothing on 5672"
  answers 27017 && log "MongoDB answers on 27017" || log "MongoDB: nothing on 27017"
}

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

if [[ ${1:-} == cluster-* ]]; then cluster_check_ports; fi
case "${1:-}" in
  up) rabbitmq_up; mongo_up ;;
  down) down ;;
  status) status ;;
  running) running ;;
  stop) shift; for name in "$@"; do stop_service "$name"; done ;;
  wipe) wipe ;;
  stop-rabbitmq) rabbitmqctl_ -q stop_app >/dev/null; log "RabbitMQ: application stopped" ;;
  start-rabbitmq) start_rabbitmq_app ;;
  stop-mongo) stop_mongo ;;
  start-mongo) mongo_up ;;
  add-amqp-user) add_amqp_user "${2:?name}" "${3:?password}" ;;
  mongo-jars) mongo_jars >&2; echo "$MONGO_DIR/lib" ;;
  # exec: the caller's process is the stand-in's, so its signals (SIGSTOP, SIGCONT, SIGKILL) reach the JVM.
  private-mongo) mongo_jars >&2; exec java -Xmx512m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$MONGO_DIR/lib/*" "$ROOT/scripts/mongo-stand-in.java" "${2:-0}" ;;
  cluster-up) cluster_up ;;
  cluster-down) cluster_down ;;
  cluster-status) cluster_status ;;
  cluster-kill) cluster_kill "${2:?node (a, b or c)}" ;;
  cluster-start) cluster_start "${2:?node (a, b or c)}" ;;
  cluster-leader) cluster_leader "${2:?queue}" "${3:-/}" ;;
  cluster-members) cluster_members "${2:?queue}" "${3:-/}" ;;
  cluster-online) cluster_online "${2:?queue}" "${3:-/}" ;;
  cluster-connection-node) cluster_connection_node "${2:?connection name or client port}" ;;
  cluster-ctl) letter=$(cluster_letter "${2:?node (a, b or c)}"); shift 2; cluster_ctl "$letter" "$@" ;;
  *)
    echo "usage: $0 up|down|status|running|stop NAME...|wipe|stop-rabbitmq|start-rabbitmq|stop-mongo|start-mongo|add-amqp-user NAME PASSWORD|mongo-jars|private-mongo [PORT]" >&2
    echo "       $0 cluster-up|cluster-down|cluster-status|cluster-kill NODE|cluster-start NODE|cluster-leader QUEUE [VHOST]" >&2
    echo "       $0 cluster-members QUEUE [VHOST]|cluster-online QUEUE [VHOST]|cluster-connection-node NAME|CLIENT_PORT|cluster-ctl NODE ARGS..." >&2
    exit 64
    ;;
esac
