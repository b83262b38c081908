#!/usr/bin/env bash
# Runs Prometheus's promtool with the arguments given, installing it first
# when it is missing: Debian's `prometheus` package (promtool and the
# prometheus server) with apt-get, as scripts/services.sh installs
# rabbitmq-server.
#
#   scripts/promtool.sh check rules ops/prometheus/alerts.yml
#   scripts/promtool.sh test rules ops/prometheus/alerts.test.yml
#   scripts/promtool.sh --available   exit 0 when promtool is there or can be installed here, 1 otherwise
#
# Without promtool and without a way to install it (apt-get missing, or not
# root), it says how to get promtool and exits 127.
set -euo pipefail

find_promtool() {
  if command -v promtool >/dev/null 2>&1; then command -v promtool; return 0; fi
  if [[ -x /usr/bin/promtool ]]; then echo /usr/bin/promtool; return 0; fi
  return 1
}

can_install() { command -v apt-get >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]]; }

if [[ "${1:-}" == "--available" ]]; then
  if find_promtool >/dev/null || can_install; then exit 0; fi
  exit 1
fi

if ! find_promtool >/dev/null; then
  if ! can_install; then
    echo "promtool.sh: promtool is not installed and cannot be installed here (apt-get as root is needed)." >&2
    echo "promtool.sh: install Debian's or Ubuntu's 'prometheus' package, or put promtool from a Prometheus release (https://prometheus.io/download/) on PATH." >&2
    exit 127
  fi
  echo "promtool.sh: installing Debian's prometheus package (for promtool)" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  fi
fi

exec "$(find_promtool)" "$@"
