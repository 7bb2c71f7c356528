#!/usr/bin/env bash
# Renders CloudEvents as Kafka messages with the CloudEvents SDK itself
# (PyPI `cloudevents`, pinned in scripts/cloudevents-requirements.txt), for
# tests/cloudevents.rs. On first use, and whenever the pins change, it
# makes the venv .local/venv/cloudevents and installs the pins there.
#
# Usage: scripts/cloudevents-sdk.sh < events.jsonl > messages.jsonl
#   Each input line is one event ({"api", "mode", "attributes", "data"});
#   each output line the Kafka message the SDK's binding made of it
#   ({"headers", "key", "value"}); see scripts/cloudevents_messages.py.
# Exits non-zero when the venv cannot be made or the SDK refuses an event.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
requirements=$root/scripts/cloudevents-requirements.txt
venv=$root/.local/venv/cloudevents

fail() { echo "cloudevents-sdk: $*" >&2; exit 1; }

mkdir -p "$root/.local/venv"
# One installer at a time: the tests of one binary run concurrently.
exec 9>"$root/.local/venv/cloudevents.lock"
flock 9
if ! cmp -s "$requirements" "$venv/requirements.txt" 2>/dev/null; then
  echo "cloudevents-sdk: installing the CloudEvents SDK into .local/venv/cloudevents" >&2
  rm -rf "$venv"
  # Debian's python3 makes a venv only with python3-venv, which
  # scripts/test-deps.sh installs (make test runs it).
  python3 -m venv "$venv" >&2 ||
    fail "could not create a Python venv in $venv: run scripts/test-deps.sh (installs python3-venv)"
  nice -n 19 "$venv/bin/pip" install -q --disable-pip-version-check --only-binary :all: \
    --require-hashes -r "$requirements" >&2 ||
    fail "could not install $requirements"
  cp "$requirements" "$venv/requirements.txt"
fi
flock -u 9

exec "$venv/bin/python" "$root/scripts/cloudevents_messages.py"
