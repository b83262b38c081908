#!/usr/bin/env bash
# Checks and tests the Rust client (clients/rust) against real workers:
#
#   1. cargo fmt --check and cargo clippy --all-targets -- -D warnings;
#   2. cargo test: the crate's unit tests, then its test run against one worker of its own
#      (`node dist/main.js` on queues and a database of its own, started and removed by
#      scripts/client-test-worker.ts) on RabbitMQ and MongoDB, the wire adapter (examples/wire)
#      among them. No test run at all is a failure.
#
# Builds go to CARGO_TARGET_DIR, by default ~/.cache/matrix-push-worker/rust-client-target, so that
# a new checkout reuses what an earlier one compiled; crates come from crates.io (Cargo.lock).
# The services: AMQP_URL / MONGODB_URL when set, else `scripts/services.sh up` (starts what does not
# answer; a run of scripts/run-tests.sh stops what it started). dist/ is built (`npm run build`)
# when it is missing or older than src/. One of its tests stops and starts the local RabbitMQ
# (scripts/services.sh stop-rabbitmq/start-rabbitmq), holding the run's other tests back: run it
# where nothing else uses the broker, e.g. `flock /tmp/mpw-services.lock scripts/rust-client.sh`,
# or set MPW_RUST_SKIP_BROKER_RESTART=1. Arguments are passed to cargo test.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MANIFEST="$ROOT/clients/rust/Cargo.toml"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/matrix-push-worker/rust-client-target}"

say() { printf 'rust-client: %s\n' "$*" >&2; }

say "cargo fmt --check, cargo clippy -D warnings (builds in $CARGO_TARGET_DIR)"
cargo fmt --manifest-path "$MANIFEST" --check
cargo clippy --quiet --locked --manifest-path "$MANIFEST" --all-targets -- -D warnings

cd "$ROOT"
if [[ -z "${AMQP_URL:-}" || -z "${MONGODB_URL:-}" ]]; then scripts/services.sh up; fi
if [[ ! -f dist/main.js ]] || [[ -n "$(find src -newer dist/main.js -name '*.ts' -print -quit)" ]]; then
  say "building the worker (npm run build)"
  npm run build --silent
fi

say "cargo test"
output="$(mktemp)"
trap 'rm -f "$output"' EXIT
status=0
cargo test --locked --manifest-path "$MANIFEST" "$@" 2>&1 | tee "$output" || status=$?
[[ $status -eq 0 ]] || exit "$status"
# libtest says "running 0 tests" and passes when a filter or a broken build of the test target
# leaves nothing to run.
if ! grep -Eq '^test result: ok\. [1-9][0-9]* passed' "$output" || ! grep -q 'Running tests/workers/main.rs' "$output"; then
  say "cargo test ran no test against the workers: that is a failure"
  exit 1
fi
