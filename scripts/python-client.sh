#!/usr/bin/env bash
# Checks and tests the Python client (clients/python) against real workers:
#
#   1. the virtualenv of scripts/python-venv.sh (~/.cache/matrix-push-worker/python-client-venv, or
#      PYTHON_CLIENT_VENV), the package installed in it with its `test` extra, from PyPI;
#   2. ruff check, ruff format --check and mypy --strict on the package and its tests;
#   3. pytest (clients/python/tests): each run starts its own worker (`node dist/main.js`, on queues
#      and a database of its own) against RabbitMQ and MongoDB; pytest's "no tests ran" (exit 5)
#      is a failure.
#
# The services: AMQP_URL / MONGODB_URL when set, else `scripts/services.sh up` (starts what does not
# answer; a run of scripts/run-tests.sh stops what it started). dist/ is built (`npm run build`)
# when it is missing or older than src/. One of its tests stops and starts the local RabbitMQ
# (scripts/services.sh stop-rabbitmq/start-rabbitmq): run it where nothing else uses the broker,
# e.g. `flock /tmp/mpw-services.lock scripts/python-client.sh`, or set
# MPW_PYTHON_SKIP_BROKER_RESTART=1. Arguments are passed to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CLIENT="$ROOT/clients/python"

say() { printf 'python-client: %s\n' "$*" >&2; }

VENV="$("$ROOT/scripts/python-venv.sh")"

cd "$CLIENT"
say "ruff check, ruff format --check, mypy --strict"
"$VENV/bin/ruff" check --no-cache .
"$VENV/bin/ruff" format --no-cache --check .
"$VENV/bin/mypy" --strict --no-incremental --cache-dir=/dev/null src tests

cd "$ROOT"
if [[ -z "${AMQP_URL:-}" || -z "${MONGODB_URL:-}" ]]; then scripts/services.sh up; fi
if [[ ! -f dist/main.js ]] || [[ -n "$(find src -newer dist/main.js -name '*.ts' -print -quit)" ]]; then
  say "building the worker (npm run build)"
  npm run build --silent
fi

cd "$CLIENT"
say "pytest"
status=0
"$VENV/bin/python" -m pytest -p no:cacheprovider "$@" || status=$?
if [[ $status -eq 5 ]]; then say "pytest collected no tests: that is a failure"; exit 1; fi
exit "$status"
