#!/usr/bin/env bash
# Local services of inventory-inbox (docs/design.md#layout-and-commands), started for real on loopback:
#
#   PostgreSQL 15 (Debian's packages)  our own cluster on 127.0.0.1:5432
#   Apache Kafka (Maven Central jars)   one KRaft broker+controller on 127.0.0.1:9092,
#                                       or three (--brokers 3) on 9092, 9094, 9096;
#                                       4.1.2, or 3.9.2 or 4.4.0 (--kafka-version)
#
# Usage: scripts/services.sh up [--brokers 1|3] [--kafka-version V] | down | status | topic NAME [PARTITIONS]
#                           | restart-postgres | kill-kafka [NODE] | prune | bootstrap
#
#   up      install what is missing, start both, wait until both answer, create
#           the role/database of the default DATABASE_URL and the topics.
#           Idempotent: with both running it only checks them (and starts a
#           node of the cluster that is down). --brokers 3 (or KAFKA_BROKERS=3)
#           runs a cluster of three combined broker+controller nodes, topics
#           replicated 3 times with min.insync.replicas=2; the default is one.
#           Changing the count wipes the local Kafka data (a new cluster).
#           --kafka-version V (or KAFKA_VERSION=V) runs Kafka V, one of
#           3.9.2, 4.1.2 (the default) and 4.4.0 (make compat tests each);
#           changing the version wipes the local Kafka data too (data is
#           never read by a version other than the one that wrote it).
#   down    stop what `up` started (and only that: found through pid files).
#   status  print the state of each; exit 1 if either is down.
#   topic   create a topic if it does not exist (default 12 partitions).
#   restart-postgres  restart PostgreSQL as an operator would (fast shutdown,
#           sessions terminated) and wait until it answers (make chaos).
#   kill-kafka [NODE]  kill -9 a broker, no shutdown of any kind (make chaos);
#           `up` starts it again on its data. NODE is a node id (default 1),
#           leader:TOPIC (the node leading most of TOPIC's partitions) or
#           coordinator:GROUP (the group's coordinator); prints the node id.
#   prune   drop the databases and topics tests and runs made for themselves.
#   bootstrap  print the bootstrap servers (every node of the cluster).
#
# Run as root (it installs Debian packages and runs PostgreSQL as `postgres`).
# The services themselves are in scripts/services/ (postgres.sh, kafka.sh,
# with their configuration templates, which the tests' private servers read
# too); what they need is installed by scripts/service-deps.sh.
# Everything it generates is under <repo>/.local/ (ignored by git):
#   .local/pg/{data,run,postgres.log}                PostgreSQL cluster, socket, log
#   .local/kafka/{libs,data,server.properties,...}   link to the version's jars, node 1's data, config, logs, pid
#   .local/kafka/{version,brokers}                   the version and node count the data is of
#   .local/kafka-dist/VERSION-POMHASH/               the jars of each version fetched
#   .local/kafka/node-N/{data,server.properties,...} nodes 2 and 3 of a cluster
set -euo pipefail
HERE="$(dirname "${BASH_SOURCE[0]}")"
# The caller's KAFKA_VERSION, before services/kafka.sh sets it to the
# version that runs.
ASKED_KAFKA_VERSION=${KAFKA_VERSION:-}
source "$HERE/services/common.sh"
source "$HERE/services/postgres.sh"
source "$HERE/services/kafka.sh"

cmd_up() {
    local brokers=${KAFKA_BROKERS:-1} version=${ASKED_KAFKA_VERSION:-$KAFKA_DEFAULT_VERSION}
    while (($#)); do
        case $1 in
            --brokers) [[ $# -ge 2 ]] || die "--brokers needs a count (1 or 3)"; brokers=$2; shift 2 ;;
            --brokers=*) brokers=${1#--brokers=}; shift ;;
            --kafka-version) [[ $# -ge 2 ]] || die "--kafka-version needs one of ${KAFKA_VERSIONS[*]}"; version=$2; shift 2 ;;
            --kafka-version=*) version=${1#--kafka-version=}; shift ;;
            *) die "up: unknown option $1 (usage: $0 up [--brokers 1|3] [--kafka-version V])" ;;
        esac
    done
    ((EUID == 0)) || die "run as root (postgres is started as the postgres user)"
    lock
    # fd 9 closed: nothing the installs start may hold the lock (it stays
    # held here).
    "$HERE/service-deps.sh" 9>&-
    pg_init
    pg_start
    pg_wait_ready
    pg_apply_pending
    pg_bootstrap
    log "postgres ready on $PG_HOST:$PG_PORT (DATABASE_URL=postgres://$APP_ROLE:$APP_PASSWORD@$PG_HOST:$PG_PORT/$APP_DB)"

    kafka_use_version "$version"
    kafka_resize "$brokers"
    local id
    for ((id = 1; id <= KAFKA_SIZE; id++)); do
        kafka_select "$id"
        kafka_write_config
    done
    kafka_select 1
    kafka_start
    kafka_ensure_topics
    log "kafka $KAFKA_VERSION ready on $KAFKA_BOOTSTRAP (node:pid $(kafka_pids))"
}

cmd_down() {
    lock
    kafka_stop_all
    pg_stop
}

cmd_status() {
    local down=0 pid
    if pid=$(pg_pid) && "$PG_BIN/pg_isready" -q -h "$PG_HOST" -p "$PG_PORT"; then
        echo "postgres: up (pid $pid, $PG_HOST:$PG_PORT, data $PG_DATA)"
    elif pid=$(pg_pid); then
        echo "postgres: starting or not answering (pid $pid)"
        down=1
    else
        echo "postgres: down"
        down=1
    fi
    local id name=kafka
    for ((id = 1; id <= KAFKA_SIZE; id++)); do
        kafka_select "$id"
        ((KAFKA_SIZE > 1)) && name="kafka-$id"
        if pid=$(kafka_pid) && port_open "$KAFKA_HOST" "$KAFKA_PORT"; then
            printf '%-10s%s\n' "$name:" "up (Kafka $KAFKA_VERSION, pid $pid, $KAFKA_HOST:$KAFKA_PORT, data $KAFKA_DATA)"
        elif pid=$(kafka_pid); then
            printf '%-10s%s\n' "$name:" "starting or not answering (pid $pid)"
            down=1
        else
            printf '%-10s%s\n' "$name:" "down"
            down=1
        fi
    done
    kafka_select 1
    return "$down"
}

# Databases and topics that tests and benchmark runs create for themselves
# (each a fresh name) and that a crash or an interrupted run leaves behind.
# Hundreds of them make the broker and autovacuum work in the background and
# every later measurement slower. Only run while no test or run is going on.
# _sqlx_test_*: the store's in-process tests (#[sqlx::test]).
RUN_DATABASES='^((inbox_test|never_migrated|lt|chaos|bench_ceiling|bench_floor)_|_sqlx_test_)'
RUN_TOPICS='(orders_test|lt|chaos)_.*'

cmd_prune() {
    lock
    pg_pid >/dev/null || die "postgres is not running (run: $0 up)"
    kafka_running || die "kafka is not running (run: $0 up)"
    local psql=("$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$PG_SOCK" -p "$PG_PORT" -U postgres -d postgres)
    local count
    count=$("${psql[@]}" -c "SELECT count(*) FROM pg_database WHERE datname ~ '$RUN_DATABASES'") ||
        die "could not list the run databases"
    "${psql[@]}" >/dev/null <<SQL || die "could not drop the run databases"
SELECT format('DROP DATABASE IF EXISTS %I WITH (FORCE)', datname) FROM pg_database
WHERE datname ~ '$RUN_DATABASES'
\\gexec
SQL
    log "dropped $count run databases"
    if kafka_topics --list | grep -qE "^$RUN_TOPICS\$"; then
        kafka_topics --delete --topic "$RUN_TOPICS" >/dev/null
    fi
    log "deleted the run topics"
}

main() {
    local cmd=${1:-}
    shift || true
    case $cmd in
        up) cmd_up "$@" ;;
        down) cmd_down "$@" ;;
        status) cmd_status "$@" ;;
        topic) cmd_topic "$@" ;;
        restart-postgres) cmd_restart_postgres "$@" ;;
        kill-kafka) cmd_kill_kafka "$@" ;;
        prune) cmd_prune "$@" ;;
        bootstrap) echo "$KAFKA_BOOTSTRAP" ;;
        *)
            echo "usage: $0 up [--brokers 1|3] [--kafka-version V] | down | status | topic NAME [PARTITIONS] | restart-postgres | kill-kafka [NODE] | prune | bootstrap" >&2
            exit 2
            ;;
    esac
}

main "$@"
