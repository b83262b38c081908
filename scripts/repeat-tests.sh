#!/usr/bin/env bash
# Runs the test suite again and again, the way a flaky test is found before
# CI finds it, and prints one line per run and a summary.
#
#   scripts/repeat-tests.sh [--runs N] [--busy] [--fresh] [-- VITEST ARGS...]
#
#   --runs N   how many runs (default 1)
#   --busy     keep every core busy during each run (one spinning process
#              per core, at normal priority), like a shared CI machine
#   --fresh    before each run, stop every service and delete its state
#              (`scripts/services.sh wipe`): the cluster forms from nothing
#              and the stand-in starts on an empty data file, as on a new
#              machine (the stand-in's jars are kept: WIPE_KEEP_JARS=1)
#   VITEST ARGS  passed on, e.g. `-- --project integration --project faults`
#
# `npm run test:stress` is `--runs 5 --busy -- --project integration --project faults`;
# `npm run test:fresh` is `--fresh`. Each run goes through scripts/run-tests.sh,
# so it stops what it started; logs go to .test-runs/<time>/run-<n>.log.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=1 busy=0 fresh=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="${2:?--runs N}"; shift 2 ;;
    --busy) busy=1; shift ;;
    --fresh) fresh=1; shift ;;
    --) shift; break ;;
    *) echo "usage: $0 [--runs N] [--busy] [--fresh] [-- VITEST ARGS...]" >&2; exit 64 ;;
  esac
done
if [[ ! $runs =~ ^[1-9][0-9]*$ ]]; then echo "--runs takes a positive number, not '$runs'" >&2; exit 64; fi

dir=".test-runs/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$dir"
spinners=()
stop_spinners() {
  if [[ ${#spinners[@]} -gt 0 ]]; then kill "${spinners[@]}" 2>/dev/null || true; wait "${spinners[@]}" 2>/dev/null || true; fi
  spinners=()
}
trap stop_spinners EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

summary="$dir/summary.txt"
failed_runs=0
for run in $(seq 1 "$runs"); do
  log="$dir/run-$run.log"
  if [[ $fresh == 1 ]]; then WIPE_KEEP_JARS=1 scripts/services.sh wipe >>"$log" 2>&1; fi
  if [[ $busy == 1 ]]; then
    for _ in $(seq 1 "$(nproc)"); do
      # A pure CPU loop: no memory, no I/O, gone with this script.
      (exec node -e 'for (;;) {}') &
      spinners+=("$!")
    done
  fi
  started=$SECONDS
  scripts/run-tests.sh "$@" >>"$log" 2>&1
  status=$?
  # Interrupted (Ctrl-C reached the run, which cleaned up and exited 130): no next run.
  if [[ $status -eq 130 ]]; then echo "run $run/$runs interrupted; logs in $dir" >&2; exit 130; fi
  stop_spinners
  seconds=$((SECONDS - started))
  # vitest's closing lines, without colours: "Test Files ..." and "Tests ...".
  counts="$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^ +Tests +' | tail -n 1 | sed -E 's/^ +Tests +//')"
  failures="$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^ *(FAIL|×) ' | sed -E 's/^ +//' | sort -u | head -n 20)"
  line="run $run/$runs: exit $status in ${seconds} s; ${counts:-no test summary}$([[ $busy == 1 ]] && echo "; $(nproc) cores kept busy")$([[ $fresh == 1 ]] && echo '; from wiped service state')"
  echo "$line" | tee -a "$summary"
  if [[ -n "$failures" ]]; then sed 's/^/    /' <<<"$failures" | tee -a "$summary"; fi
  if [[ $status -ne 0 ]]; then failed_runs=$((failed_runs + 1)); fi
done
echo "$((runs - failed_runs)) of $runs runs passed; logs in $dir" | tee -a "$summary"
[[ $failed_runs -eq 0 ]]
