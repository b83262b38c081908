#!/usr/bin/env bash
# Makes sure RabbitMQ and a MongoDB-compatible server are up on 127.0.0.1 for
# development and tests, on a machine without Docker.
#
#   scripts/services.sh up      start what is not running (idempotent), wait until both answer
#   scripts/services.sh down    stop what `up` started (and nothing else)
#   scripts/services.sh status  say what answers
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
set -euo pipefail

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

mark_started() { grep -qx "$1" "$STARTED" || echo "$1" >>"$STARTED"; }

rabbitmq_up() {
  if [[ -n "${AMQP_URL:-}" ]]; then log "RabbitMQ: using AMQP_URL"; return; fi
  if answers 5672; then log "RabbitMQ: already answering on 5672"; return; fi
  if ! command -v rabbitmq-server >/dev/null 2>&1 && [[ ! -x /usr/sbin/rabbitmq-server ]]; then
    log "RabbitMQ: installing Debian's rabbitmq-server"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq rabbitmq-server >/dev/null
  fi
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
  if grep -qx mongo "$STARTED" && [[ -f "$MONGO_DIR/pid" ]]; then
    log "MongoDB stand-in: stopping"
    kill "$(cat "$MONGO_DIR/pid")" 2>/dev/null || true
    for _ in $(seq 1 40); do answers 27017 || break; sleep 0.25; done
    rm -f "$MONGO_DIR/pid"
  fi
  if grep -qx rabbitmq "$STARTED"; then
    log "RabbitMQ: stopping"
    PATH="$PATH:/usr/sbin" rabbitmqctl -q stop >/dev/null 2>&1 || true
  fi
  : >"$STARTED"
}

mongo_pid() {
  if [[ -f "$MONGO_DIR/pid" ]] && kill -0 "$(cat "$MONGO_DIR/pid")" 2>/dev/null; then cat "$MONGO_DIR/pid"; return; fi
  pgrep -f 'de.bwaldvogel.mongo.H2MongoServer' | head -n 1
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

case "${1:-}" in
  up) rabbitmq_up; mongo_up ;;
  down) down ;;
  status) status ;;
  stop-rabbitmq) rabbitmqctl_ -q stop_app >/dev/null; log "RabbitMQ: application stopped" ;;
  start-rabbitmq) start_rabbitmq_app ;;
  stop-mongo) stop_mongo ;;
  start-mongo) mongo_up ;;
  add-amqp-user) add_amqp_user "${2:?name}" "${3:?password}" ;;
  mongo-jars) mongo_jars >&2; echo "$MONGO_DIR/lib" ;;
  # exec: the caller's process is the stand-in's, so its signals (SIGSTOP, SIGCONT, SIGKILL) reach the JVM.
  private-mongo) mongo_jars >&2; exec java -Xmx512m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$MONGO_DIR/lib/*" "$ROOT/scripts/mongo-stand-in.java" "${2:-0}" ;;
  *) echo "usage: $0 up|down|status|stop-rabbitmq|start-rabbitmq|stop-mongo|start-mongo|add-amqp-user NAME PASSWORD|mongo-jars|private-mongo [PORT]" >&2; exit 64 ;;
esac
