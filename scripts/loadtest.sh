#!/usr/bin/env bash
# One load-generator scenario against a consumer inbox-loadgen starts, waits
# for and stops itself (run --consumer-bin), on a fresh database and topic of
# the local services (docs/design.md#load-generator).
#
#   scripts/loadtest.sh [--scenario NAME] [--report FILE] [--duration S] [--rate N]
#                       [--pause-at S] [--pause-for S] [--strategy batch|per-record]
#                       [--prefill N] [-- extra inbox-loadgen flags]
#
# --prefill N: instead of a paced run, N events are produced while the
# consumer is stopped (SIGSTOP), then it drains them: its max throughput.
#
# LOADTEST_CONSUMER_DB=HOST:PORT points the consumer (only) at another
# address of the same PostgreSQL, e.g. a proxy adding network delay; the
# generator seeds and reconciles directly. DB_POOL_SIZE and the other
# settings of the consumer are taken from the environment.
#
# Leaves the JSON report, its SVG picture beside it and the consumer's log in
# the report's folder; exits non-zero when reconciliation fails.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

scenario=loadtest
report=.local/loadtest/report.json
duration=60
rate=1400
pause_at=20
pause_for=20
strategy=batch
prefill=
extra=()
while (($#)); do
    case "$1" in
        --scenario) scenario=$2; shift 2 ;;
        --report) report=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --pause-at) pause_at=$2; shift 2 ;;
        --pause-for) pause_for=$2; shift 2 ;;
        --strategy) strategy=$2; shift 2 ;;
        --prefill) prefill=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) echo "loadtest: unknown option $1" >&2; exit 2 ;;
    esac
done

# INBOX_BIN_DIR runs another build of the consumer (an A/B comparison).
BIN="${INBOX_BIN_DIR:-$REPO/target/release}"
# The generator is this checkout's own build, whatever consumer it drives:
# an A/B of two consumers (INBOX_BIN_DIR) is measured by one generator, and
# an older build's generator does not start consumers.
GENERATOR="$REPO/target/release/inbox-loadgen"
PG=postgres://inventory:inventory@127.0.0.1:5432
run_id="lt_$(date +%Y%m%d%H%M%S)_$$"
metrics_port=${LOADTEST_METRICS_PORT:-9464}
mkdir -p "$(dirname "$report")"

# A fresh database and topic per run, so runs never see each other's data;
# LOADTEST_DATABASE=NAME runs on an existing database instead (one holding
# history, `make bench-scale`), with a fresh topic all the same.
if [[ -n ${LOADTEST_DATABASE:-} ]]; then
    database=$LOADTEST_DATABASE
else
    database=$run_id
    psql -q "$PG/inventory" -c "CREATE DATABASE $database"
fi
DATABASE_URL="$PG/$database" "$BIN/inventory-inbox" migrate >/dev/null
scripts/services.sh topic "$run_id" 12 >/dev/null

# The consumer is started, waited for and stopped by inbox-loadgen; it takes
# its other settings from this environment.
CONSUMER_PG=postgres://inventory:inventory@${LOADTEST_CONSUMER_DB:-127.0.0.1:5432}
pause=()
if [[ -n $prefill ]]; then
    pause=(--prefill "$prefill" --pause)
elif [[ $pause_for != 0 ]]; then
    pause=(--pause --pause-at "$pause_at" --pause-for "$pause_for")
fi
status=0
DATABASE_URL="$PG/$database" "$GENERATOR" run \
    --topic "$run_id" --scenario "$scenario" --rate "$rate" --duration "$duration" \
    --metrics-url "http://127.0.0.1:$metrics_port/metrics" --report "$report" \
    --consumer-bin "$BIN/inventory-inbox" --consumer-env "DATABASE_URL=$CONSUMER_PG/$database" \
    --consumer-env "INBOX_STRATEGY=$strategy" --consumer-env DLQ_TOPIC= \
    --consumer-env "RUST_LOG=${RUST_LOG:-info}" \
    "${pause[@]}" "${extra[@]}" || status=$?
echo "report: $report (picture: ${report%.json}.svg, consumer log: ${report%.json}.consumer.log)"
exit "$status"
