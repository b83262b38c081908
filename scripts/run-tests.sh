#!/usr/bin/env bash
# What `npm test` (and test:unit, test:integration, test:faults) runs: vitest
# with the given arguments, then stops every service that this run started,
# whether the run passed, failed or was interrupted (Ctrl-C):
#
#   - RabbitMQ, the MongoDB stand-in and the three-node cluster the fault
#     tests start, each when it did not run before the run and this run's
#     scripts/services.sh launched it (one you had running stays, and so does
#     one another run on the machine launched meanwhile);
#   - private MongoDB stand-ins a killed test process left behind;
#   - worker and gateway processes the tests started and did not stop (a
#     test that failed or timed out, an interrupted run): every process
#     that inherited this run's MATRIX_PUSH_TEST_RUN.
#
# KEEP_SERVICES=1 leaves everything running, for quicker runs one after the
# other (`scripts/services.sh down` stops it all later).
set -uo pipefail
cd "$(dirname "$0")/.."

SERVICES=scripts/services.sh
before="$("$SERVICES" running | paste -sd ' ' -)"
# Every process the run starts inherits it: how its leftovers are found.
export MATRIX_PUSH_TEST_RUN="$$.$(date +%s%N)"

# PIDs of processes (other than this script) that carry this run's mark.
leftovers() {
  local proc pid
  for proc in /proc/[0-9]*; do
    pid=${proc#/proc/}
    [[ $pid == "$$" ]] && continue
    if tr '\0' '\n' 2>/dev/null <"$proc/environ" | grep -qx "MATRIX_PUSH_TEST_RUN=$MATRIX_PUSH_TEST_RUN"; then echo "$pid"; fi
  done
}

cleanup() {
  local status=$? name started=() pids
  trap - EXIT INT TERM
  # The helpers below must not carry the mark themselves, or the scan finds them.
  export -n MATRIX_PUSH_TEST_RUN
  pids="$(leftovers | paste -sd ' ' -)"
  if [[ -n "$pids" ]]; then
    printf 'tests: killing processes the run left behind (pid %s)\n' "$pids" >&2
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
  fi
  if [[ "${KEEP_SERVICES:-}" == 1 ]]; then
    printf 'services: left running (KEEP_SERVICES=1): %s\n' "$("$SERVICES" running | paste -sd ' ' -)" >&2
    exit "$status"
  fi
  # Stopped: what runs now, did not before, and this run's own services.sh
  # launched (another run on the machine may have launched it meanwhile).
  for name in $("$SERVICES" running); do
    if [[ " $before " != *" $name "* ]] && grep -qx "$name $MATRIX_PUSH_TEST_RUN" .services/started-by-run 2>/dev/null; then
      started+=("$name")
    fi
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
