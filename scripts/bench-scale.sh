#!/usr/bin/env bash
# make bench-scale: the steady and max-throughput runs of `make bench`, and
# the database-only ceiling, on an empty database and on one that already
# holds SCALE_EVENTS events of history (docs/design.md#storage), in the same
# run. Per size: steady p50/p95/p99, batch p95, max events/s, the ceiling,
# the bytes per event of each table and of the WAL (measured across the
# ceiling's SCALE_CEILING events: a young day being written), the bytes per
# row of the ledger and the reservations as whole tables (on the history:
# mostly closed days, compacted), index sizes and autovacuum runs.
# Writes .local/bench/scale.json and prints a table.
#
#   SCALE_EVENTS   events of history (default 30,000,000), over SCALE_DAYS (3)
#                  days before today, SCALE_LINES (3) order lines each
#   SCALE_PREFILL  events of the max-throughput run (default 100,000)
#   SCALE_CEILING  events of the database-only ceiling (default 100,000)
#   SCALE_ROUNDS   rounds (default 2): empty and history, each first in every
#                  other round, so that each history figure has an empty one
#                  beside it
#
# The history is written once, set-based in SQL (loadtest/sql/scale_history.sql,
# minutes per 10 million events), into the database scale_history_<events>,
# and kept for the next run; each round empties today's partitions first, so
# that today holds the round's own events on both databases.
# `scripts/services.sh prune` leaves it; drop it by hand to reclaim the disk
# (~7 GB per 10 M events).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
scripts/services.sh prune
out=.local/bench
mkdir -p "$out"
events=${SCALE_EVENTS:-30000000}
days=${SCALE_DAYS:-3}
lines=${SCALE_LINES:-3}
prefill=${SCALE_PREFILL:-100000}
ceiling=${SCALE_CEILING:-100000}
rounds=${SCALE_ROUNDS:-2}
BIN="${INBOX_BIN_DIR:-$REPO/target/release}"
PG=postgres://inventory:inventory@127.0.0.1:5432
consumer=inventory-allocation-service
history=scale_history_$events

exists() {
    [[ $(psql -At "$PG/inventory" -c "SELECT count(*) FROM pg_database WHERE datname = '$1'") == 1 ]]
}
if exists "$history" && [[ $(psql -At "$PG/$history" -c \
        "SELECT count(*) FROM pg_class WHERE relname = 'scale_history_done'") != 1 ]]; then
    echo "bench-scale: $history was left half-written; writing it again" >&2
    psql -q "$PG/inventory" -c "DROP DATABASE $history WITH (FORCE)"
fi
if ! exists "$history"; then
    echo "bench-scale: writing $events events of history into $history" >&2
    psql -q "$PG/inventory" -c "CREATE DATABASE $history"
    DATABASE_URL="$PG/$history" "$BIN/inventory-inbox" migrate >/dev/null
    started=$(date +%s)
    psql -q "$PG/$history" -v events="$events" -v days="$days" -v lines="$lines" \
        -v consumer="$consumer" -f loadtest/sql/scale_history.sql
    psql -q "$PG/$history" -c "CREATE TABLE scale_history_done (seconds integer)" \
        -c "INSERT INTO scale_history_done VALUES ($(($(date +%s) - started)))"
fi

# Before each measured run: the WAL of the runs before it checkpointed,
# and no autovacuum working in any database. The two databases compared
# share the cluster: the vacuum of one run's partitions, or the
# checkpoint of its WAL, must not land in the next run, on the other
# database.
settle() {
    psql -q "$PG/inventory" -c "CHECKPOINT"
    until [[ $(psql -At "$PG/inventory" -c "SELECT count(*) FROM pg_stat_activity
                WHERE backend_type = 'autovacuum worker'") == 0 ]]; do
        sleep 2
    done
}

# One size in one round: its database, its runs, its figures in
# $out/scale_<size>_<round>_*.json.
measure() {
    local size=$1_$3 database=$2
    DATABASE_URL="$PG/$database" "$BIN/inventory-inbox" migrate >/dev/null
    # Today holds this round's events only, as on the empty database: the
    # history is the days before today, and the events earlier runs of
    # the day left in today's partitions (millions after a few runs) would
    # make today, the one day every batch looks up in full, larger on one
    # side only.
    psql -q "$PG/$database" <<'SQL'
DO $$
DECLARE
    parent text;
BEGIN
    FOREACH parent IN ARRAY ARRAY['processed_inbox', 'order_reservation', 'inbox_parked'] LOOP
        IF to_regclass(parent || '_p' || to_char(inbox_today(), 'YYYYMMDD')) IS NOT NULL THEN
            EXECUTE format('TRUNCATE %I', parent || '_p' || to_char(inbox_today(), 'YYYYMMDD'));
        END IF;
    END LOOP;
END
$$;
SQL
    # The stock table as a fresh database's, on both: earlier runs' seeding
    # and loads leave the history database's 1,000 rows spread over 128-164
    # pages (a fresh one's stay at 12-57), and every batch walks a hot
    # row's versions on a sparse page further (docs/benchmarks/2026-12-07.md,
    # "The stock table's layout"). That is the state earlier runs left, like
    # today's partitions above, not history.
    psql -q "$PG/$database" -c "VACUUM (FULL, ANALYZE) inventory_stock"
    # The hourly maintenance: partitions, and the filters of closed days
    # (docs/design.md#the-filter-of-closed-days), as in production.
    DATABASE_URL="$PG/$database" "$BIN/inventory-inbox" maintain >&2
    settle
    LOADTEST_DATABASE=$database scripts/loadtest.sh --scenario "steady_$size" \
        --report "$out/scale_${size}_steady.json" --duration 60 --rate 1400 --pause-for 0 \
        -- --warmup 5
    settle
    LOADTEST_DATABASE=$database scripts/loadtest.sh --scenario "max_$size" \
        --report "$out/scale_${size}_max.json" --prefill "$prefill" \
        -- --duplicate-ratio 0 --poison-ratio 0
    settle
    psql -At -F' ' "$PG/$database" -f loadtest/sql/storage_snapshot.sql > "$out/scale_${size}_before.txt"
    DATABASE_URL="$PG/$database" "$BIN/inbox-loadgen" db-ceiling --consumer-name "ceiling-$size" \
        --events "$ceiling" --report "$out/scale_${size}_ceiling.json"
    psql -At -F' ' "$PG/$database" -f loadtest/sql/storage_snapshot.sql > "$out/scale_${size}_after.txt"
}

for round in $(seq 1 "$rounds"); do
    empty="bench_ceiling_scale_empty_$$_$round"
    psql -q "$PG/inventory" -c "CREATE DATABASE $empty"
    # Each database first in every other round: what a run leaves for the
    # one after it (a cache, a vacuum) falls on both alike.
    if ((round % 2)); then
        measure empty "$empty" "$round"
        measure history "$history" "$round"
    else
        measure history "$history" "$round"
        measure empty "$empty" "$round"
    fi
    psql -q "$PG/inventory" -c "DROP DATABASE $empty WITH (FORCE)"
done
# The table is this checkout's own build (its make target builds it), not
# INBOX_BIN_DIR's: an A/B build may predate `inbox-loadgen table`.
"$REPO/target/release/inbox-loadgen" table scale "$out" "$events" "$rounds"
