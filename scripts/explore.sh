#!/usr/bin/env bash
# Seeded fault schedules against the real system (make explore): for each
# seed, `inbox-loadgen explore --seed S` on a fresh topic of the local Kafka
# and a fresh PostgreSQL primary with its streaming standby
# (scripts/db-pair.sh, behind one endpoint): the schedule the seed draws
# kills, stops, starts and freezes consumers (under the classic or the
# consumer group protocol), restarts PostgreSQL, backs it up and puts it
# back under the running group, fails it over to its lagging standby, kills
# brokers, replays through `positions set` and runs maintenance, while the
# generator sends its mix; then the database must equal the reference model
# fed with what the topic holds.
#
#   scripts/explore.sh [SEED...]          (default: EXPLORE_SEEDS, else 1 2 3;
#                                          seeds apart by spaces or commas)
#   EXPLORE_SECONDS (60)  EXPLORE_RATE (400)  EXPLORE_BROKERS (1; 3: a cluster,
#   whose nodes are killed one at a time)  INBOX_BIN_DIR (target/release)
#   EXPLORE_OUT (.local/explore)
#
# Prints one line per seed and a table (.local/explore/table.md); each seed's
# JSON report and its members' logs are in .local/explore/SEED/. Exits
# non-zero when a seed diverges or fails. It kills the shared brokers: do not
# run it beside `make test`. The shared PostgreSQL is not touched.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
seconds=${EXPLORE_SECONDS:-60}
rate=${EXPLORE_RATE:-400}
brokers=${EXPLORE_BROKERS:-1}
BIN="${INBOX_BIN_DIR:-$REPO/target/release}"
out=${EXPLORE_OUT:-.local/explore}
if (($#)); then
    list="$*"
else
    list=${EXPLORE_SEEDS:-1 2 3}
fi
read -r -a seeds <<<"${list//,/ }"
for seed in "${seeds[@]}"; do
    if [[ ! $seed =~ ^[0-9]+$ ]]; then
        echo "explore: seed '$seed' is not a number: SEEDS takes numbers apart by spaces or commas (SEEDS=\"11 12\" or SEEDS=11,12)" >&2
        exit 2
    fi
done
if ((${#seeds[@]} == 0)); then
    echo "explore: no seed: SEEDS takes numbers apart by spaces or commas (SEEDS=\"11 12\" or SEEDS=11,12)" >&2
    exit 2
fi

scripts/services.sh up --brokers "$brokers"
scripts/services.sh prune
trap 'scripts/db-pair.sh down >/dev/null 2>&1 || true' EXIT
mkdir -p "$out"
failed=0
for seed in "${seeds[@]}"; do
    run_id="lt_explore_${seed}_$(date +%Y%m%d%H%M%S)"
    dir="$out/$seed"
    rm -rf "$dir"
    mkdir -p "$dir"
    if ! pg=$(scripts/db-pair.sh up 2>"$dir/db-pair.log"); then
        echo "explore: seed $seed: the database pair did not start: $(tail -n 1 "$dir/db-pair.log")" >&2
        exit 1
    fi
    psql -q "$pg/inventory" -c "CREATE DATABASE $run_id"
    DATABASE_URL="$pg/$run_id" "$BIN/inventory-inbox" migrate >/dev/null
    scripts/services.sh topic "$run_id" 12 >/dev/null
    scripts/services.sh topic "$run_id.dlq" 12 >/dev/null
    kill_broker="scripts/services.sh kill-kafka"
    if ((brokers > 1)); then kill_broker+=" {node}"; fi
    started=$(date +%s)
    set +e
    DATABASE_URL="$pg/$run_id" KAFKA_BOOTSTRAP_SERVERS=$(scripts/services.sh bootstrap) \
        "$BIN/inbox-loadgen" explore --seed "$seed" --seconds "$seconds" --rate "$rate" \
        --topic "$run_id" --group "$run_id" \
        --consumer-bin "$BIN/inventory-inbox" \
        --consumer-env "DLQ_TOPIC=$run_id.dlq" \
        --consumer-protocol \
        --restart-database-cmd "scripts/db-pair.sh restart" \
        --backup-database-cmd "scripts/db-pair.sh backup" \
        --restore-database-cmd "scripts/db-pair.sh restore" \
        --cut-replica-cmd "scripts/db-pair.sh cut" \
        --failover-database-cmd "scripts/db-pair.sh failover" \
        --kill-broker-cmd "$kill_broker" \
        --start-broker-cmd "scripts/services.sh up --brokers $brokers" \
        --brokers "$brokers" \
        --log-dir "$dir" --report "$dir/report.json" >"$dir/explore.out" 2>"$dir/explore.err"
    status=$?
    set -e
    cat "$dir/explore.out"
    took=$(($(date +%s) - started))
    if ((status == 0)); then
        result=ok
    elif ((status == 1)); then
        result=DIVERGED
        failed=1
    else
        result="FAILED ($(tail -n 1 "$dir/explore.err"))"
        failed=1
        tail -n 20 "$dir/explore.err" >&2
    fi
    printf '%s\n%s\n' "$result" "$took" >"$dir/result.txt"
    scripts/db-pair.sh down >/dev/null 2>&1 || true
done

"$BIN/inbox-loadgen" table explore "$out" --seconds "$seconds" --rate "$rate" \
    --brokers "$brokers" "${seeds[@]}" >"$out/table.md" || failed=1
cat "$out/table.md"
exit "$failed"
