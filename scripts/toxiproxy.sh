#!/usr/bin/env bash
# Toxiproxy between the consumer and PostgreSQL, to measure the service at a
# network distance from its database (docs/design.md#numbers, make bench-network).
#
#   scripts/toxiproxy.sh up             install (pinned, from the Go module
#                                       proxy) and start the server, and the
#                                       proxy 127.0.0.1:25432 -> 127.0.0.1:5432
#   scripts/toxiproxy.sh delay MS       one-way delay of MS milliseconds in each
#                                       direction (round trip 2 x MS); 0 removes it
#   scripts/toxiproxy.sh down           stop the server this script started
#
# Everything lives under .local/toxiproxy (binary, pid, log).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOXIPROXY_VERSION=v2.12.0
DIR="$REPO/.local/toxiproxy"
BIN="$DIR/bin/server"
PIDFILE="$DIR/toxiproxy.pid"
API=${TOXIPROXY_API:-127.0.0.1:8474}
LISTEN=${TOXIPROXY_LISTEN:-127.0.0.1:25432}
UPSTREAM=${TOXIPROXY_UPSTREAM:-127.0.0.1:5432}
NAME=postgres

log() { echo "[toxiproxy] $*" >&2; }
die() { log "$*"; exit 1; }

api() { # METHOD PATH [JSON]
    curl -fsS -X "$1" "http://$API$2" ${3:+-H 'Content-Type: application/json' -d "$3"}
}

install() {
    if [[ -x $BIN && $(cat "$DIR/version" 2>/dev/null) == "$TOXIPROXY_VERSION" ]]; then
        return
    fi
    command -v go >/dev/null || die "go is missing (toxiproxy is installed with go install)"
    log "installing toxiproxy $TOXIPROXY_VERSION into $DIR/bin"
    mkdir -p "$DIR/bin"
    GOBIN="$DIR/bin" go install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" \
        >"$DIR/install.log" 2>&1 || die "go install failed; see $DIR/install.log"
    echo "$TOXIPROXY_VERSION" >"$DIR/version"
}

running() { [[ -f $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

up() {
    install
    if ! running; then
        log "starting toxiproxy (API $API, log $DIR/toxiproxy.log)"
        "$BIN" -host "${API%:*}" -port "${API##*:}" >"$DIR/toxiproxy.log" 2>&1 &
        echo $! >"$PIDFILE"
        for _ in $(seq 100); do
            api GET /version >/dev/null 2>&1 && break
            sleep 0.1
        done
        api GET /version >/dev/null || die "toxiproxy did not answer on $API"
    fi
    if ! api GET "/proxies/$NAME" >/dev/null 2>&1; then
        api POST /proxies "{\"name\":\"$NAME\",\"listen\":\"$LISTEN\",\"upstream\":\"$UPSTREAM\",\"enabled\":true}" >/dev/null
    fi
    log "proxy $LISTEN -> $UPSTREAM"
}

delay() {
    local ms=$1
    [[ $ms =~ ^[0-9]+$ ]] || die "delay: expected milliseconds, got '$ms'"
    for stream in upstream downstream; do
        api DELETE "/proxies/$NAME/toxics/delay_$stream" >/dev/null 2>&1 || true
        if ((ms > 0)); then
            api POST "/proxies/$NAME/toxics" \
                "{\"name\":\"delay_$stream\",\"type\":\"latency\",\"stream\":\"$stream\",\"attributes\":{\"latency\":$ms,\"jitter\":0}}" >/dev/null
        fi
    done
    log "one-way delay ${ms} ms (round trip $((2 * ms)) ms)"
}

down() {
    if running; then
        kill "$(cat "$PIDFILE")"
        log "stopped"
    fi
    rm -f "$PIDFILE"
}

case "${1:-}" in
    up) up ;;
    delay) delay "${2:?delay MS}" ;;
    down) down ;;
    *) echo "usage: $0 up | delay MS | down" >&2; exit 2 ;;
esac
