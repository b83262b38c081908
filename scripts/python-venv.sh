#!/usr/bin/env bash
# The Python client's virtualenv, for scripts/python-client.sh and the conformance run
# (test/integration/conformance.test.ts): makes it when missing (python3 -m venv, in
# ~/.cache/matrix-push-worker/python-client-venv or PYTHON_CLIENT_VENV), installs clients/python
# with its `test` extra into it from PyPI (not editable: the package as pip installs it, py.typed
# included, rebuilt from the checkout every time), and prints its folder on stdout; progress on
# stderr. PYTHON names the interpreter that makes it (python3).
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
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$CLIENT[test]" >&2
echo "$VENV"
