#!/usr/bin/env bash
# What `npm test` (and test:unit, test:integration, test:faults) runs: vitest
# with the given arguments, then stops every service that this run started,
# whether the run passed, failed or was interrupted (Ctrl-C):
#
#   - RabbitMQ and the MongoDB stand-in, when neither ran before the run
#     (each is judged on its own: one you had running stays);
#   - the three-node cluster the fault tests start, likewise;
#   - private MongoDB stand-ins a killed test process left behind.
#
# KEEP_SERVICES=1 leaves everything running, for quicker runs one after the
# other (`scripts/services.sh down` stops it all later).
set -uo pipefail
cd "$(dirname "$0")/.."

SERVICES=scripts/services.sh
before="$("$SERVICES" running | paste -sd ' ' -)"

cleanup() {
  local status=$? name started=()
  trap - EXIT INT TERM
  if [[ "${KEEP_SERVICES:-}" == 1 ]]; then
    printf 'services: left running (KEEP_SERVICES=1): %s\n' "$("$SERVICES" running | paste -sd ' ' -)" >&2
    exit "$status"
  fi
  for name in $("$SERVICES" running); do
    if [[ " $before " != *" $name "* ]]; then started+=("$name"); fi
  done
  if [[ ${#started[@]} -gt 0 ]]; then
    printf 'services: stopping what this run started: %s\n' "${started[*]}" >&2
    "$SERVICES" stop "${started[@]}"
  fi
  exit "$status"
}
trap cleanup EXIT
# vitest gets the terminal's Ctrl-C too and stops; the cleanup runs once it has.
trap 'exit 130' INT
trap 'exit 143' TERM

vitest run "$@"
