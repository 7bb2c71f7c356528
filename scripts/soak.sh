#!/usr/bin/env bash
# make soak: SOAK_MINUTES (60) of SOAK_RATE (1,400) events/s with 5 %
# duplicates and 1 % poison against one consumer, with days rolling over
# (docs/design.md#storage): every SOAK_DAY_SECONDS (300) the database's
# "today" (inbox_today() and inbox_clock_day(), replaced in the soak's own
# database) moves a day forward and the generator's event times with it, so
# that the consumer's own maintenance (every SOAK_MAINTENANCE_SECONDS, 20)
# makes and drops partitions and builds the filters of closed days under
# load, and the owner's `inventory-inbox maintain` (the
# hourly cron job: it also compacts the indexes of closed days) runs every
# minute. The retention is shortened so that days go within the hour: the
# ledger's window 2 days back, reservations 3, parked rows 2.
#
# Each simulated day is one generator run on the same topic (its own
# reconciliation: every event of the day applied exactly once, the stock,
# the parked rows), started once the consumer's maintenance has made the
# day's window. Every minute: each table's size and rows, the WAL written,
# the consumer's batch p95 over the minute.
#
# Writes .local/soak/soak.json (and every day's report beside it), prints a
# table; exits non-zero when a day fails reconciliation or a table's size
# did not level off (its largest size in the last third of the soak more
# than 10 % above its largest before).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
minutes=${SOAK_MINUTES:-60}
rate=${SOAK_RATE:-1400}
day_seconds=${SOAK_DAY_SECONDS:-300}
maintenance_seconds=${SOAK_MAINTENANCE_SECONDS:-20}
out=${SOAK_OUT:-.local/soak}
BIN="${INBOX_BIN_DIR:-$REPO/target/release}"
PG=postgres://inventory:inventory@127.0.0.1:5432
run_id="lt_soak_$(date +%Y%m%d%H%M%S)_$$"
metrics_port=${SOAK_METRICS_PORT:-9474}
consumer_name=inventory-allocation-service
days=$(((minutes * 60 + day_seconds - 1) / day_seconds))
if ((day_seconds < 60)); then
    echo "soak: SOAK_DAY_SECONDS=$day_seconds is too short for a generator run of a day" >&2
    exit 2
fi

scripts/services.sh prune
rm -rf "$out"
mkdir -p "$out"
psql -q "$PG/inventory" -c "CREATE DATABASE $run_id"
export DATABASE_URL="$PG/$run_id"
export INBOX_RETENTION_DAYS=2 INBOX_RESERVATION_RETENTION_DAYS=3 INBOX_PARKED_RETENTION_DAYS=2
"$BIN/inventory-inbox" migrate >/dev/null
scripts/services.sh topic "$run_id" 12 >/dev/null

# The soak's clock: day 0 is today, day n begins n × day_seconds after now.
started=$(date +%s)
psql -q "$DATABASE_URL" <<SQL
CREATE OR REPLACE FUNCTION inbox_today() RETURNS date LANGUAGE sql STABLE AS \$\$
    SELECT (to_timestamp($started) AT TIME ZONE 'UTC')::date
           + floor(extract(epoch FROM now() - to_timestamp($started)) / $day_seconds)::integer
\$\$;
CREATE OR REPLACE FUNCTION inbox_clock_day() RETURNS date LANGUAGE sql VOLATILE AS \$\$
    SELECT (to_timestamp($started) AT TIME ZONE 'UTC')::date
           + floor(extract(epoch FROM clock_timestamp() - to_timestamp($started))
                   / $day_seconds)::integer
\$\$;
SQL
"$BIN/inventory-inbox" maintain >/dev/null

log="$out/consumer.log"
KAFKA_TOPIC="$run_id" KAFKA_GROUP_ID="$run_id" METRICS_ADDR="127.0.0.1:$metrics_port" DLQ_TOPIC= \
    INBOX_MAINTENANCE_INTERVAL_SECONDS="$maintenance_seconds" RUST_LOG=${RUST_LOG:-info} \
    "$BIN/inventory-inbox" run >"$log" 2>&1 &
consumer=$!
sampler=
owner_maintenance=
stop() {
    [[ -n $sampler ]] && kill "$sampler" 2>/dev/null || true
    [[ -n $owner_maintenance ]] && kill "$owner_maintenance" 2>/dev/null || true
    if kill -0 "$consumer" 2>/dev/null; then
        kill -TERM "$consumer"
        wait "$consumer" || true
    fi
}
trap stop EXIT
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$metrics_port") 2>/dev/null && break
    sleep 0.1
done

# Every minute: the sizes (loadtest/sql/storage_snapshot.sql) and the
# consumer's batch-duration histogram, for `inbox-loadgen table soak`.
(
    while true; do
        now=$(date +%s)
        psql -At -F' ' "$DATABASE_URL" -f loadtest/sql/storage_snapshot.sql |
            sed "s/^/size $now /"
        curl -s "http://127.0.0.1:$metrics_port/metrics" |
            grep '^inbox_batch_duration_seconds_bucket' | sed "s/^/metric $now /" || true
        sleep $((60 - ($(date +%s) - now) % 60))
    done
) >"$out/samples.txt" 2>>"$out/sampler.err" &
sampler=$!

# The owner's maintenance, every minute, as a cron job would run it.
(
    while true; do
        sleep 60
        echo "$(date +%s) $("$BIN/inventory-inbox" maintain 2>&1 | tr '\n' ' ')"
    done
) >"$out/maintain.log" 2>&1 &
owner_maintenance=$!

status=0
for ((day = 0; day < days; day++)); do
    day_start=$((started + day * day_seconds))
    day_end=$((day_start + day_seconds))
    # The day's window, made by the consumer's own maintenance: today's
    # partitions and the two ahead exist, and nothing older than the
    # retention is left.
    until [[ $(psql -At "$DATABASE_URL" -c "
        SELECT (SELECT max(d) FROM inbox_window_days() AS d) >= inbox_today() + 2
           AND (SELECT min(d) FROM inbox_window_days() AS d) >= inbox_today() - 2
           AND (SELECT min(d) FROM inbox_reservation_days() AS d) >= inbox_today() - 3
           AND coalesce((SELECT min(d) FROM inbox_parked_days() AS d) >= inbox_today() - 2, true)") == t ]]; do
        if (($(date +%s) > day_start + day_seconds / 3)); then
            echo "soak: day $day: the consumer's maintenance did not roll the window over" >&2
            exit 1
        fi
        sleep 1
    done
    seconds=$((day_end - $(date +%s) - 25))
    if ((seconds < 20)); then
        echo "soak: day $day: too little of the day left for a run" >&2
        exit 1
    fi
    "$BIN/inbox-loadgen" run --topic "$run_id" --scenario "soak_day_$day" --rate "$rate" \
        --duration "$seconds" --metrics-url "http://127.0.0.1:$metrics_port/metrics" \
        --consumer-name "$consumer_name" --event-day-offset "$day" --drain-timeout 20 \
        --report "$out/day_$day.json" >"$out/day_$day.log" 2>&1 || status=1
    tail -1 "$out/day_$day.log" >&2
    sleep $((day_end - $(date +%s) > 0 ? day_end - $(date +%s) : 0))
done
# One sample more, at the end.
sleep 2
stop
trap - EXIT
# The table is this checkout's own build (its make target builds it), not
# INBOX_BIN_DIR's: an A/B build may predate `inbox-loadgen table`.
"$REPO/target/release/inbox-loadgen" table soak "$out" "$days" "$day_seconds" || status=1
exit "$status"
