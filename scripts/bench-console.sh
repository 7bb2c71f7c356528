#!/usr/bin/env bash
# The console's pages at scale: a scratch database migrated by the service,
# CONSOLE_PARKED parked rows (default 1,000,000) of one day written
# set-based (4 % unknown_sku, the group an operator replays; 1/7 of the rest
# invalid_field; the rest malformed_json), then each page timed with curl
# (the median of CONSOLE_TRIES, default 5, after one warm-up) against a
# console signed in with a token. Prints a Markdown table; drops the
# database at the end. The topic is the local broker's orders.placed.v1
# (the overview's and positions' Kafka look-ups); the ledger is empty (the
# chart's ledger scan at 30 M events is not measured here).
#
#   INBOX_BIN_DIR     where inventory-inbox is (default target/release)
#   CONSOLE_DATABASE  a database this script filled before (kept): timed
#                     again without writing it again, and not dropped
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
rows=${CONSOLE_PARKED:-1000000}
tries=${CONSOLE_TRIES:-5}
BIN="${INBOX_BIN_DIR:-$REPO/target/release}"
PG=postgres://inventory:inventory@127.0.0.1:5432
db=${CONSOLE_DATABASE:-console_scale_$$}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
token=bench-console-token-$$-0123456789
jar=$(mktemp)
console_pid=
cleanup() {
    [[ -n $console_pid ]] && kill "$console_pid" 2>/dev/null && wait "$console_pid" 2>/dev/null
    rm -f "$jar"
    [[ -n ${CONSOLE_DATABASE:-} ]] || psql -q "$PG/inventory" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
}
trap cleanup EXIT

fill() {
psql -q "$PG/inventory" -c "CREATE DATABASE $db"
DATABASE_URL="$PG/$db" "$BIN/inventory-inbox" migrate >/dev/null
started=$(date +%s)
psql -q "$PG/$db" -v rows="$rows" <<'SQL'
INSERT INTO inbox_parked (parked_day, consumer, topic, kafka_partition, kafka_offset,
                          message_id, reason, error, payload, headers, parked_at,
                          record_key, dlq_sent_at)
SELECT current_date, 'inventory-allocation-service', 'orders.placed.v1', g % 12, g,
       gen_random_uuid(),
       CASE WHEN g % 25 = 0 THEN 'unknown_sku' WHEN g % 7 = 0 THEN 'invalid_field'
            ELSE 'malformed_json' END,
       CASE WHEN g % 25 = 0 THEN 'sku "SKU-' || (g % 1000) || '" is not in inventory_stock'
            ELSE 'not JSON: expected a value at byte 0' END,
       convert_to('{"event_id":"' || gen_random_uuid() || '","event_type":"OrderPlaced",'
                  || '"schema_version":1,"order_id":"ORD-' || g || '",'
                  || '"occurred_at":"2026-12-06T12:00:00Z","lines":[{"sku":"SKU-'
                  || (g % 1000) || '","quantity":1}]}', 'UTF8'),
       '{"ce_source":"bench"}'::jsonb,
       (current_date::timestamp AT TIME ZONE 'UTC') + (g % 80000) * interval '1 second',
       convert_to('ORD-' || g, 'UTF8'),
       now()
FROM generate_series(1, :rows) AS g;
VACUUM ANALYZE inbox_parked;
SQL
echo "bench-console: $rows parked rows written in $(($(date +%s) - started)) s" >&2
}
if [[ -n ${CONSOLE_DATABASE:-} ]]; then
    rows=$(psql -At "$PG/$db" -c "SELECT count(*) FROM inbox_parked")
else
    fill
fi

DATABASE_URL="$PG/$db" INBOX_CONSOLE_ADDR="127.0.0.1:$port" INBOX_CONSOLE_TOKEN="$token" \
    "$BIN/inventory-inbox" console 2>/dev/null &
console_pid=$!
for _ in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/breaker" && break
    sleep 0.1
done
curl -s -o /dev/null -c "$jar" --data-urlencode "token=$token" "http://127.0.0.1:$port/signin"
csrf=$(curl -s -b "$jar" "http://127.0.0.1:$port/parked?reason=invalid_field" \
    | grep -o 'name="csrf" value="[0-9a-f]*"' | head -1 | sed 's/.*value="//; s/"//')
[[ -n $csrf ]] || { echo "bench-console: could not sign in" >&2; exit 1; }
id=$(psql -At "$PG/$db" -c "SELECT id FROM inbox_parked ORDER BY id OFFSET ($rows / 2) LIMIT 1")
after=$(psql -At "$PG/$db" -c "SELECT id FROM inbox_parked ORDER BY id OFFSET ($rows * 9 / 10) LIMIT 1")
today=$(date -u +%F)

# time PATH [curl args...]: the median of $tries answers, in ms.
time_page() {
    local path=$1
    shift
    curl -s -o /dev/null -b "$jar" "$@" "http://127.0.0.1:$port$path"
    for _ in $(seq "$tries"); do
        curl -s -o /dev/null -b "$jar" -w '%{time_total}\n' "$@" "http://127.0.0.1:$port$path"
    done | sort -n | awk '{t[NR]=$1} END {printf "%.0f", t[int((NR+1)/2)] * 1000}'
}

echo "| page | ms (median of $tries) |"
echo "|---|---|"
for page in "/" "/parked" "/parked?reason=unknown_sku" "/parked?reason=event_id_conflict" \
        "/parked?reason=unknown_sku&day=$today" "/parked?partition=7" "/parked?after=$after" \
        "/parked?order=ORD-4242" "/parked?sku=SKU-7" "/parked/$id" "/search?q=ORD-4242" \
        "/positions" "/breaker"; do
    echo "| \`${page//$today/DAY}\` | $(time_page "$page") |"
done
echo "| replay confirmation of the unknown_sku group (POST, $((rows / 25)) records) | $(time_page /parked/replay \
    --data-urlencode "csrf=$csrf" --data-urlencode reason=unknown_sku --data-urlencode "day=$today") |"
