#!/usr/bin/env bash
# Runs the worker or the HTTP gateway in the foreground for a developer:
# the local services up (scripts/services.sh), a build, then the process
# with its log lines made readable (pino-pretty, coloured when the terminal
# is one). Production output is untouched: `npm start` and `npm run
# gateway` print one JSON object per line, and so does this script with
# LOG_FORMAT=json.
#
#   scripts/run-local.sh worker    what `npm run worker:local` runs
#   scripts/run-local.sh gateway   what `npm run gateway:local` runs: the gateway on
#                                  127.0.0.1:8090 with token-file authentication (a
#                                  development token, written once to
#                                  .services/gateway-tokens.json, unless AUTH_* is set)
#
# Ctrl-C stops the process the way SIGINT does in production (it answers
# what is in flight first); its last lines are still printed.
set -euo pipefail
cd "$(dirname "$0")/.."

what="${1:-}"
case "$what" in
  worker) entry=dist/main.js; args=(--max-semi-space-size=8) ;;
  gateway) entry=dist/gateway-main.js; args=() ;;
  *) echo "usage: $0 worker|gateway" >&2; exit 64 ;;
esac

scripts/services.sh up
npm run --silent build

if [[ $what == gateway && -z "${AUTH_KIND:-}" ]]; then
  tokens=.services/gateway-tokens.json
  if [[ ! -f $tokens ]]; then
    mkdir -p .services
    token="dev-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    printf '{"%s": {"user_id": "@dev:localhost", "device_id": "DEVDEVICE"}}\n' "$token" >"$tokens"
    chmod 600 "$tokens"
  fi
  export AUTH_KIND=token-file AUTH_TOKEN_FILE="$PWD/$tokens"
  export GATEWAY_HOST="${GATEWAY_HOST:-127.0.0.1}"
  printf 'gateway: token-file authentication from %s (Authorization: Bearer <a token in that file>)\n' "$tokens" >&2
fi

if [[ "${LOG_FORMAT:-pretty}" == json ]]; then exec node "${args[@]}" "$entry"; fi

# The printer ignores Ctrl-C: it reads until the service closes its output,
# so the lines the service writes while it shuts down are shown too.
node "${args[@]}" "$entry" | (
  trap '' INT
  exec node_modules/.bin/pino-pretty --translateTime 'SYS:HH:MM:ss.l' --ignore 'hostname' --singleLine
)
