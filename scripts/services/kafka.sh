# Apache Kafka in KRaft mode from Maven Central's jars: one combined
# broker+controller on 127.0.0.1:9092, or a cluster of three (sourced by
# scripts/services.sh and scripts/compat.sh).

# The versions `up --kafka-version` runs and `make compat` tests: the newest
# 3.x and the newest 4.x that Maven Central serves, and 4.1.2, the version
# this project ran first.
KAFKA_VERSIONS=(3.9.2 4.1.2 4.4.0)
KAFKA_DEFAULT_VERSION=4.1.2
# Data formatted before the version was recorded is 4.1.2's.
KAFKA_UNRECORDED_VERSION=4.1.2

KAFKA_HOST=127.0.0.1
# SERVICES_KAFKA_DIR and SERVICES_KAFKA_PORT move the broker elsewhere
# (make compat runs each version on a port of its own, beside the local
# broker); node N listens on PORT + 2(N-1), its controller one port above.
KAFKA_DIR=${SERVICES_KAFKA_DIR:-$LOCAL/kafka}
KAFKA_BASE_PORT=${SERVICES_KAFKA_PORT:-9092}
KAFKA_ADMIN_CONFIG="$KAFKA_DIR/admin.properties"
# The node count the data was formatted for: 1, or 3 (a cluster).
KAFKA_SIZE_FILE="$KAFKA_DIR/brokers"
KAFKA_SIZE=1
# The Kafka version that formatted the data (and that runs on it).
KAFKA_VERSION_FILE="$KAFKA_DIR/version"
KAFKA_POM="$REPO/scripts/kafka/pom.xml"
# Each version's jars, fetched once per version and pom into a directory
# of their own that is never changed afterwards (a running broker keeps
# its jars); $KAFKA_DIR/libs links to those of the version that runs.
KAFKA_DIST="$LOCAL/kafka-dist"
KAFKA_LIBS_LINK="$KAFKA_DIR/libs"
KAFKA_READY_TIMEOUT=120
KAFKA_STOP_TIMEOUT=30
KAFKA_HEAP_OPTS=(-Xms512m -Xmx1g)
TOPICS=("orders.placed.v1:12" "orders.placed.v1.dlq:12")
DEFAULT_PARTITIONS=12

# Selects node N of the Kafka cluster: its ports, files and directories
# become the KAFKA_* globals the kafka_* functions work on. Node 1 has the
# paths and ports of the single broker; node N listens on 9092 + 2(N-1) and
# its controller one port above (9092 and 9093 for node 1 by default).
kafka_select() {
    KAFKA_NODE=$1
    KAFKA_PORT=$((KAFKA_BASE_PORT + 2 * (KAFKA_NODE - 1)))
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
        servers+=("$KAFKA_HOST:$((KAFKA_BASE_PORT + 2 * (id - 1)))")
    done
    KAFKA_BOOTSTRAP=$(IFS=,; echo "${servers[*]}")
    kafka_select 1
}
# What is there already (what `up` formatted last), else one node.
kafka_size "$(cat "$KAFKA_SIZE_FILE" 2>/dev/null || echo 1)"

# A JVM for Kafka's tool classes (StorageTool, TopicCommand) with the jars
# of the selected version; TieredStopAtLevel=1 and SerialGC make these
# short-lived JVMs start faster.
KAFKA_TOOL_JAVA=(java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true
    -Dlog4j2.configurationFile="$REPO/scripts/kafka/tools-log4j2.xml")
KAFKA_TOOL_TIMEOUT=60

kafka_tool() {
    timeout "$KAFKA_TOOL_TIMEOUT" "${KAFKA_TOOL_JAVA[@]}" -cp "$KAFKA_LIBS/*" "$@"
}

# Whether V is one of the pinned versions.
kafka_known_version() {
    local v
    for v in "${KAFKA_VERSIONS[@]}"; do
        [[ $v == "$1" ]] && return 0
    done
    return 1
}

# The version that formatted the data here (KAFKA_UNRECORDED_VERSION for data
# older than the record, and when there is none yet).
kafka_recorded_version() {
    cat "$KAFKA_VERSION_FILE" 2>/dev/null || echo "$KAFKA_UNRECORDED_VERSION"
}

# Selects version V: KAFKA_VERSION and KAFKA_LIBS, the directory its jars
# are fetched into (named after the version and the pom they came from).
kafka_version() {
    KAFKA_VERSION=$1
    local pom
    pom=$(sha256sum "$KAFKA_POM" | cut -c1-12)
    KAFKA_LIBS="$KAFKA_DIST/$KAFKA_VERSION-$pom"
}
# The tools of `status`, `topic`, `kill-kafka` and `prune` talk to the
# version that runs.
kafka_version "$(kafka_recorded_version)"

# Fetches the selected version's jars unless they are there: into a fresh
# directory, renamed into place when complete, so an interrupted fetch or
# two at once never leave a half-filled one.
kafka_libs_fetch() {
    [[ -f $KAFKA_LIBS/.complete ]] && return 0
    log "fetching Kafka $KAFKA_VERSION's jars from Maven Central into $KAFKA_LIBS"
    mkdir -p "$KAFKA_DIST"
    local tmp
    tmp=$(mktemp -d "$KAFKA_DIST/.fetch-XXXXXX")
    if ! mvn -B -q -Dstyle.color=never -f "$KAFKA_POM" -Dkafka.version="$KAFKA_VERSION" \
        dependency:copy-dependencies -DoutputDirectory="$tmp" >"$tmp.log" 2>&1; then
        tail_log "$tmp.log"
        rm -rf "$tmp" "$tmp.log"
        die "mvn could not fetch Kafka $KAFKA_VERSION's jars (scripts/kafka/pom.xml)"
    fi
    rm -f "$tmp.log"
    [[ -f $tmp/kafka_2.13-$KAFKA_VERSION.jar ]] || die "mvn ran but $tmp has no kafka_2.13-$KAFKA_VERSION.jar"
    touch "$tmp/.complete"
    if [[ -f $KAFKA_LIBS/.complete ]]; then
        rm -rf "$tmp"
    else
        rm -rf "$KAFKA_LIBS"
        mv "$tmp" "$KAFKA_LIBS"
    fi
}

# --kafka-version V / KAFKA_VERSION=V: the version `up` is to run. Its jars
# are fetched; data another version formatted is wiped (each version keeps
# to the log and metadata formats it wrote itself; topics are created
# again), and $KAFKA_DIR/libs points at V's jars (a broker running on other
# jars is stopped first, to be started on these).
kafka_use_version() {
    local want=$1 had
    kafka_known_version "$want" ||
        die "--kafka-version (KAFKA_VERSION) must be one of ${KAFKA_VERSIONS[*]}, got '$want'"
    had=$(kafka_recorded_version)
    kafka_version "$want"
    kafka_libs_fetch
    mkdir -p "$KAFKA_DIR"
    if [[ $had != "$want" ]]; then
        if kafka_running || [[ -e $KAFKA_DIR/data ]]; then
            log "kafka goes from $had to $want: wiping the data $had wrote (topics are created again)"
        fi
        kafka_stop_all
        rm -rf "$KAFKA_DIR/data" "$KAFKA_DIR"/node-*/data
    fi
    if [[ $(readlink "$KAFKA_LIBS_LINK" 2>/dev/null) != "$KAFKA_LIBS" ]]; then
        if kafka_running; then
            log "kafka's jars changed (scripts/kafka/pom.xml): restarting it on the new ones"
            kafka_stop_all
        fi
        # A directory here is the layout of before the versions.
        rm -rf "$KAFKA_LIBS_LINK"
        ln -s "$KAFKA_LIBS" "$KAFKA_LIBS_LINK"
    fi
    echo "$want" >"$KAFKA_VERSION_FILE"
}

kafka_topics() {
    kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$KAFKA_BOOTSTRAP" \
        --command-config "$KAFKA_ADMIN_CONFIG" "$@"
}


# Writes server.properties; a running broker started with another version of
# it is restarted so that the file and the broker agree.
kafka_write_config() {
    local new="$KAFKA_CONFIG.new"
    local quorum replicas=$KAFKA_SIZE internal_min_isr=1 id voters=()
    if ((KAFKA_SIZE == 1)); then
        quorum="controller.quorum.bootstrap.servers=$KAFKA_HOST:$KAFKA_CONTROLLER_PORT"
    else
        for ((id = 1; id <= KAFKA_SIZE; id++)); do
            voters+=("$id@$KAFKA_HOST:$((KAFKA_BASE_PORT + 1 + 2 * (id - 1)))")
        done
        quorum="controller.quorum.voters=$(IFS=,; echo "${voters[*]}")"
        internal_min_isr=2
    fi
    mkdir -p "$KAFKA_NODE_DIR"
    {
        echo "# Written by scripts/services.sh on every \`up\`; edit scripts/services/kafka-server.properties."
        echo "# Node $KAFKA_NODE of $KAFKA_SIZE KRaft node(s), each broker and controller."
        sed -e "s|@NODE_ID@|$KAFKA_NODE|g" -e "s|@PORT@|$KAFKA_PORT|g" \
            -e "s|@CONTROLLER_PORT@|$KAFKA_CONTROLLER_PORT|g" -e "s|@QUORUM@|$quorum|g" \
            -e "s|@DATA_DIR@|$KAFKA_DATA|g" -e "s|@REPLICAS@|$replicas|g" \
            -e "s|@INTERNAL_PARTITIONS@|12|g" -e "s|@INTERNAL_MIN_ISR@|$internal_min_isr|g" \
            "$SERVICES_DIR/kafka-server.properties"
        cat <<EOF

# The local broker's own.
num.partitions=$DEFAULT_PARTITIONS
# Per topic: the cluster's topics ask for 2 (scripts/services.sh topic), the
# tests' unreplicated ones cannot.
min.insync.replicas=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
num.network.threads=3
num.io.threads=4
num.recovery.threads.per.data.dir=2
EOF
    } >"$new"
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
    local pid=$!
    echo "$pid" >"$KAFKA_PIDFILE"
    # Until the subshell has exec'd (setsid, then java), its command line is
    # the shell's and kafka_pid would take the broker for gone.
    local _
    for _ in $(seq 50); do
        [[ $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") == *"kafka.Kafka "* ]] && break
        sleep 0.1
    done
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
