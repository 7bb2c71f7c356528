#!/usr/bin/env bash
# make bench: the figures of docs/design.md#numbers in one run, against the same broker and
# database server, each scenario on a fresh database and topic:
#   1. steady 1,400 events/s for 60 s (the first 5 s, a new topic and a cold
#      consumer, are reported apart as the warm-up, not in the percentiles)
#   2. lag spike: the consumer paused 60 s at 1,400/s, then catching up
#   3. max throughput: a pre-filled topic drained by the batch strategy
#   4. the same by --strategy per-record (the classic inbox baseline)
#   5. the database-only ceiling: the batch transaction driven directly,
#      and its floor, the rows it writes written bare (scripts/bench-ceiling.sh)
# Writes .local/bench/results.json and prints a table.
#
# BENCH_PREFILL (default 200000) sizes 3 and 5; BENCH_PER_RECORD_PREFILL
# (default 20000) sizes 4, whose rate is a few hundred events/s: draining
# 200,000 that way would take a quarter of an hour for the same figure.
# INBOX_BIN_DIR runs another build in every scenario, the ceiling included
# (an A/B comparison); otherwise target/release, which `make bench` builds.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# Left-over run databases and topics slow the broker and PostgreSQL down.
scripts/services.sh prune
out=.local/bench
mkdir -p "$out"
prefill=${BENCH_PREFILL:-200000}
per_record_prefill=${BENCH_PER_RECORD_PREFILL:-20000}

scripts/loadtest.sh --scenario steady --report "$out/steady.json" \
    --duration 60 --rate 1400 --pause-for 0 -- --warmup 5
scripts/loadtest.sh --scenario lag_spike --report "$out/lag_spike.json" \
    --duration 90 --rate 1400 --pause-at 15 --pause-for 60
scripts/loadtest.sh --scenario max_batch --report "$out/max_batch.json" \
    --prefill "$prefill" -- --duplicate-ratio 0 --poison-ratio 0
scripts/loadtest.sh --scenario max_per_record --strategy per-record \
    --report "$out/max_per_record.json" \
    --prefill "$per_record_prefill" -- --duplicate-ratio 0 --poison-ratio 0

CEILING_EVENTS="$prefill" scripts/bench-ceiling.sh "$out"

# The table is this checkout's own build (its make target builds it), not
# INBOX_BIN_DIR's: an A/B build may predate `inbox-loadgen table`.
"$REPO/target/release/inbox-loadgen" table bench "$out"
