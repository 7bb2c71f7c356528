#!/usr/bin/env bash
# The batch statement against its floor (SPEC §19): on fresh databases of
# the local PostgreSQL,
#   1. the database-only ceiling: `inbox-loadgen db-ceiling`, the service's
#      own batch statement driven directly, batches of 100 of the bench's
#      mix (CEILING_EVENTS, default 200000), on a database maintained as
#      `run` maintains it at start-up;
#   2. the floor: the rows one such batch writes, written bare
#      (scripts/bench/floor.sql) by pgbench, one connection, prepared
#      (FLOOR_BATCHES batches of 100, default 3000);
# and writes OUT/db_ceiling.json, OUT/floor.json and prints both with
# ceiling / floor. `make bench` runs it; `make bench-ceiling` alone (a
# minute), e.g. for an A/B of the statement with INBOX_BIN_DIR.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
out=${1:-.local/bench}
mkdir -p "$out"
PG=postgres://inventory:inventory@127.0.0.1:5432
BIN="${INBOX_BIN_DIR:-$REPO/target/release}"
events=${CEILING_EVENTS:-200000}
batches=${FLOOR_BATCHES:-3000}
stamp="$(date +%Y%m%d%H%M%S)_$$"

fresh_database() {
    psql -q "$PG/inventory" -c "CREATE DATABASE $1"
    DATABASE_URL="$PG/$1" "$BIN/inventory-inbox" migrate >/dev/null
}

# Maintained as `run` maintains at start-up: the closed days a fresh
# database is made with are empty, and their filters say so. Unmaintained,
# every batch would look each of them up in full, a state the service
# leaves before its first batch.
maintained() {
    DATABASE_URL="$PG/$1" "$BIN/inventory-inbox" maintain >/dev/null
}

ceiling_db="bench_ceiling_$stamp"
fresh_database "$ceiling_db"
maintained "$ceiling_db"
DATABASE_URL="$PG/$ceiling_db" "$BIN/inbox-loadgen" db-ceiling \
    --events "$events" --report "$out/db_ceiling.json"

floor_db="bench_floor_$stamp"
fresh_database "$floor_db"
psql -q -v ON_ERROR_STOP=1 -v batches="$batches" "$PG/$floor_db" \
    -f scripts/bench/floor-setup.sql >/dev/null
pgbench -n -M prepared -c 1 -t "$batches" -f scripts/bench/floor.sql "$PG/$floor_db" \
    >"$out/floor.pgbench.txt" 2>&1 || { cat "$out/floor.pgbench.txt"; exit 1; }
written=$(psql -Atq "$PG/$floor_db" -c "SELECT count(*) FROM processed_inbox")
if [[ "$written" != "$((batches * 100))" ]]; then
    echo "bench-ceiling: the floor wrote $written ledger rows, not $((batches * 100))" >&2
    exit 1
fi
"$BIN/inbox-loadgen" table floor "$out" "$batches"
