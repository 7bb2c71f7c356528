#!/usr/bin/env bash
# make profile: where the batch statement spends its time. Batches of the
# db-ceiling mix applied under EXPLAIN (ANALYZE, BUFFERS) with the plan the
# service runs (prepared, generic), at PROFILE_SIZES (1,10,100) records,
# PROFILE_BATCHES (40) each, on a fresh database; then the same with a plan
# made for each batch's values. Prints both tables (docs/benchmarks.md) and
# writes .local/bench/profile_{generic,custom}.json and the last plan of
# each as .local/bench/profile_*_plan.json.
#
# PROFILE_DATABASE=NAME profiles an existing database instead (one holding
# history, `make bench-scale`'s scale_history_<events>).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
out=.local/bench
mkdir -p "$out"
BIN="${INBOX_BIN_DIR:-$REPO/target/release}"
PG=postgres://inventory:inventory@127.0.0.1:5432
sizes=${PROFILE_SIZES:-1,10,100}
batches=${PROFILE_BATCHES:-40}

database=${PROFILE_DATABASE:-}
if [[ -z $database ]]; then
    database="profile_$(date +%Y%m%d%H%M%S)_$$"
    psql -q "$PG/inventory" -c "CREATE DATABASE $database"
    trap 'psql -q "$PG/inventory" -c "DROP DATABASE IF EXISTS $database WITH (FORCE)"' EXIT
fi
DATABASE_URL="$PG/$database" "$BIN/inventory-inbox" migrate >/dev/null
# Maintained as `run` maintains at start-up (the closed days' filters; see
# scripts/bench-ceiling.sh).
DATABASE_URL="$PG/$database" "$BIN/inventory-inbox" maintain >/dev/null

for plan in generic custom; do
    flags=()
    [[ $plan == custom ]] && flags=(--custom-plans)
    echo "## $plan plan ($database)"
    DATABASE_URL="$PG/$database" "$BIN/inbox-loadgen" profile --consumer-name "profile-$plan" \
        --sizes "$sizes" --batches "$batches" "${flags[@]}" \
        --report "$out/profile_$plan.json" --plan "$out/profile_${plan}_plan.json"
    echo
done
