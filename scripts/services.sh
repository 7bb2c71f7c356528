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
# What the services need is installed by scripts/service-deps.sh and
# Kafka's jars are fetched here; the daemons themselves are made, started,
# stopped and waited for by the inbox-services binary (services/, built
# on first use), which the tests' private servers use too, with the
# configuration templates in scripts/services/.
# Everything it generates is under <repo>/.local/ (ignored by git):
#   .local/pg/{data,run,postgres.log}                PostgreSQL cluster, socket, log
#   .local/kafka/{libs,data,server.properties,...}   link to the version's jars, node 1's data, config, logs, pid
#   .local/kafka/{version,brokers}                   the version and node count the data is of
#   .local/kafka-dist/VERSION-POMHASH/               the jars of each version fetched
#   .local/kafka/node-N/{data,server.properties,...} nodes 2 and 3 of a cluster
set -euo pipefail
HERE="$(dirname "${BASH_SOURCE[0]}")"
source "$HERE/services/common.sh"

cmd_up() {
    local brokers=${KAFKA_BROKERS:-1} version=${KAFKA_VERSION:-$KAFKA_DEFAULT_VERSION}
    while (($#)); do
        case $1 in
            --brokers) [[ $# -ge 2 ]] || die "--brokers needs a count (1 or 3)"; brokers=$2; shift 2 ;;
            --brokers=*) brokers=${1#--brokers=}; shift ;;
            --kafka-version) [[ $# -ge 2 ]] || die "--kafka-version needs one of ${KAFKA_VERSIONS[*]}"; version=$2; shift 2 ;;
            --kafka-version=*) version=${1#--kafka-version=}; shift ;;
            *) die "up: unknown option $1 (usage: $0 up [--brokers 1|3] [--kafka-version V])" ;;
        esac
    done
    [[ $brokers == 1 || $brokers == 3 ]] || die "--brokers (KAFKA_BROKERS) must be 1 or 3, got '$brokers'"
    [[ " ${KAFKA_VERSIONS[*]} " == *" $version "* ]] ||
        die "--kafka-version (KAFKA_VERSION) must be one of ${KAFKA_VERSIONS[*]}, got '$version'"
    ((EUID == 0)) || die "run as root (postgres is started as the postgres user)"
    lock
    # fd 9 closed: nothing the installs start may hold the lock (it stays
    # held here).
    "$HERE/service-deps.sh" 9>&-
    services postgres up
    services kafka up "$brokers" "$version" "$(kafka_jars "$version")"
}

cmd_status() {
    local down=0
    services postgres status || down=1
    services kafka status || down=1
    return "$down"
}

cmd_topic() {
    local name=${1:-} partitions=${2:-12} have
    [[ -n $name ]] || die "usage: $0 topic NAME [PARTITIONS]"
    [[ $partitions =~ ^[1-9][0-9]*$ ]] || die "PARTITIONS must be a positive integer, got '$partitions'"
    services kafka topic "$name" "$partitions"
    # --if-not-exists keeps an existing topic as it is: say so when its
    # partition count differs from the one asked for.
    have=$(kcat -L -b "$(services kafka bootstrap)" -t "$name" -m 10 2>/dev/null |
        sed -n 's/.* with \([0-9]*\) partitions:$/\1/p' | head -n1) || true
    if [[ -n $have && $have != "$partitions" ]]; then
        log "topic $name already existed with $have partitions (asked for $partitions); left as it is"
    fi
    echo "topic $name"
}

# kill-kafka [NODE]: NODE is a node id, leader:TOPIC (the node leading most
# of the topic's partitions) or coordinator:GROUP (the group's coordinator).
cmd_kill_kafka() {
    local node=${1:-1} id=${1:-1}
    lock
    case $node in
        leader:?*)
            id=$(kcat -L -b "$(services kafka bootstrap)" -t "${node#leader:}" -m 10 2>/dev/null |
                sed -n 's/^ *partition [0-9]*, leader \([0-9]*\),.*/\1/p' | sort | uniq -c |
                sort -k1,1nr -k2,2n | awk 'NR == 1 {print $2}')
            [[ -n $id ]] || die "no leader found for topic ${node#leader:}"
            ;;
        coordinator:?*)
            id=$(services kafka tool org.apache.kafka.tools.consumer.group.ConsumerGroupCommand \
                --bootstrap-server "$(services kafka bootstrap)" --command-config "$LOCAL/kafka/admin.properties" \
                --describe --state --group "${node#coordinator:}" 2>/dev/null |
                sed -n 's/.*:[0-9]* *(\([0-9]*\)).*/\1/p' | head -n1)
            [[ -n $id ]] || die "no coordinator found for group ${node#coordinator:}"
            ;;
    esac
    services kafka kill "$id"
}

main() {
    local cmd=${1:-}
    shift || true
    case $cmd in
        up) cmd_up "$@" ;;
        down) lock; services kafka down; services postgres down ;;
        status) cmd_status ;;
        topic) cmd_topic "$@" ;;
        restart-postgres) lock; services postgres restart ;;
        kill-kafka) cmd_kill_kafka "$@" ;;
        prune) lock; services postgres prune; services kafka prune ;;
        bootstrap) services kafka bootstrap ;;
        *)
            echo "usage: $0 up [--brokers 1|3] [--kafka-version V] | down | status | topic NAME [PARTITIONS] | restart-postgres | kill-kafka [NODE] | prune | bootstrap" >&2
            exit 2
            ;;
    esac
}

main "$@"
