#!/usr/bin/env bash
# A PostgreSQL primary with an asynchronous streaming standby, behind one
# endpoint, for the fault suite (make chaos): its database can be restarted,
# and failed over to a standby that lacks the last commits, without touching
# the shared cluster of scripts/services.sh.
#
#   scripts/db-pair.sh up          a fresh primary (127.0.0.1:15432, role and
#                                  database `inventory`), its standby
#                                  (pg_basebackup -R, 127.0.0.1:15433), and the
#                                  endpoint 127.0.0.1:25433 -> primary (a
#                                  toxiproxy proxy, as a cluster's DNS name)
#   scripts/db-pair.sh restart     fast restart of the endpoint's server
#   scripts/db-pair.sh cut         the standby stops receiving and replaying WAL
#   scripts/db-pair.sh failover    kill -9 of the primary, the standby resumed
#                                  and promoted, the endpoint switched to it
#                                  (its connections cut)
#   scripts/db-pair.sh backup      a base backup of the endpoint's server
#                                  (pg_basebackup), kept as the one to restore
#   scripts/db-pair.sh restore     the endpoint's server stopped (-m immediate),
#                                  its data replaced by the last backup, started:
#                                  the database goes back to that moment (the
#                                  standby no longer follows it)
#   scripts/db-pair.sh down        stop both, remove them and the endpoint
#
# Everything lives under .local/pair. Needs scripts/services.sh up (PostgreSQL
# 15 installed) and scripts/toxiproxy.sh (started here when needed, and then
# stopped by `down`).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_BIN=/usr/lib/postgresql/15/bin
DIR="$REPO/.local/pair"
PRIMARY_PORT=15432
STANDBY_PORT=15433
ENDPOINT=127.0.0.1:25433
NAME=pair
API=${TOXIPROXY_API:-127.0.0.1:8474}

log() { echo "[db-pair] $*" >&2; }
die() { log "$*"; exit 1; }
as_postgres() { runuser -u postgres -- "$@"; }
api() { curl -fsS -X "$1" "http://$API$2" ${3:+-H 'Content-Type: application/json' -d "$3"}; }
sql() { # PORT STATEMENT
    as_postgres "$PG_BIN/psql" -X -A -t -q -h "$DIR/run" -p "$1" -U postgres -d postgres \
        -v ON_ERROR_STOP=1 -c "$2"
}
pg_ctl() { # DATA ARGS...
    local data=$1
    shift
    as_postgres "$PG_BIN/pg_ctl" -D "$data" -l "$data.log" -w -t 60 "$@" </dev/null >/dev/null 9>&-
}
upstream() { api GET "/proxies/$NAME" | python3 -c 'import json,sys; print(json.load(sys.stdin)["upstream"])'; }

up() {
    down >/dev/null 2>&1 || true
    mkdir -p "$DIR/run"
    chown -R postgres:postgres "$DIR"
    as_postgres "$PG_BIN/initdb" -D "$DIR/primary" -U postgres --auth=trust --encoding=UTF8 \
        --locale=C.UTF-8 >"$DIR/initdb.log"
    cat >>"$DIR/primary/postgresql.conf" <<EOF
# scripts/db-pair.sh
listen_addresses = '127.0.0.1'
port = $PRIMARY_PORT
unix_socket_directories = '$DIR/run'
max_connections = 100
shared_buffers = 128MB
synchronous_commit = on
wal_level = replica
max_wal_senders = 4
hot_standby = on
timezone = 'UTC'
EOF
    pg_ctl "$DIR/primary" start || die "the primary did not start; see $DIR/primary.log"
    sql $PRIMARY_PORT "CREATE ROLE inventory LOGIN CREATEDB CREATEROLE PASSWORD 'inventory'"
    sql $PRIMARY_PORT "CREATE DATABASE inventory OWNER inventory"
    as_postgres "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p $PRIMARY_PORT -U postgres \
        -D "$DIR/standby" -R -X stream -c fast
    printf "port = %s\n" $STANDBY_PORT >>"$DIR/standby/postgresql.conf"
    pg_ctl "$DIR/standby" start || die "the standby did not start; see $DIR/standby.log"
    # Started here, stopped by `down`; one already running is left so.
    "$REPO/scripts/toxiproxy.sh" status >/dev/null 2>&1 || touch "$DIR/toxiproxy.started"
    "$REPO/scripts/toxiproxy.sh" up >/dev/null
    api DELETE "/proxies/$NAME" >/dev/null 2>&1 || true
    api POST /proxies "{\"name\":\"$NAME\",\"listen\":\"$ENDPOINT\",\"upstream\":\"127.0.0.1:$PRIMARY_PORT\",\"enabled\":true}" >/dev/null
    log "primary 127.0.0.1:$PRIMARY_PORT, standby 127.0.0.1:$STANDBY_PORT, endpoint $ENDPOINT"
    echo "postgres://inventory:inventory@$ENDPOINT"
}

restart() {
    local data=$DIR/primary
    [[ $(upstream) == *:$STANDBY_PORT ]] && data=$DIR/standby
    pg_ctl "$data" -m fast restart || die "restart failed; see $data.log"
    log "restarted ${data##*/}"
}

cut() {
    sql $STANDBY_PORT "ALTER SYSTEM SET primary_conninfo = ''" >/dev/null
    sql $STANDBY_PORT "SELECT pg_reload_conf()" >/dev/null
    sql $STANDBY_PORT "SELECT pg_wal_replay_pause()" >/dev/null
    log "standby cut off at $(sql $STANDBY_PORT "SELECT pg_last_wal_replay_lsn()")"
}

failover() {
    local pid
    pid=$(head -n 1 "$DIR/primary/postmaster.pid")
    kill -9 "$pid"
    log "primary killed (kill -9 $pid)"
    sql $STANDBY_PORT "SELECT pg_wal_replay_resume()" >/dev/null
    [[ $(sql $STANDBY_PORT "SELECT pg_promote(true, 60)") == t ]] || die "promotion failed"
    # Changing a proxy's upstream restarts it: its connections are cut.
    api POST "/proxies/$NAME" "{\"upstream\":\"127.0.0.1:$STANDBY_PORT\"}" >/dev/null
    log "standby promoted; endpoint $ENDPOINT -> 127.0.0.1:$STANDBY_PORT"
}

# The data directory behind the endpoint, and its port.
serving() {
    if [[ $(upstream) == *:$STANDBY_PORT ]]; then
        echo "$DIR/standby $STANDBY_PORT"
    else
        echo "$DIR/primary $PRIMARY_PORT"
    fi
}

backup() {
    local data port
    read -r data port < <(serving)
    rm -rf "$DIR/backup.new"
    as_postgres "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$port" -U postgres \
        -D "$DIR/backup.new" -X stream -c fast
    rm -rf "$DIR/backup"
    mv "$DIR/backup.new" "$DIR/backup"
    log "backup of ${data##*/} taken"
}

restore() {
    local data port
    [[ -d $DIR/backup ]] || die "no backup to restore (scripts/db-pair.sh backup)"
    read -r data port < <(serving)
    as_postgres "$PG_BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$data"
    cp -a "$DIR/backup" "$data"
    # The backup may come from the other server: this one keeps its port.
    printf "port = %s\n" "$port" >>"$data/postgresql.conf"
    rm -f "$data/standby.signal"
    pg_ctl "$data" start || die "the restored server did not start; see $data.log"
    log "${data##*/} restored from the backup"
}

down() {
    for data in "$DIR/primary" "$DIR/standby"; do
        if [[ -f $data/postmaster.pid ]]; then
            as_postgres "$PG_BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
        fi
    done
    # A killed primary's backends go away by themselves; wait for them.
    for _ in $(seq 50); do
        pgrep -f "$DIR/" >/dev/null || break
        sleep 0.1
    done
    api DELETE "/proxies/$NAME" >/dev/null 2>&1 || true
    if [[ -f $DIR/toxiproxy.started ]]; then
        "$REPO/scripts/toxiproxy.sh" down >/dev/null 2>&1 || true
    fi
    rm -rf "$DIR"
}

case "${1:-}" in
    up | restart | cut | failover | backup | restore | down) "$1" ;;
    *) echo "usage: $0 up | restart | cut | failover | backup | restore | down" >&2; exit 2 ;;
esac
