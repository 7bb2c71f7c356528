#!/usr/bin/env bash
# Local services of inventory-inbox (docs/design.md#layout-and-commands), started for real on loopback:
#
#   PostgreSQL 15 (Debian's packages)  our own cluster on 127.0.0.1:5432
#   Apache Kafka 4 (Maven Central jars) one KRaft broker+controller on 127.0.0.1:9092,
#                                       or three (--brokers 3) on 9092, 9094, 9096
#
# Usage: scripts/services.sh up [--brokers 1|3] | down | status | topic NAME [PARTITIONS]
#                           | restart-postgres | kill-kafka [NODE] | prune | bootstrap
#
#   up      install what is missing, start both, wait until both answer, create
#           the role/database of the default DATABASE_URL and the topics.
#           Idempotent: with both running it only checks them (and starts a
#           node of the cluster that is down). --brokers 3 (or KAFKA_BROKERS=3)
#           runs a cluster of three combined broker+controller nodes, topics
#           replicated 3 times with min.insync.replicas=2; the default is one.
#           Changing the count wipes the local Kafka data (a new cluster).
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
# Everything it generates is under <repo>/.local/ (ignored by git):
#   .local/pg/{data,run,postgres.log}                PostgreSQL cluster, socket, log
#   .local/kafka/{libs,data,server.properties,...}   Kafka jars, node 1's data, config, logs, pid
#   .local/kafka/node-N/{data,server.properties,...} nodes 2 and 3 of a cluster
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL="$REPO/.local"

# --- PostgreSQL -------------------------------------------------------------
PG_BIN=/usr/lib/postgresql/15/bin
PG_HOST=127.0.0.1
PG_PORT=5432
PG_DIR="$LOCAL/pg"
PG_DATA="$PG_DIR/data"
PG_LOG="$PG_DIR/postgres.log"
PG_PIDFILE="$PG_DATA/postmaster.pid"   # written and removed by postgres itself
PG_READY_TIMEOUT=60
APP_ROLE=inventory
APP_PASSWORD=inventory
APP_DB=inventory
# A unix socket path must fit in 107 bytes; fall back to /tmp for deep checkouts.
PG_SOCK="$PG_DIR/run"
if ((${#PG_SOCK} > 90)); then
    PG_SOCK="/tmp/inventory-inbox-pg-$(printf '%s' "$REPO" | sha256sum | cut -c1-12)"
fi

# --- Kafka ------------------------------------------------------------------
KAFKA_HOST=127.0.0.1
KAFKA_DIR="$LOCAL/kafka"
KAFKA_LIBS="$KAFKA_DIR/libs"
KAFKA_ADMIN_CONFIG="$KAFKA_DIR/admin.properties"
# The node count the data was formatted for: 1, or 3 (a cluster).
KAFKA_SIZE_FILE="$KAFKA_DIR/brokers"
KAFKA_SIZE=1
KAFKA_POM="$REPO/scripts/kafka/pom.xml"
KAFKA_LIBS_MARKER="$KAFKA_LIBS/.complete"   # holds the sha256 of the pom it was fetched with
KAFKA_READY_TIMEOUT=120
KAFKA_STOP_TIMEOUT=30
KAFKA_HEAP_OPTS=(-Xms512m -Xmx1g)
TOPICS=("orders.placed.v1:12" "orders.placed.v1.dlq:12")
DEFAULT_PARTITIONS=12

log() { printf '[services] %s\n' "$*" >&2; }
die() { printf '[services] ERROR: %s\n' "$*" >&2; exit 1; }

# Selects node N of the Kafka cluster: its ports, files and directories
# become the KAFKA_* globals the kafka_* functions work on. Node 1 has the
# paths and ports of the single broker; node N listens on 9092 + 2(N-1) and
# its controller one port above.
kafka_select() {
    KAFKA_NODE=$1
    KAFKA_PORT=$((9092 + 2 * (KAFKA_NODE - 1)))
    KAFKA_CONTROLLER_PORT=$((KAFKA_PORT + 1))
    if ((KAFKA_NODE == 1)); then
        KAFKA_NODE_DIR=$KAFKA_DIR
    else
        KAFKA_NODE_DIR="$KAFKA_DIR/node-$KAFKA_NODE"
    fi
    KAFKA_DATA="$KAFKA_NODE_DIR/data"
    KAFKA_CONFIG="$KAFKA_NODE_DIR/server.properties"
    KAFKA_PIDFILE="$KAFKA_NODE_DIR/kafka.pid"
    KAFKA_STDOUT="$KAFKA_NODE_DIR/stdout.log"
    KAFKA_SERVER_LOG="$KAFKA_NODE_DIR/server.log"
}

# Sets the cluster's size, KAFKA_BOOTSTRAP (every node) and selects node 1.
kafka_size() {
    KAFKA_SIZE=$1
    local id servers=()
    for ((id = 1; id <= KAFKA_SIZE; id++)); do
        servers+=("$KAFKA_HOST:$((9092 + 2 * (id - 1)))")
    done
    KAFKA_BOOTSTRAP=$(IFS=,; echo "${servers[*]}")
    kafka_select 1
}
# What is there already (what `up` formatted last), else one node.
kafka_size "$(cat "$KAFKA_SIZE_FILE" 2>/dev/null || echo 1)"

# Print the last lines of a log file to stderr (for failures).
tail_log() {
    local file=$1
    if [[ -s $file ]]; then
        printf '[services] --- last lines of %s ---\n' "$file" >&2
        tail -n "${2:-40}" "$file" >&2
        printf '[services] --- end of %s ---\n' "$file" >&2
    else
        printf '[services] (%s is empty or missing)\n' "$file" >&2
    fi
}

# True when something accepts TCP connections on HOST PORT.
port_open() {
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# Who listens on a TCP port (for error messages).
port_owner() {
    ss -Hltnp "sport = :$1" 2>/dev/null | head -n 3
}

# --- Installing what a fresh machine lacks -----------------------------------
APT_UPDATED=0
apt_install() {
    if ((EUID != 0)); then
        die "need root to install $* (run as root, or install them first)"
    fi
    if ((APT_UPDATED == 0)); then
        log "apt-get update"
        apt-get update -qq
        APT_UPDATED=1
    fi
    log "installing $*"
    DEBIAN_FRONTEND=noninteractive UCF_FORCE_CONFFOLD=1 apt-get install -y -qq "$@" >/dev/null
}

ensure_packages() {
    if [[ ! -x $PG_BIN/postgres ]]; then
        # Our cluster lives in .local/pg; the Debian package would otherwise
        # create (and may start) a "main" cluster on the same port 5432. So
        # install postgresql-common first and switch that off before the server.
        command -v pg_conftool >/dev/null || apt_install postgresql-common
        pg_conftool /etc/postgresql-common/createcluster.conf set create_main_cluster off
        apt_install postgresql-15 postgresql-client-15
    fi
    local missing=()
    command -v kcat >/dev/null || missing+=(kcat)
    command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
    command -v mvn >/dev/null || missing+=(maven)
    if ((${#missing[@]})); then
        apt_install "${missing[@]}"
    fi
    [[ -x $PG_BIN/postgres ]] || die "$PG_BIN/postgres is still missing after installing postgresql-15"
}

# --- PostgreSQL ---------------------------------------------------------------
as_postgres() { runuser -u postgres -- "$@"; }

# Pid of our postmaster if it is running, else nothing (and exit status 1).
# A postmaster.pid whose process is gone, or is not a postgres, is stale.
pg_pid() {
    [[ -f $PG_PIDFILE ]] || return 1
    local pid
    pid=$(head -n 1 "$PG_PIDFILE" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$PG_BIN/postgres" ]] || return 1
    echo "$pid"
}

# The postgres user must be able to reach .local/pg: every directory above it
# must be searchable by others (e.g. a checkout under /root would not be).
pg_make_reachable() {
    local dir=$LOCAL
    while [[ $dir != / ]]; do
        if ! as_postgres test -x "$dir"; then
            log "making $dir traversable for the postgres user (chmod o+x)"
            chmod o+x "$dir"
        fi
        dir=$(dirname "$dir")
    done
}

pg_write_config() {
    # Our settings live in their own file, rewritten on every `up`, so that a
    # change here reaches an existing cluster; postgresql.conf includes it.
    cat >"$PG_DATA/inventory-inbox.conf" <<EOF
# Written by scripts/services.sh on every \`up\`; edit the script, not this file.
listen_addresses = '$PG_HOST'
port = $PG_PORT
unix_socket_directories = '$PG_SOCK'
max_connections = 200
# Sized for a 2-core, 24 GiB dev box shared with Kafka, the service and tests.
shared_buffers = 256MB
effective_cache_size = 4GB
work_mem = 8MB
maintenance_work_mem = 128MB
# Durability stays on: the service's exactly-once claim rests on commits.
fsync = on
synchronous_commit = on
full_page_writes = on
# Fewer, larger checkpoints during load tests.
max_wal_size = 2GB
min_wal_size = 256MB
checkpoint_timeout = 15min
checkpoint_completion_target = 0.9
random_page_cost = 1.1
effective_io_concurrency = 200
password_encryption = scram-sha-256
timezone = 'UTC'
log_timezone = 'UTC'
log_line_prefix = '%m [%p] %q%u@%d '
log_min_duration_statement = -1
log_checkpoints = on
EOF
    cat >"$PG_DATA/pg_hba.conf" <<EOF
# Written by scripts/services.sh; edit the script, not this file.
# TYPE  DATABASE  USER      ADDRESS        METHOD
local   all       postgres                 trust
local   all       all                      scram-sha-256
host    all       all       127.0.0.1/32   scram-sha-256
EOF
    chown postgres:postgres "$PG_DATA/inventory-inbox.conf" "$PG_DATA/pg_hba.conf"
    if ! grep -q "^include_if_exists = 'inventory-inbox.conf'" "$PG_DATA/postgresql.conf"; then
        printf "\ninclude_if_exists = 'inventory-inbox.conf'\n" >>"$PG_DATA/postgresql.conf"
    fi
}

pg_init() {
    mkdir -p "$PG_DIR"
    chown postgres:postgres "$PG_DIR"
    chmod 0750 "$PG_DIR"
    pg_make_reachable
    mkdir -p "$PG_SOCK"
    chown postgres:postgres "$PG_SOCK"
    chmod 0755 "$PG_SOCK"
    if [[ ! -f $PG_DATA/PG_VERSION ]]; then
        log "initdb $PG_DATA"
        rm -rf "$PG_DATA"
        as_postgres "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --encoding=UTF8 --locale=C.UTF-8 \
            --auth-local=trust --auth-host=scram-sha-256 >"$PG_DIR/initdb.log" 2>&1 ||
            { tail_log "$PG_DIR/initdb.log"; die "initdb failed"; }
    fi
    pg_write_config
}

pg_start() {
    if pg_pid >/dev/null; then
        log "postgres already running (pid $(pg_pid)); reloading its configuration"
        as_postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" reload >/dev/null
        return 0
    fi
    if [[ -f $PG_PIDFILE ]]; then
        log "removing stale $PG_PIDFILE (its process is gone)"
        rm -f "$PG_PIDFILE"
    fi
    if port_open "$PG_HOST" "$PG_PORT"; then
        die "port $PG_HOST:$PG_PORT is already taken by another process, not by our cluster in $PG_DATA:
$(port_owner "$PG_PORT")
(the Debian cluster? see pg_lsclusters; stop it with: pg_ctlcluster 15 main stop)"
    fi
    log "starting postgres ($PG_DATA, log $PG_LOG)"
    if ! as_postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t "$PG_READY_TIMEOUT" start </dev/null >/dev/null 9>&-; then
        tail_log "$PG_LOG"
        die "postgres did not start within ${PG_READY_TIMEOUT}s"
    fi
}

# After a reload, settings that only a restart applies (shared_buffers,
# max_connections, listen_addresses...) are pending: restart for them.
pg_apply_pending() {
    local pending
    pending=$("$PG_BIN/psql" -X -A -t -h "$PG_SOCK" -p "$PG_PORT" -U postgres -d postgres \
        -c "SELECT string_agg(name, ', ') FROM pg_settings WHERE pending_restart")
    if [[ -n $pending ]]; then
        log "restarting postgres to apply $pending"
        as_postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -m fast -w -t "$PG_READY_TIMEOUT" restart \
            </dev/null >/dev/null 9>&- || { tail_log "$PG_LOG"; die "postgres did not restart"; }
    fi
}

pg_wait_ready() {
    local deadline=$((SECONDS + PG_READY_TIMEOUT))
    until "$PG_BIN/pg_isready" -q -h "$PG_HOST" -p "$PG_PORT"; do
        if ((SECONDS >= deadline)); then
            tail_log "$PG_LOG"
            die "postgres is not accepting connections on $PG_HOST:$PG_PORT after ${PG_READY_TIMEOUT}s"
        fi
        pg_pid >/dev/null || { tail_log "$PG_LOG"; die "postgres exited during start-up"; }
        sleep 0.5
    done
}

# The role and database of the default DATABASE_URL (docs/design.md#configuration). CREATEDB: tests
# create a database each; CREATEROLE: migrations create a least-privilege role.
pg_bootstrap() {
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCK" -p "$PG_PORT" -U postgres -d postgres >/dev/null <<SQL
DO \$\$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$APP_ROLE') THEN
        CREATE ROLE $APP_ROLE LOGIN CREATEDB CREATEROLE PASSWORD '$APP_PASSWORD';
    ELSE
        ALTER ROLE $APP_ROLE LOGIN CREATEDB CREATEROLE PASSWORD '$APP_PASSWORD';
    END IF;
END
\$\$;
SELECT format('CREATE DATABASE %I OWNER %I', '$APP_DB', '$APP_ROLE')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$APP_DB')
\gexec
ALTER DATABASE $APP_DB OWNER TO $APP_ROLE;
SQL
}

pg_stop() {
    local pid
    if pid=$(pg_pid); then
        log "stopping postgres (pid $pid)"
        as_postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null ||
            { tail_log "$PG_LOG"; die "postgres did not stop"; }
    else
        log "postgres is not running"
    fi
    # postgres removes its own pid file; one left by a killed server is stale.
    rm -f "$PG_PIDFILE"
}

# --- Kafka --------------------------------------------------------------------
# A JVM for Kafka's tool classes (StorageTool, TopicCommand) with the fetched
# jars; TieredStopAtLevel=1 and SerialGC make these short-lived JVMs start faster.
KAFKA_TOOL_JAVA=(java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true
    -Dlog4j2.configurationFile="$REPO/scripts/kafka/tools-log4j2.xml" -cp "$KAFKA_LIBS/*")
KAFKA_TOOL_TIMEOUT=60

kafka_tool() {
    timeout "$KAFKA_TOOL_TIMEOUT" "${KAFKA_TOOL_JAVA[@]}" "$@"
}

kafka_topics() {
    kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$KAFKA_BOOTSTRAP" \
        --command-config "$KAFKA_ADMIN_CONFIG" "$@"
}

kafka_libs_fetch() {
    local want
    want=$(sha256sum "$KAFKA_POM" | cut -d' ' -f1)
    if [[ -f $KAFKA_LIBS_MARKER && $(cat "$KAFKA_LIBS_MARKER") == "$want" ]]; then
        return 0
    fi
    if kafka_running; then
        log "scripts/kafka/pom.xml changed: stopping kafka to swap its jars"
        kafka_stop_all
    fi
    log "fetching Kafka jars from Maven Central into $KAFKA_LIBS"
    local tmp="$KAFKA_DIR/libs.tmp"
    rm -rf "$tmp"
    mkdir -p "$KAFKA_DIR"
    if ! mvn -B -q -Dstyle.color=never -f "$KAFKA_POM" dependency:copy-dependencies -DoutputDirectory="$tmp" >"$KAFKA_DIR/mvn.log" 2>&1; then
        tail_log "$KAFKA_DIR/mvn.log"
        die "mvn could not fetch the Kafka jars (scripts/kafka/pom.xml)"
    fi
    ls "$tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || die "mvn ran but $tmp has no kafka_2.13 jar"
    echo "$want" >"$tmp/.complete"
    rm -rf "$KAFKA_LIBS"
    mv "$tmp" "$KAFKA_LIBS"
}

# Writes server.properties; a running broker started with another version of
# it is restarted so that the file and the broker agree.
kafka_write_config() {
    local new="$KAFKA_CONFIG.new"
    local what quorum internal replicas=$KAFKA_SIZE min_isr=1 id voters=()
    if ((KAFKA_SIZE == 1)); then
        what="One KRaft node that is both broker and controller (docs/design.md#layout-and-commands)."
        quorum="controller.quorum.bootstrap.servers=$KAFKA_HOST:$KAFKA_CONTROLLER_PORT"
        internal="Internal topics on a single node: replication factor 1, and few partitions"
    else
        what="Node $KAFKA_NODE of $KAFKA_SIZE KRaft nodes, each broker and controller (a static quorum)."
        for ((id = 1; id <= KAFKA_SIZE; id++)); do
            voters+=("$id@$KAFKA_HOST:$((9093 + 2 * (id - 1)))")
        done
        quorum="controller.quorum.voters=$(IFS=,; echo "${voters[*]}")"
        internal="Internal topics on every node (the offsets topic's commits wait for
# all in-sync copies), and few partitions"
        min_isr=2
    fi
    mkdir -p "$KAFKA_NODE_DIR"
    cat >"$new" <<EOF
# Written by scripts/services.sh on every \`up\`; edit the script, not this file.
# $what
process.roles=broker,controller
node.id=$KAFKA_NODE
listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT,CONTROLLER://$KAFKA_HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
$quorum
log.dirs=$KAFKA_DATA

num.partitions=$DEFAULT_PARTITIONS
default.replication.factor=$replicas
# Per topic: the cluster's topics ask for 2 (scripts/services.sh topic), the
# tests' unreplicated ones cannot.
min.insync.replicas=1
auto.create.topics.enable=false
delete.topic.enable=true

# $internal
# so that the group coordinator loads fast.
offsets.topic.replication.factor=$replicas
offsets.topic.num.partitions=12
transaction.state.log.replication.factor=$replicas
transaction.state.log.min.isr=$min_isr
transaction.state.log.num.partitions=12
share.coordinator.state.topic.replication.factor=$replicas
share.coordinator.state.topic.min.isr=$min_isr
# Tests start consumers one after the other; do not wait for more members.
group.initial.rebalance.delay.ms=0
# The consumer group protocol (KIP-848, GROUP_PROTOCOL=consumer): the broker
# owns the session and heartbeat. A killed member's partitions move within
# 10 s, as with the classic protocol's 10 s session of make chaos (the
# broker's 45 s defaults are its minimum otherwise).
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=10000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=1000

log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
num.network.threads=3
num.io.threads=4
num.recovery.threads.per.data.dir=2
EOF
    if [[ -f $KAFKA_CONFIG ]] && cmp -s "$new" "$KAFKA_CONFIG"; then
        rm -f "$new"
    else
        if kafka_pid >/dev/null; then
            log "server.properties of node $KAFKA_NODE changed: restarting it"
            kafka_stop
        fi
        mv "$new" "$KAFKA_CONFIG"
    fi
    # Bounds for the tools' admin client, so a broker that is not up yet makes
    # TopicCommand fail fast instead of hanging for the default 60 s.
    cat >"$KAFKA_ADMIN_CONFIG" <<EOF
request.timeout.ms=5000
default.api.timeout.ms=10000
EOF
}

# Pid of our broker if it is running (from the pid file, checked against
# /proc so a recycled pid is not mistaken for it), else exit status 1.
kafka_pid() {
    [[ -f $KAFKA_PIDFILE ]] || return 1
    local pid
    pid=$(cat "$KAFKA_PIDFILE" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    local cmdline
    cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
    [[ $cmdline == *"kafka.Kafka $KAFKA_CONFIG"* ]] || return 1
    echo "$pid"
}

# Format the storage once; data without a valid meta.properties (an
# interrupted format, or data from elsewhere) is wiped and formatted anew.
kafka_format() {
    local meta="$KAFKA_DATA/meta.properties"
    if [[ -f $meta ]] && grep -q '^cluster.id=' "$meta" && grep -q "^node.id=$KAFKA_NODE\$" "$meta"; then
        return 0
    fi
    if [[ -e $KAFKA_DATA ]]; then
        log "wiping $KAFKA_DATA (no valid meta.properties)"
    fi
    rm -rf "$KAFKA_DATA"
    # The cluster's id if another node has one; else a new Kafka Uuid: 16
    # random bytes in unpadded URL-safe base64, not starting with '-' (as
    # kafka-storage.sh random-uuid makes them, without a JVM).
    local id=- other
    other=$(sed -n 's/^cluster.id=//p' "$KAFKA_DIR"/data/meta.properties "$KAFKA_DIR"/node-*/data/meta.properties 2>/dev/null | head -n1) || true
    [[ -n $other ]] && id=$other
    while [[ $id == -* ]]; do
        id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    done
    local standalone=()
    ((KAFKA_SIZE == 1)) && standalone=(--standalone)
    log "formatting Kafka storage of node $KAFKA_NODE (cluster id $id)"
    kafka_tool kafka.tools.StorageTool format -t "$id" -c "$KAFKA_CONFIG" "${standalone[@]}" \
        >"$KAFKA_NODE_DIR/format.log" 2>&1 || { tail_log "$KAFKA_NODE_DIR/format.log"; die "kafka storage format failed"; }
}

kafka_launch() {
    for port in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
        if port_open "$KAFKA_HOST" "$port"; then
            die "port $KAFKA_HOST:$port is already taken by another process, not by our broker:
$(port_owner "$port")"
        fi
    done
    log "starting kafka node $KAFKA_NODE (log $KAFKA_SERVER_LOG)"
    : >"$KAFKA_STDOUT"
    KAFKA_LOG_OFFSET=$(stat -c %s "$KAFKA_SERVER_LOG" 2>/dev/null || echo 0)
    # setsid: the broker must not die with the shell (or CI step) that ran `up`.
    # In a non-interactive shell the subshell is no group leader, so setsid
    # execs java in place and $! is the broker's own pid.
    (
        cd "$KAFKA_NODE_DIR"
        exec setsid java "${KAFKA_HEAP_OPTS[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
            -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
            -Djava.awt.headless=true \
            -Dkafka.logs.dir="$KAFKA_NODE_DIR" \
            -Dlog4j2.configurationFile="$REPO/scripts/kafka/log4j2.xml" \
            -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_CONFIG"
    ) </dev/null >>"$KAFKA_STDOUT" 2>&1 9>&- &
    echo $! >"$KAFKA_PIDFILE"
}

# Start-up failures that mean the data dir is unusable (wiping it is fine
# for a local dev broker).
KAFKA_BAD_DATA_PATTERN='InconsistentClusterIdException|meta\.properties|CorruptRecordException|KafkaStorageException|No readable meta|not formatted|Invalid cluster.id'

# What the broker logged since kafka_launch (the whole file if it rolled over).
KAFKA_LOG_OFFSET=0
kafka_log_since_launch() {
    cat "$KAFKA_STDOUT" 2>/dev/null || true
    local size
    size=$(stat -c %s "$KAFKA_SERVER_LOG" 2>/dev/null || echo 0)
    if ((size >= KAFKA_LOG_OFFSET)); then
        tail -c "+$((KAFKA_LOG_OFFSET + 1))" "$KAFKA_SERVER_LOG" 2>/dev/null || true
    else
        cat "$KAFKA_SERVER_LOG" 2>/dev/null || true
    fi
}

# Waits until the broker answers TopicCommand --list and keeps that list in
# KAFKA_TOPIC_LIST. Returns 2 when the broker process died (the caller may
# retry); dies on timeout.
KAFKA_TOPIC_LIST=
kafka_wait_ready() {
    local deadline=$((SECONDS + KAFKA_READY_TIMEOUT))
    while :; do
        kafka_pid >/dev/null || return 2
        # Polling the port costs nothing; a JVM launch costs 2-3 s.
        if port_open "$KAFKA_HOST" "$KAFKA_PORT" &&
            KAFKA_TOPIC_LIST=$(kafka_topics --list 2>>"$KAFKA_DIR/tools.log"); then
            return 0
        fi
        if ((SECONDS >= deadline)); then
            tail_log "$KAFKA_STDOUT" 20
            tail_log "$KAFKA_SERVER_LOG"
            die "kafka did not answer on $KAFKA_BOOTSTRAP within ${KAFKA_READY_TIMEOUT}s (pid $(kafka_pid || echo gone))"
        fi
        sleep 0.5
    done
}

# Starts every node that is not running, then waits for each. The nodes of a
# cluster start together: none answers before a quorum of controllers is up.
kafka_start() {
    if ((KAFKA_SIZE == 1)); then
        kafka_start_node
        return
    fi
    local id
    for ((id = 1; id <= KAFKA_SIZE; id++)); do
        kafka_select "$id"
        if kafka_pid >/dev/null; then
            log "kafka node $id already running (pid $(kafka_pid))"
            continue
        fi
        rm -f "$KAFKA_PIDFILE"
        kafka_format
        kafka_launch
    done
    for ((id = 1; id <= KAFKA_SIZE; id++)); do
        kafka_select "$id"
        if ! kafka_wait_ready; then
            tail_log "$KAFKA_STDOUT" 20
            tail_log "$KAFKA_SERVER_LOG"
            die "kafka node $id exited during start-up"
        fi
    done
    kafka_select 1
}

kafka_start_node() {
    local attempt rc
    for attempt in 1 2; do
        if ! kafka_pid >/dev/null; then
            if [[ -f $KAFKA_PIDFILE ]]; then
                log "removing stale $KAFKA_PIDFILE (its process is gone)"
                rm -f "$KAFKA_PIDFILE"
            fi
            kafka_format
            kafka_launch
        else
            log "kafka already running (pid $(kafka_pid))"
        fi
        rc=0
        kafka_wait_ready || rc=$?
        ((rc == 0)) && return 0
        # The broker exited during start-up.
        rm -f "$KAFKA_PIDFILE"
        if ((attempt == 1)) && kafka_log_since_launch | grep -E "$KAFKA_BAD_DATA_PATTERN" >/dev/null; then
            tail_log "$KAFKA_SERVER_LOG" 15
            log "kafka failed on its data dir; wiping $KAFKA_DATA and formatting anew"
            rm -rf "$KAFKA_DATA"
            continue
        fi
        tail_log "$KAFKA_STDOUT" 20
        tail_log "$KAFKA_SERVER_LOG"
        die "kafka exited during start-up"
    done
}

# Creates NAME with PARTITIONS partitions unless it exists.
kafka_create_topic() {
    local name=$1 partitions=$2
    local replicated=()
    ((KAFKA_SIZE > 1)) && replicated=(--config min.insync.replicas=2)
    kafka_topics --create --if-not-exists \
        --topic "$name" --partitions "$partitions" --replication-factor "$KAFKA_SIZE" \
        "${replicated[@]}" >/dev/null
}

kafka_ensure_topics() {
    local spec name partitions
    for spec in "${TOPICS[@]}"; do
        name=${spec%%:*}
        partitions=${spec##*:}
        if grep -qxF "$name" <<<"$KAFKA_TOPIC_LIST"; then
            continue
        fi
        log "creating topic $name ($partitions partitions)"
        kafka_create_topic "$name" "$partitions"
    done
}

kafka_stop() {
    local pid
    if ! pid=$(kafka_pid); then
        log "kafka is not running"
        rm -f "$KAFKA_PIDFILE"
        return 0
    fi
    log "stopping kafka node $KAFKA_NODE (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + KAFKA_STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
            log "kafka did not stop within ${KAFKA_STOP_TIMEOUT}s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.3
    done
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    rm -f "$KAFKA_PIDFILE"
}

# Every node, the last first (node 1, which the tools talk to, stays longest).
kafka_stop_all() {
    local id
    for ((id = KAFKA_SIZE; id >= 1; id--)); do
        kafka_select "$id"
        kafka_stop
    done
    kafka_select 1
}

# Whether any node runs.
kafka_running() {
    local id found=1
    for ((id = 1; id <= KAFKA_SIZE; id++)); do
        kafka_select "$id"
        kafka_pid >/dev/null && found=0
    done
    kafka_select 1
    return "$found"
}

# The pids of the running nodes, for messages: "1:1234 2:1240".
kafka_pids() {
    local id pids=()
    for ((id = 1; id <= KAFKA_SIZE; id++)); do
        kafka_select "$id"
        pids+=("$id:$(kafka_pid || echo down)")
    done
    kafka_select 1
    echo "${pids[*]}"
}

# --brokers N / KAFKA_BROKERS=N: the cluster `up` is to run. Another count
# than the data was formatted for makes a new cluster: the data goes.
kafka_resize() {
    local want=$1
    [[ $want == 1 || $want == 3 ]] || die "--brokers (KAFKA_BROKERS) must be 1 or 3, got '$want'"
    if [[ -f $KAFKA_SIZE_FILE && $want == "$KAFKA_SIZE" ]]; then
        return 0
    fi
    if [[ $want != "$KAFKA_SIZE" ]]; then
        log "kafka goes from $KAFKA_SIZE to $want nodes: wiping its local data (topics are created again)"
        kafka_stop_all
        rm -rf "$KAFKA_DIR/data" "$KAFKA_DIR"/node-*
    fi
    mkdir -p "$KAFKA_DIR"
    echo "$want" >"$KAFKA_SIZE_FILE"
    kafka_size "$want"
}

# --- Commands -------------------------------------------------------------------
# up/down hold a lock so two of them never race on the same .local. The
# daemons are started with fd 9 closed, or they would hold the lock forever.
LOCK_TIMEOUT=300
lock() {
    mkdir -p "$LOCAL"
    chmod 0755 "$LOCAL"
    exec 9>"$LOCAL/.services.lock"
    flock -w "$LOCK_TIMEOUT" 9 ||
        die "another scripts/services.sh up/down held $LOCAL/.services.lock for ${LOCK_TIMEOUT}s"
}

cmd_up() {
    local brokers=${KAFKA_BROKERS:-1}
    while (($#)); do
        case $1 in
            --brokers) [[ $# -ge 2 ]] || die "--brokers needs a count (1 or 3)"; brokers=$2; shift 2 ;;
            --brokers=*) brokers=${1#--brokers=}; shift ;;
            *) die "up: unknown option $1 (usage: $0 up [--brokers 1|3])" ;;
        esac
    done
    ((EUID == 0)) || die "run as root (postgres is started as the postgres user)"
    lock
    ensure_packages
    pg_init
    pg_start
    pg_wait_ready
    pg_apply_pending
    pg_bootstrap
    log "postgres ready on $PG_HOST:$PG_PORT (DATABASE_URL=postgres://$APP_ROLE:$APP_PASSWORD@$PG_HOST:$PG_PORT/$APP_DB)"

    mkdir -p "$KAFKA_DIR"
    kafka_libs_fetch
    kafka_resize "$brokers"
    local id
    for ((id = 1; id <= KAFKA_SIZE; id++)); do
        kafka_select "$id"
        kafka_write_config
    done
    kafka_select 1
    kafka_start
    kafka_ensure_topics
    log "kafka ready on $KAFKA_BOOTSTRAP (node:pid $(kafka_pids))"
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
            printf '%-10s%s\n' "$name:" "up (pid $pid, $KAFKA_HOST:$KAFKA_PORT, data $KAFKA_DATA)"
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

cmd_topic() {
    local name=${1:-} partitions=${2:-$DEFAULT_PARTITIONS}
    [[ -n $name ]] || die "usage: $0 topic NAME [PARTITIONS]"
    [[ $partitions =~ ^[1-9][0-9]*$ ]] || die "PARTITIONS must be a positive integer, got '$partitions'"
    kafka_running || die "kafka is not running (run: $0 up)"
    kafka_create_topic "$name" "$partitions"
    # --if-not-exists keeps an existing topic as it is: say so when its
    # partition count differs from the one asked for.
    local have
    have=$(kcat -L -b "$KAFKA_BOOTSTRAP" -t "$name" -m 10 2>/dev/null |
        sed -n 's/.* with \([0-9]*\) partitions:$/\1/p') || true
    have=${have%%$'\n'*}
    if [[ -n $have && $have != "$partitions" ]]; then
        log "topic $name already existed with $have partitions (asked for $partitions); left as it is"
    fi
    echo "topic $name"
}

cmd_restart_postgres() {
    lock
    pg_pid >/dev/null || die "postgres is not running (run: $0 up)"
    log "restarting postgres (fast: open sessions are terminated)"
    as_postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -m fast -w -t "$PG_READY_TIMEOUT" restart \
        </dev/null >/dev/null 9>&- || { tail_log "$PG_LOG"; die "postgres did not restart"; }
    pg_wait_ready
}

# The node id of NODE: a number, leader:TOPIC or coordinator:GROUP.
kafka_node_of() {
    local node=$1 id
    case $node in
        leader:?*)
            # The node leading most of the topic's partitions.
            id=$(kcat -L -b "$KAFKA_BOOTSTRAP" -t "${node#leader:}" -m 10 2>/dev/null |
                sed -n 's/^ *partition [0-9]*, leader \([0-9]*\),.*/\1/p' | sort | uniq -c |
                sort -k1,1nr -k2,2n | awk 'NR == 1 {print $2}')
            [[ -n $id ]] || die "no leader found for topic ${node#leader:}"
            ;;
        coordinator:?*)
            id=$(kafka_tool org.apache.kafka.tools.consumer.group.ConsumerGroupCommand \
                --bootstrap-server "$KAFKA_BOOTSTRAP" --command-config "$KAFKA_ADMIN_CONFIG" \
                --describe --state --group "${node#coordinator:}" 2>/dev/null |
                sed -n 's/.*:[0-9]* *(\([0-9]*\)).*/\1/p' | head -n1)
            [[ -n $id ]] || die "no coordinator found for group ${node#coordinator:}"
            ;;
        *) id=$node ;;
    esac
    [[ $id =~ ^[0-9]+$ ]] && ((id >= 1 && id <= KAFKA_SIZE)) ||
        die "kill-kafka: '$node' is not a node of this cluster (1..$KAFKA_SIZE, leader:TOPIC, coordinator:GROUP)"
    echo "$id"
}

cmd_kill_kafka() {
    lock
    local id pid
    id=$(kafka_node_of "${1:-1}")
    kafka_select "$id"
    pid=$(kafka_pid) || die "kafka node $id is not running (run: $0 up)"
    log "killing kafka node $id with -9 (pid $pid)"
    kill -KILL "$pid"
    # Gone, or a zombie (no cmdline) when nobody reaps it yet.
    while kafka_pid >/dev/null; do sleep 0.05; done
    rm -f "$KAFKA_PIDFILE"
    echo "$id"
}

# Databases and topics that tests and benchmark runs create for themselves
# (each a fresh name) and that a crash or an interrupted run leaves behind.
# Hundreds of them make the broker and autovacuum work in the background and
# every later measurement slower. Only run while no test or run is going on.
# _sqlx_test_*: the store's in-process tests (#[sqlx::test]).
RUN_DATABASES='^((inbox_test|never_migrated|lt|chaos|bench_ceiling)_|_sqlx_test_)'
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
SELECT format('DROP DATABASE %I WITH (FORCE)', datname) FROM pg_database
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
            echo "usage: $0 up [--brokers 1|3] | down | status | topic NAME [PARTITIONS] | restart-postgres | kill-kafka [NODE] | prune | bootstrap" >&2
            exit 2
            ;;
    esac
}

main "$@"
