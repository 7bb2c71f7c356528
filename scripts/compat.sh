#!/usr/bin/env bash
# make compat: the core acceptance against each pinned Kafka version
# (services/common.sh KAFKA_VERSIONS), one version after the other, and the
# table of docs/deploy.md#kafka-versions.
#
# Each version gets a fresh single-node KRaft broker of its own in
# .local/compat/kafka-VERSION (its data formatted anew on every run, so no
# version ever reads another's) on 127.0.0.1:COMPAT_KAFKA_PORT (19092, its
# controller one above), beside the local broker of `scripts/services.sh up`
# on 9092, which it neither uses nor touches. The tests reach it through
# INBOX_TEST_KAFKA, their private brokers take its jars through
# INBOX_TEST_KAFKA_LIBS. Their databases are made in the local PostgreSQL on
# 5432 (started by `scripts/services.sh up` unless something answers there),
# one per test as always.
#
# The core acceptance: tests/duplicates.rs, crash_recovery.rs, rebalance.rs
# and group_protocol.rs. Kafka's consumer group protocol (KIP-848,
# GROUP_PROTOCOL=consumer) is general from 4.0 on; a 3.x broker does not
# offer it to this consumer (3.9 has it as an early-access preview, off by
# default, with a ConsumerGroupHeartbeat v0 librdkafka does not speak), so
# on 3.x the tests of that protocol (KIP848_TESTS) do not run, and the
# table says so. They are named here, not skipped by the tests themselves:
# a test of the consumer protocol added without being named here fails on
# 3.x, it does not pass unseen.
#
# Usage: scripts/compat.sh [VERSION...]   (default: every pinned version)
# Writes .local/compat/table.md, and the table in docs/deploy.md after a run of
# every version; logs in
# .local/compat/kafka-VERSION/ (tests.log, server.log). Exit 1 if a version
# failed a test. Run as root (it may install Java, Maven and PostgreSQL).
set -euo pipefail
shopt -s inherit_errexit
HERE="$(dirname "${BASH_SOURCE[0]}")"
source "$HERE/services/common.sh"

CARGO=${CARGO:-cargo}
COMPAT_DIR="$LOCAL/compat"
COMPAT_KAFKA_PORT=${COMPAT_KAFKA_PORT:-19092}
DOC="$REPO/docs/deploy.md"
TABLE="$COMPAT_DIR/table.md"
CORE_TESTS=(duplicates crash_recovery rebalance group_protocol)
# The tests that need the consumer group protocol (test name filters).
KIP848_TESTS=(
    a_static_member_restarted_too_soon_exits_and_a_later_start_goes_on
    twins_with_one_instance_id_end_with_one_stopping_and_nothing_doubled
    a_member_fenced_while_it_retries_a_batch_joins_again
    a_rebalance_storm_under_the_consumer_protocol_loses_and_doubles_nothing
)

log() { printf '[compat] %s\n' "$*" >&2; }

# Whether Kafka VERSION offers this consumer the consumer group protocol.
has_consumer_protocol() {
    ((${1%%.*} >= 4))
}

# VERSION's broker in a directory and on a port of its own.
compat_kafka() {
    SERVICES_KAFKA_DIR="$COMPAT_DIR/kafka-$1" SERVICES_KAFKA_PORT=$COMPAT_KAFKA_PORT services kafka "${@:2}"
}

# Starts VERSION's broker on COMPAT_KAFKA_PORT on fresh data; prints its jars'
# directory.
compat_broker_up() {
    local libs
    libs=$(kafka_jars "$1")
    compat_kafka "$1" up 1 "$1" "$libs" --fresh >&2
    echo "$libs"
}

compat_broker_down() {
    compat_kafka "$1" down
}

# One cell per test file from a cargo test log: "N/N", "N/N (+K not run)",
# or "N passed, M failed"; "—" for a file that did not run.
cells_of() {
    local log=$1 file line passed failed filtered out=()
    for file in "${CORE_TESTS[@]}"; do
        line=$(awk -v f="tests/$file.rs" '
            /^ *Running / { current = (index($0, f) > 0) }
            current && /^test result:/ { print; exit }' "$log")
        if [[ -z $line ]]; then
            out+=("—")
            continue
        fi
        passed=$(sed -n 's/.* \([0-9]*\) passed;.*/\1/p' <<<"$line")
        failed=$(sed -n 's/.* \([0-9]*\) failed;.*/\1/p' <<<"$line")
        filtered=$(sed -n 's/.* \([0-9]*\) filtered out;.*/\1/p' <<<"$line")
        if ((failed > 0)); then
            out+=("**$passed passed, $failed failed**")
        elif ((passed == 0)); then
            out+=("not run (no KIP-848)")
        elif ((filtered > 0)); then
            out+=("$passed/$passed (+$filtered KIP-848: not run)")
        else
            out+=("$passed/$passed")
        fi
    done
    local IFS='|'
    echo "${out[*]}"
}

# Runs the core acceptance against VERSION; adds its row to ROWS, sets
# FAILED when a test failed or the broker did not start.
run_version() {
    local version=$1 dir="$COMPAT_DIR/kafka-$1" libs protocols skips=() files=() rc=0 started=$SECONDS
    log "Kafka $version on 127.0.0.1:$COMPAT_KAFKA_PORT"
    if ! libs=$(compat_broker_up "$version"); then
        ROWS+=("| $version | | | | | | **the broker did not start** (.local/compat/kafka-$version) | |")
        FAILED=1
        return 0
    fi
    # shellcheck disable=SC2064 # the version is fixed now
    trap "compat_broker_down '$version'" EXIT
    protocols="classic, consumer"
    if ! has_consumer_protocol "$version"; then
        protocols="classic"
        for test in "${KIP848_TESTS[@]}"; do skips+=(--skip "$test"); done
    fi
    for test in "${CORE_TESTS[@]}"; do files+=(--test "$test"); done
    INBOX_TEST_KAFKA="127.0.0.1:$COMPAT_KAFKA_PORT" INBOX_TEST_KAFKA_LIBS="$libs" \
        "$CARGO" test --features failpoints "${files[@]}" -- "${skips[@]}" \
        >"$dir/tests.log" 2>&1 || rc=$?
    compat_broker_down "$version"
    trap - EXIT
    local verdict=green
    if ((rc != 0)); then
        verdict="**failed** (exit $rc)"
        FAILED=1
    fi
    log "Kafka $version: $verdict in $((SECONDS - started)) s (log $dir/tests.log)"
    ROWS+=("| $version | $protocols | $(cells_of "$dir/tests.log" | sed 's/|/ | /g') | $verdict | $(((SECONDS - started + 30) / 60)) min |")
}

write_table() {
    {
        echo "<!-- compat:begin (written by make compat) -->"
        echo "\`make compat\` of $(date -u +%Y-%m-%d) (cells: tests passed/run per file; logs in .local/compat/):"
        echo
        echo "| Kafka | group protocols | duplicates | crash_recovery | rebalance | group_protocol | result | time |"
        echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
        printf '%s\n' "${ROWS[@]}"
        echo "<!-- compat:end -->"
    } >"$TABLE"
    if ((!ALL_VERSIONS)); then
        log "some versions only: table in $TABLE, docs/deploy.md left as it is"
    elif grep -q '^<!-- compat:begin' "$DOC" && grep -q '^<!-- compat:end' "$DOC"; then
        awk -v table="$TABLE" '
            /^<!-- compat:begin/ { while ((getline line < table) > 0) print line; skip = 1; next }
            /^<!-- compat:end/ { skip = 0; next }
            !skip' "$DOC" >"$DOC.tmp"
        mv "$DOC.tmp" "$DOC"
        log "table written to docs/deploy.md#kafka-versions and $TABLE"
    else
        log "docs/deploy.md has no compat markers; table in $TABLE"
    fi
    cat "$TABLE"
}

main() {
    ((EUID == 0)) || { log "run as root (it may install Java, Maven and PostgreSQL)"; exit 1; }
    local versions=("$@")
    # Only a run of every version rewrites the table of docs/deploy.md.
    ALL_VERSIONS=0
    if ((${#versions[@]} == 0)); then
        ALL_VERSIONS=1
        versions=("${KAFKA_VERSIONS[@]}")
    fi
    mkdir -p "$COMPAT_DIR"
    exec 8>"$COMPAT_DIR/.lock"
    flock -n 8 || { log "another make compat runs ($COMPAT_DIR/.lock)"; exit 1; }
    "$HERE/service-deps.sh"
    if ! port_open 127.0.0.1 5432; then
        "$HERE/services.sh" up
    fi
    log "building the tests"
    "$CARGO" test --features failpoints --no-run "${CORE_TESTS[@]/#/--test=}" >"$COMPAT_DIR/build.log" 2>&1 ||
        { tail -n 30 "$COMPAT_DIR/build.log" >&2; exit 1; }
    ROWS=()
    FAILED=0
    local version
    for version in "${versions[@]}"; do
        run_version "$version"
    done
    write_table
    return "$FAILED"
}

main "$@"
