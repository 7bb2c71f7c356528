#!/usr/bin/env bash
# make bench-deploy: deploys under load (docs/deploy.md#deploys-under-load).
# A group of consumers on a fresh database and topic of the local services
# takes a paced 1,400 events/s while it is rolled (one member at a time,
# highest ordinal first, each ready before the next, a pod-start gap between
# a member's exit and its new start) and scaled from 3 to 6 members and
# back, as a StatefulSet does; a baseline phase without either in the same
# run. Each phase is reconciled (0 lost, 0 applied twice) and reports its
# end-to-end p50/p95/p99/max over the whole phase and over the roll's
# window (`inbox-loadgen deploy`).
#
# Two configurations alternate, round after round:
#   old     static members (group.instance.id = pod name), the classic
#           protocol's client defaults, DB_POOL_SIZE=4: deploy/ as of issue 47
#   deploy  what deploy/base ships now: static when its StatefulSet sets
#           KAFKA_PROPERTY_GROUP_INSTANCE_ID, and the tuning settings of
#           deploy/base/config.env (connection, security and naming ones
#           left out: those are the local services')
#
# BENCH_DEPLOY_ROUNDS (2), BENCH_DEPLOY_SECONDS (90, per phase),
# BENCH_DEPLOY_GAPS (0,2,10: the rolls of `deploy`; `old` rolls with 2),
# BENCH_DEPLOY_RATE (1400), BENCH_DEPLOY_MEMBERS (3), BENCH_DEPLOY_SCALE_TO (6),
# BENCH_DEPLOY_PHASES (baseline,roll,scale), BENCH_DEPLOY_ROLL_EVERY (20: s
# between two restarts at least, and of the scaled-out group). BENCH_DEPLOY_VARIANTS replaces
# the two (one `inbox-loadgen deploy --variant` a line: `NAME static|dynamic
# [gaps=G,…] [KEY=VALUE …]`), to measure other choices; a word
# `group:KEY=VALUE` there is a group config set on the variant's group
# before it starts (KIP-848's `consumer.heartbeat.interval.ms`, as an
# operator sets it with kafka-configs --entity-type groups).
# INBOX_BIN_DIR runs another build (an A/B); otherwise target/release.
#
# Writes .local/bench/deploy.json and prints the table; the members' logs
# go to .local/bench/deploy/. Exits non-zero when a phase fails to
# reconcile. Wrap it in `flock /tmp/bench.lock` on a shared machine.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BIN="${INBOX_BIN_DIR:-$REPO/target/release}"
PG=postgres://inventory:inventory@127.0.0.1:5432
out=.local/bench
mkdir -p "$out/deploy"
rm -f "$out"/deploy/*.log

# The settings of deploy/base that shape a member's behaviour in its group.
deploy_variant() {
    local membership=dynamic settings=() line
    if grep -q 'name: KAFKA_PROPERTY_GROUP_INSTANCE_ID' deploy/base/statefulset.yaml; then
        membership=static
    fi
    while IFS= read -r line; do
        [[ -z $line || $line == \#* ]] && continue
        case ${line%%=*} in
            KAFKA_BOOTSTRAP_SERVERS | KAFKA_TOPIC | KAFKA_GROUP_ID | INBOX_CONSUMER_NAME | \
                DLQ_TOPIC | METRICS_ADDR | RUST_LOG | KAFKA_PROPERTY_SECURITY_PROTOCOL | \
                KAFKA_PROPERTY_SASL_*) continue ;;
        esac
        settings+=("$line")
    done <deploy/base/config.env
    echo "deploy $membership gaps=${BENCH_DEPLOY_GAPS:-0,2,10} ${settings[*]}"
}

variants=()
if [[ -n ${BENCH_DEPLOY_VARIANTS:-} ]]; then
    mapfile -t variants < <(grep -v '^[[:space:]]*$' <<<"$BENCH_DEPLOY_VARIANTS")
else
    variants=("old static gaps=2 DB_POOL_SIZE=4" "$(deploy_variant)")
fi

# Its own names (not those `scripts/services.sh prune` drops, which a
# concurrent `make test` or `make bench` runs): dropped again at the end.
run_id="deploy_$(date +%Y%m%d%H%M%S)_$$"

# shellcheck source=services/common.sh
source scripts/services/common.sh
variant_flags=()
for variant in "${variants[@]}"; do
    words=()
    for word in $variant; do
        if [[ $word == group:* ]]; then
            services kafka tool kafka.admin.ConfigCommand --bootstrap-server "$(services kafka bootstrap)" \
                --command-config "$LOCAL/kafka/admin.properties" --alter --entity-type groups \
                --entity-name "$run_id-${variant%% *}" --add-config "${word#group:}" >/dev/null
        else
            words+=("$word")
        fi
    done
    variant_flags+=(--variant "${words[*]}")
done

psql -q "$PG/inventory" -c "CREATE DATABASE $run_id"
cleanup() {
    psql -q "$PG/inventory" -c "DROP DATABASE IF EXISTS $run_id WITH (FORCE)" || true
}
trap cleanup EXIT
DATABASE_URL="$PG/$run_id" "$BIN/inventory-inbox" migrate >/dev/null
scripts/services.sh topic "$run_id" 12 >/dev/null

DATABASE_URL="$PG/$run_id" KAFKA_BOOTSTRAP_SERVERS=$(scripts/services.sh bootstrap) \
    "$BIN/inbox-loadgen" deploy --topic "$run_id" \
    --consumer-bin "$BIN/inventory-inbox" --consumer-env DLQ_TOPIC= \
    --rate "${BENCH_DEPLOY_RATE:-1400}" --phase-seconds "${BENCH_DEPLOY_SECONDS:-90}" \
    --members "${BENCH_DEPLOY_MEMBERS:-3}" --scale-to "${BENCH_DEPLOY_SCALE_TO:-6}" \
    --rounds "${BENCH_DEPLOY_ROUNDS:-2}" --phases "${BENCH_DEPLOY_PHASES:-baseline,roll,scale}" \
    --roll-every "${BENCH_DEPLOY_ROLL_EVERY:-20}" --gaps 2 "${variant_flags[@]}" \
    --log-dir "$out/deploy" --report "$out/deploy.json"
