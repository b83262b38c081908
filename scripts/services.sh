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
      epmd_down_if_idle
      ;;
    cluster) cluster_down; epmd_down_if_idle ;;
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

# Erlang's port mapper, which the first VM (the broker's or a cluster
# node's) starts on its own and which outlives the last: once no Erlang VM
# is left it serves nobody, and a fresh one starts with the next VM.
# `epmd -kill` refuses while a node is registered.
epmd_down_if_idle() {
  if [[ -n "$(pgrep -x beam.smp 2>/dev/null || true)" ]] || ! command -v epmd >/dev/null; then return; fi
  if [[ -n "$(pgrep -x epmd 2>/dev/null || true)" ]]; then
    epmd -kill >/dev/null 2>&1 && log "Erlang port mapper (epmd): stopped, no Erlang VM left"
  fi
  return 0
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

# The three-node cluster: cluster_* (scripts/services/cluster.sh).
# shellcheck source=SCRIPTDIR/services/cluster.sh
source "$ROOT/scripts/services/cluster.sh"

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
