#!/usr/bin/env bash
# The virtualenv the project's Python runs in: ~/.cache/matrix-push-worker/python-client-venv, or
# PYTHON_CLIENT_VENV. Creates it when missing (python3 -m venv, or PYTHON), installs clients/python
# into it with its `test` extra from PyPI (pytest, mypy, ruff, pika for docs/integrate.md, …), and
# prints the virtualenv's path on stdout. Used by scripts/python-client.sh and the test of
# docs/integrate.md's walk-through.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CLIENT="$ROOT/clients/python"
VENV="${PYTHON_CLIENT_VENV:-$HOME/.cache/matrix-push-worker/python-client-venv}"
PYTHON="${PYTHON:-python3}"

say() { printf 'python-venv: %s\n' "$*" >&2; }

if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating the virtualenv in $VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
fi
say "installing clients/python[test] into $VENV"
# Not editable: the tests run the package as pip installs it (py.typed included).
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$CLIENT[test]" >&2
printf '%s\n' "$VENV"
