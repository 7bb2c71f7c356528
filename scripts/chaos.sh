#!/usr/bin/env bash
# The fault suite under load (make chaos): on a fresh database and topic of
# the local Kafka and of a PostgreSQL primary with a streaming standby of its
# own (scripts/db-pair.sh, behind one endpoint), `inbox-loadgen chaos` drives
# the generator while it kills consumers, storms the group (under the classic
# and the consumer group protocol), restarts PostgreSQL, kills a Kafka broker,
# replays the topic under a new group and fails the database over to its
# lagging standby, reconciling after each. With CHAOS_BROKERS=3 it runs on a
# cluster of three brokers (scripts/services.sh up --brokers 3; topics
# replicated 3 times, min.insync.replicas=2) and also kills the partitions'
# leader and the group coordinator.
#
#   scripts/chaos.sh [--seconds S] [--rate N] [-- extra inbox-loadgen chaos flags]
#   CHAOS_SCENARIOS=kill-leader,kill-coordinator scripts/chaos.sh   (some only)
#
# Prints the table (scenario, events, duplicates sent, replayed, applied
# twice, lost, time to recover) and leaves the JSON report and every
# consumer's log in .local/chaos/; exits non-zero when a scenario fails.
#
# It kills the shared brokers: do not run it beside `make test`. The shared
# PostgreSQL is not touched.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
brokers=${CHAOS_BROKERS:-1}
scripts/services.sh up --brokers "$brokers"
# Left-over run databases and topics slow the broker and PostgreSQL down.
scripts/services.sh prune

seconds=30
rate=1400
extra=()
while (($#)); do
    case "$1" in
        --seconds) seconds=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) echo "chaos: unknown option $1" >&2; exit 2 ;;
    esac
done

BIN="$REPO/target/release"
PG=$(scripts/db-pair.sh up)
trap 'scripts/db-pair.sh down' EXIT
run_id="chaos_$(date +%Y%m%d%H%M%S)_$$"
out=.local/chaos
mkdir -p "$out"
rm -f "$out"/*.log

psql -q "$PG/inventory" -c "CREATE DATABASE $run_id"
DATABASE_URL="$PG/$run_id" "$BIN/inventory-inbox" migrate >/dev/null
scripts/services.sh topic "$run_id" 12 >/dev/null
scripts/services.sh topic "$run_id.dlq" 12 >/dev/null

# A 10 s session (the client default is 45 s): a member that went away
# without leaving the group (a killed process, a stopped static member) has
# its partitions moved within seconds. With CHAOS_GROUP_PROTOCOL=consumer
# (KIP-848) the session is the broker's (10 s, scripts/services.sh).
protocol_env=(--consumer-env KAFKA_PROPERTY_SESSION_TIMEOUT_MS=10000)
if [[ ${CHAOS_GROUP_PROTOCOL:-classic} == consumer ]]; then
    protocol_env=(--consumer-env GROUP_PROTOCOL=consumer)
fi
scenarios=kill-consumer,rebalance-storm,rebalance-storm-consumer,restart-database,kill-broker
if ((brokers > 1)); then
    scenarios+=,kill-leader,kill-coordinator
fi
scenarios+=,replay,failover-database
scenarios=${CHAOS_SCENARIOS:-$scenarios}
DATABASE_URL="$PG/$run_id" KAFKA_BOOTSTRAP_SERVERS=$(scripts/services.sh bootstrap) \
    "$BIN/inbox-loadgen" chaos --scenarios "$scenarios" \
    --topic "$run_id" --group "$run_id" --rate "$rate" --scenario-seconds "$seconds" \
    --consumer-bin "$BIN/inventory-inbox" \
    --consumer-env "DLQ_TOPIC=$run_id.dlq" \
    "${protocol_env[@]}" \
    --restart-database-cmd "scripts/db-pair.sh restart" \
    --cut-replica-cmd "scripts/db-pair.sh cut" \
    --failover-database-cmd "scripts/db-pair.sh failover" \
    --kill-broker-cmd "scripts/services.sh kill-kafka" \
    --start-broker-cmd "scripts/services.sh up --brokers $brokers" \
    --kill-leader-cmd "scripts/services.sh kill-kafka leader:$run_id" \
    --kill-coordinator-cmd "scripts/services.sh kill-kafka coordinator:$run_id" \
    --log-dir "$out" --report "$out/report.json" "${extra[@]}"
