#!/usr/bin/env bash
# Fails when a service runs now that did not run before: the check after
# `npm test` in CI that the suite stopped what it started.
#
#   scripts/check-services-stopped.sh "NAMES RUNNING BEFORE"   (as `scripts/services.sh running` printed them)
#
# It checks both the processes (`services.sh running`) and the ports the
# services listen on: RabbitMQ 5672, the MongoDB stand-in 27017, the
# cluster's 5681-5683 (CLUSTER_AMQP_PORTS).
set -uo pipefail
cd "$(dirname "$0")/.."
before=" ${1:-} "
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

leaks=()
if ! running_now="$(scripts/services.sh running)"; then
  echo "cannot tell which services run (scripts/services.sh running failed)" >&2
  exit 1
fi
for name in $running_now; do
  if [[ "$before" != *" $name "* ]]; then leaks+=("$name (process)"); fi
done
declare -A port_of=([rabbitmq]=5672 [mongo]=27017)
for name in rabbitmq mongo; do
  if [[ "$before" != *" $name "* ]] && answers "${port_of[$name]}"; then leaks+=("$name (port ${port_of[$name]})"); fi
done
if [[ "$before" != *" cluster "* ]]; then
  for port in ${CLUSTER_AMQP_PORTS:-5681 5682 5683}; do
    if answers "$port"; then leaks+=("cluster (port $port)"); fi
  done
fi
if [[ ${#leaks[@]} -gt 0 ]]; then
  echo "services left running by the tests: ${leaks[*]}" >&2
  exit 1
fi
echo "services: the tests left nothing running (before them: ${1:-nothing})"
