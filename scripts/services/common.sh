# Shared by scripts/services.sh, db-pair.sh, service-deps.sh and compat.sh:
# where things live, logging, the lock of up/down, the inbox-services
# binary that does the daemon work (services/), and Kafka's jars per
# version.

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LOCAL="$REPO/.local"
PG_BIN=/usr/lib/postgresql/15/bin

log() { printf '[services] %s\n' "$*" >&2; }
die() { printf '[services] ERROR: %s\n' "$*" >&2; exit 1; }

# True when something accepts TCP connections on HOST PORT.
port_open() {
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# up/down hold a lock so two of them never race on the same .local. The
# daemons are started with fd 9 closed, or they would hold the lock forever.
LOCK_TIMEOUT=300
lock() {
    mkdir -p "$LOCAL"
    chmod 0755 "$LOCAL"
    exec 9>"$LOCAL/.services.lock"
    flock -w "$LOCK_TIMEOUT" 9 ||
        die "another scripts/services.sh up/down held $LOCAL/.services.lock for ${LOCK_TIMEOUT}s"
    # For scripts run while it is held (scripts/service-deps.sh).
    export SERVICES_LOCKED=1
}

# inbox-services (services/), built when missing or older than its sources;
# run with fd 9 (the lock) closed. cargo reads a relative CARGO_TARGET_DIR
# from the directory it runs in: here, the checkout.
SERVICES_BIN="${CARGO_TARGET_DIR:-target}/release/inbox-services"
[[ $SERVICES_BIN == /* ]] || SERVICES_BIN="$REPO/$SERVICES_BIN"
build_services() {
    if [[ ! -x $SERVICES_BIN ]] || [[ -n $(find "$REPO/services" "$REPO/Cargo.lock" -newer "$SERVICES_BIN" -print -quit) ]]; then
        (cd "$REPO" && cargo build --release --quiet -p inbox-services) || die "could not build inbox-services"
    fi
}
services() {
    build_services
    "$SERVICES_BIN" "$@" 9>&-
}

# The Kafka versions `up --kafka-version` runs and `make compat` tests: the
# newest 3.x and the newest 4.x that Maven Central serves, and 4.1.2, the
# version this project ran first.
KAFKA_VERSIONS=(3.9.2 4.1.2 4.4.0)
KAFKA_DEFAULT_VERSION=4.1.2

# Fetches Kafka VERSION's jars unless they are there and prints their
# directory: one per version and pom, never changed afterwards (a running
# broker keeps its jars), filled in a fresh directory renamed into place
# when complete, so an interrupted fetch or two at once never leave a
# half-filled one.
kafka_jars() {
    local version=$1 pom="$REPO/scripts/kafka/pom.xml" libs tmp
    libs="$LOCAL/kafka-dist/$version-$(sha256sum "$pom" | cut -c1-12)"
    if [[ ! -f $libs/.complete ]]; then
        log "fetching Kafka $version's jars from Maven Central into $libs"
        mkdir -p "$LOCAL/kafka-dist"
        tmp=$(mktemp -d "$LOCAL/kafka-dist/.fetch-XXXXXX")
        if ! mvn -B -q -Dstyle.color=never -f "$pom" -Dkafka.version="$version" \
            dependency:copy-dependencies -DoutputDirectory="$tmp" >"$tmp.log" 2>&1; then
            tail -n 40 "$tmp.log" >&2
            rm -rf "$tmp" "$tmp.log"
            die "mvn could not fetch Kafka $version's jars (scripts/kafka/pom.xml)"
        fi
        rm -f "$tmp.log"
        [[ -f $tmp/kafka_2.13-$version.jar ]] || die "mvn ran but $tmp has no kafka_2.13-$version.jar"
        touch "$tmp/.complete"
        if [[ -f $libs/.complete ]]; then
            rm -rf "$tmp"
        else
            rm -rf "$libs"
            mv "$tmp" "$libs"
        fi
    fi
    echo "$libs"
}
