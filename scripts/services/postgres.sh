# PostgreSQL 15 from Debian's packages: our own cluster in .local/pg on
# 127.0.0.1:5432 (sourced by scripts/services.sh).

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
    # change reaches an existing cluster; postgresql.conf includes it. The
    # shared settings are the template's (scripts/services/postgresql.conf).
    {
        echo "# Written by scripts/services.sh on every \`up\`; edit scripts/services/postgresql.conf."
        echo "listen_addresses = '$PG_HOST'"
        echo "port = $PG_PORT"
        echo "unix_socket_directories = '$PG_SOCK'"
        cat "$SERVICES_DIR/postgresql.conf"
    } >"$PG_DATA/inventory-inbox.conf"
    cp "$SERVICES_DIR/pg_hba.conf" "$PG_DATA/pg_hba.conf"
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

cmd_restart_postgres() {
    lock
    pg_pid >/dev/null || die "postgres is not running (run: $0 up)"
    log "restarting postgres (fast: open sessions are terminated)"
    as_postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -m fast -w -t "$PG_READY_TIMEOUT" restart \
        </dev/null >/dev/null 9>&- || { tail_log "$PG_LOG"; die "postgres did not restart"; }
    pg_wait_ready
}
