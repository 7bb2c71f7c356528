#!/usr/bin/env bash
# Installs the system packages the tests need beyond the build's
# (scripts/build-deps.sh): Debian's `prometheus` package, whose
# /usr/bin/prometheus and /usr/bin/promtool tests/observability.rs runs.
# Idempotent: does nothing when both binaries are present.
#
# The tests start their own Prometheus on a free loopback port with a
# temporary config and data directory; the Debian service is not used. Its
# start at install time is suppressed (policy-rc.d) so no stray Prometheus
# listens on :9090; one that is running anyway does no harm.
set -euo pipefail

if [[ -x /usr/bin/prometheus && -x /usr/bin/promtool ]]; then
  exit 0
fi

sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)

# invoke-rc.d asks /usr/sbin/policy-rc.d whether a package may start its
# service; exit code 101 means "no". Only a file we created is removed.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee "$policy" >/dev/null
  "${sudo_cmd[@]}" chmod 755 "$policy"
  trap '"${sudo_cmd[@]}" rm -f "$policy"' EXIT
fi

echo "test-deps: installing prometheus"
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends prometheus >/dev/null

for binary in /usr/bin/prometheus /usr/bin/promtool; do
  [[ -x $binary ]] || { echo "test-deps: $binary missing after installing prometheus" >&2; exit 1; }
done
