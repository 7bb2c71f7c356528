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
#   scripts/toxiproxy.sh status         exit 0 when a server answers on the API
#
# Whether a server runs is asked of its API, never of the pid file: a server
# started while another held the port fails to bind it and yet keeps
# running, serving nothing. Whoever starts the server stops it again
# (scripts/db-pair.sh, bench-network.sh; make services-down too).
# Everything lives under .local/toxiproxy (binary, pid, log).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOXIPROXY_VERSION=v2.12.0
DIR="$REPO/.local/toxiproxy"
BIN="$DIR/bin/server"
PIDFILE="$DIR/toxiproxy.pid"
LOG="$DIR/toxiproxy.log"
API=${TOXIPROXY_API:-127.0.0.1:8474}
LISTEN=${TOXIPROXY_LISTEN:-127.0.0.1:25432}
UPSTREAM=${TOXIPROXY_UPSTREAM:-127.0.0.1:5432}
NAME=postgres

log() { echo "[toxiproxy] $*" >&2; }
die() { log "$*"; exit 1; }

api() { # METHOD PATH [JSON]; a server that takes the connection and never
    # answers is no server either.
    curl -fsS --max-time 3 -X "$1" "http://$API$2" ${3:+-H 'Content-Type: application/json' -d "$3"}
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

answers() { api GET /version >/dev/null 2>&1; }
# The server this script started, if it still runs (it may serve nothing).
ours() { [[ -f $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

# Stops the server of ours; says nothing (0: there was one).
stop_ours() {
    local pid stopped=1
    if ours; then
        pid=$(cat "$PIDFILE")
        kill "$pid"
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        stopped=0
    fi
    rm -f "$PIDFILE"
    return $stopped
}

up() {
    install
    if ! answers; then
        # A server of ours that does not answer is of no use.
        stop_ours || true
        log "starting toxiproxy (API $API, log $LOG)"
        "$BIN" -host "${API%:*}" -port "${API##*:}" >"$LOG" 2>&1 &
        echo $! >"$PIDFILE"
        for _ in $(seq 100); do
            ours || break
            grep -q '"Server finished with error"' "$LOG" && break
            answers && break
            sleep 0.1
        done
        if ! answers || ! ours; then
            local why
            why=$(grep -o '"error":"[^"]*"' "$LOG" | head -n 1 | cut -d'"' -f4)
            stop_ours || true
            die "toxiproxy did not start on $API: ${why:-no answer within 10 s} (see $LOG)"
        fi
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
    if stop_ours; then
        log "stopped"
    fi
    if answers; then
        log "a toxiproxy this script did not start still answers on $API; left running"
    fi
}

status() {
    if answers; then
        echo "toxiproxy: up ($API$(ours && echo ", pid $(cat "$PIDFILE")"))"
    else
        echo "toxiproxy: down ($API)"
        return 1
    fi
}

case "${1:-}" in
    up) up ;;
    delay) delay "${2:?delay MS}" ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up | delay MS | down | status" >&2; exit 2 ;;
esac
