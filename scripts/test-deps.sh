#!/usr/bin/env bash
# Installs the system packages the tests need beyond the build's
# (scripts/build-deps.sh): Debian's `prometheus` package, whose
# /usr/bin/prometheus and /usr/bin/promtool tests/observability.rs runs, and
# the de_DE.UTF-8 locale, in which tests/dedup_window.rs runs a PostgreSQL
# whose messages are German; and Debian's `python3-venv` where python3 has
# no venv module, for the venv scripts/cloudevents-sdk.sh makes of the
# CloudEvents SDK (tests/cloudevents.rs); and Debian's `pgbouncer`, which
# tests/pgbouncer.rs runs on a free port of its own; and Debian's
# `chromium` and `chromium-driver`, in which tests/console.rs renders every
# page of the console headless, takes screenshots, and signs in and replays
# through WebDriver. Idempotent: does nothing when all are
# there.
#
# The tests start their own Prometheus and PgBouncer on free loopback ports
# with temporary configs; the Debian services are not used. Their start at
# install time is suppressed (policy-rc.d) so no stray Prometheus listens on
# :9090 nor PgBouncer on :6432, and PgBouncer's is disabled for later boots;
# one that is running anyway does no harm.
set -euo pipefail

sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)

if ! locale -a 2>/dev/null | grep -qix 'de_DE.utf8'; then
  if ! command -v localedef >/dev/null || [[ ! -e /usr/share/i18n/locales/de_DE ]]; then
    echo "test-deps: installing locales"
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends locales >/dev/null
  fi
  echo "test-deps: generating the de_DE.UTF-8 locale"
  "${sudo_cmd[@]}" localedef -i de_DE -f UTF-8 de_DE.UTF-8
fi

# Debian's python3 has venv and ensurepip only with python3-venv.
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  echo "test-deps: installing python3-venv"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  python3 -c 'import ensurepip, venv' || { echo "test-deps: python3 has no venv module after installing python3-venv" >&2; exit 1; }
fi

# The console's pages in a real browser (tests/console.rs).
if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver ]]; then
  echo "test-deps: installing chromium and chromium-driver"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
  for binary in /usr/bin/chromium /usr/bin/chromedriver; do
    [[ -x $binary ]] || { echo "test-deps: $binary missing after installing chromium" >&2; exit 1; }
  done
fi

if [[ -x /usr/bin/prometheus && -x /usr/bin/promtool && -x /usr/sbin/pgbouncer ]]; then
  exit 0
fi

# invoke-rc.d asks /usr/sbin/policy-rc.d whether a package may start its
# service; exit code 101 means "no". Only a file we created is removed.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee "$policy" >/dev/null
  "${sudo_cmd[@]}" chmod 755 "$policy"
  trap '"${sudo_cmd[@]}" rm -f "$policy"' EXIT
fi

if [[ ! -x /usr/sbin/pgbouncer ]]; then
  echo "test-deps: installing pgbouncer"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null
  [[ -x /usr/sbin/pgbouncer ]] || { echo "test-deps: /usr/sbin/pgbouncer missing after installing pgbouncer" >&2; exit 1; }
  # Not started now (policy-rc.d), and not at the next boot either.
  if command -v systemctl >/dev/null; then
    "${sudo_cmd[@]}" systemctl disable pgbouncer >/dev/null 2>&1 || true
  fi
fi

if [[ -x /usr/bin/prometheus && -x /usr/bin/promtool ]]; then
  exit 0
fi

echo "test-deps: installing prometheus"
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends prometheus >/dev/null

for binary in /usr/bin/prometheus /usr/bin/promtool; do
  [[ -x $binary ]] || { echo "test-deps: $binary missing after installing prometheus" >&2; exit 1; }
done
