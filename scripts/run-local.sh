#!/usr/bin/env bash
# Runs the worker or the HTTP gateway in the foreground for a developer:
# the local services up (scripts/services.sh), a build, then the process
# with its log lines made readable (pino-pretty, coloured when the terminal
# is one). Production output is untouched: `npm start` and `npm run
# gateway` print one JSON object per line, and so does this script with
# LOG_FORMAT=json.
#
#   scripts/run-local.sh worker    what `npm run worker:local` runs, with a development
#                                  profile for push delivery (below)
#   scripts/run-local.sh gateway   what `npm run gateway:local` runs: the gateway on
#                                  127.0.0.1:8090 with token-file authentication (a
#                                  development token, written once to
#                                  .services/gateway-tokens.json, unless AUTH_* is set)
#
# The worker's development profile, so that a first push goes out locally
# (`npm run push-gateway:local`, examples/first-push.mts). Each variable is
# set only when it is unset (set it, even empty, to override it):
#   TRUSTED_PUBLISHERS=guest                 the local broker's user may send the homeserver ops
#                                            (`notify`, `delete_pushers`, `delete_user_data`)
#   ALLOW_INSECURE_PUSH_GATEWAYS=true        pushers may name an http:// gateway
#   PUSH_GATEWAY_IP_ALLOWLIST=127.0.0.1/32   deliveries may reach a gateway on loopback
# With a trusted publisher, every request must name it (the AMQP `userId`):
# clients set `publisherUserId: 'guest'`, and `gateway` here gets
# AMQP_PUBLISHER_USER_ID=guest the same way. With AMQP_URL naming another
# broker user, set both to that user.
# Production defaults are unchanged (config/default.json: no trusted
# publisher, https gateways only, no private or loopback address): `npm start`
# and the Docker image never get this profile.
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
  export AMQP_PUBLISHER_USER_ID="${AMQP_PUBLISHER_USER_ID-guest}"
  printf 'gateway: token-file authentication from %s (Authorization: Bearer <a token in that file>)\n' "$tokens" >&2
fi

if [[ $what == worker ]]; then
  export TRUSTED_PUBLISHERS="${TRUSTED_PUBLISHERS-guest}"
  export ALLOW_INSECURE_PUSH_GATEWAYS="${ALLOW_INSECURE_PUSH_GATEWAYS-true}"
  export PUSH_GATEWAY_IP_ALLOWLIST="${PUSH_GATEWAY_IP_ALLOWLIST-127.0.0.1/32}"
  printf 'worker: development profile: TRUSTED_PUBLISHERS=%s ALLOW_INSECURE_PUSH_GATEWAYS=%s PUSH_GATEWAY_IP_ALLOWLIST=%s\n' \
    "$TRUSTED_PUBLISHERS" "$ALLOW_INSECURE_PUSH_GATEWAYS" "$PUSH_GATEWAY_IP_ALLOWLIST" >&2
fi

if [[ "${LOG_FORMAT:-pretty}" == json ]]; then exec node "${args[@]}" "$entry"; fi

# The printer ignores Ctrl-C: it reads until the service closes its output,
# so the lines the service writes while it shuts down are shown too.
node "${args[@]}" "$entry" | (
  trap '' INT
  exec node_modules/.bin/pino-pretty --translateTime 'SYS:HH:MM:ss.l' --ignore 'hostname' --singleLine
)
