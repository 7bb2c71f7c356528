#!/usr/bin/env bash
# make bench-network: the figures of docs/design.md#numbers with the database at a network
# distance. Toxiproxy (scripts/toxiproxy.sh) sits between the consumer and
# PostgreSQL and adds half the round trip in each direction; Kafka, the
# generator's seeding and its reconciliation talk to the services directly.
# For the loopback row (no proxy) and for each round trip in
# BENCH_NETWORK_RTTS (default "0 2 10 50" ms), each on a fresh database and
# topic:
#   1. steady 1,400 events/s for BENCH_NETWORK_STEADY_SECONDS (60; the first
#      5 s are the warm-up, reported apart)
#   2. max throughput: BENCH_NETWORK_PREFILL (100000) events pre-filled, drained
#   3. a 60 s backlog: the consumer paused 60 s at 1,400/s, then catching up
# Every run is reconciled. Writes .local/bench/network.json and prints the
# table with the ratios to loopback; exits non-zero if any run did not
# reconcile.
#
#   scripts/bench-network.sh --sweep   instead measures lanes: max throughput
#       and steady latency for DB_POOL_SIZE in BENCH_NETWORK_LANES ("1 2 4 8")
#       at round trips of 0, 2 and 10 ms (.local/bench/lanes.json).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# Left-over run databases and topics slow the broker and PostgreSQL down.
scripts/services.sh prune
out=.local/bench/network
mkdir -p "$out"
rtts=${BENCH_NETWORK_RTTS:-"0 2 10 50"}
# The table is this checkout's own build (its make target builds it), not
# INBOX_BIN_DIR's: an A/B build may predate `inbox-loadgen table`.
tables="$REPO/target/release/inbox-loadgen"
prefill=${BENCH_NETWORK_PREFILL:-100000}
steady_seconds=${BENCH_NETWORK_STEADY_SECONDS:-60}
direct=127.0.0.1:5432
proxied=127.0.0.1:25432

# Toxiproxy started here is stopped here; one already running is left so.
toxiproxy_started=0
scripts/toxiproxy.sh status >/dev/null 2>&1 || toxiproxy_started=1
scripts/toxiproxy.sh up
trap 'scripts/toxiproxy.sh delay 0 >/dev/null 2>&1 || true
      ((toxiproxy_started)) && scripts/toxiproxy.sh down >/dev/null 2>&1' EXIT

status=0
# loadtest NAME CONSUMER_DB [loadtest.sh options]: one reconciled run.
loadtest() {
    local name=$1 db=$2
    shift 2
    LOADTEST_CONSUMER_DB=$db scripts/loadtest.sh --scenario "$name" \
        --report "$out/$name.json" "$@" || status=1
}

at_distance() { # LABEL RTT_MS
    if [[ $2 == loopback ]]; then
        echo "$direct"
    else
        scripts/toxiproxy.sh delay $(($2 / 2)) >&2
        echo "$proxied"
    fi
}

if [[ ${1:-} == --sweep ]]; then
    for rtt in 0 2 10; do
        db=$(at_distance "rtt$rtt" "$rtt")
        for lanes in ${BENCH_NETWORK_LANES:-1 2 4 8}; do
            DB_POOL_SIZE=$lanes loadtest "lanes${lanes}_rtt${rtt}_max" "$db" \
                --prefill "${BENCH_NETWORK_SWEEP_PREFILL:-50000}" -- --duplicate-ratio 0 --poison-ratio 0
            DB_POOL_SIZE=$lanes loadtest "lanes${lanes}_rtt${rtt}_steady" "$db" \
                --duration 30 --rate 1400 --pause-for 0 -- --warmup 5
        done
    done
    "$tables" table lanes "$out" "${BENCH_NETWORK_LANES:-1 2 4 8}"
    exit "$status"
fi

for rtt in loopback $rtts; do
    label=$([[ $rtt == loopback ]] && echo loopback || echo "rtt$rtt")
    db=$(at_distance "$label" "$rtt")
    loadtest "${label}_steady" "$db" --duration "$steady_seconds" --rate 1400 --pause-for 0 -- --warmup 5
    loadtest "${label}_max" "$db" --prefill "$prefill" -- --duplicate-ratio 0 --poison-ratio 0
    loadtest "${label}_backlog" "$db" --duration 90 --rate 1400 --pause-at 15 --pause-for 60
done
"$tables" table network "$out" "$rtts" || status=1
exit "$status"
