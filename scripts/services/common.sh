# Shared by scripts/services.sh and the per-service files it sources:
# where things live, logging, and small TCP helpers.

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LOCAL="$REPO/.local"
# The per-service scripts and their configuration templates, which the
# tests' private servers read too (tests/common/private_*.rs).
SERVICES_DIR="$REPO/scripts/services"

log() { printf '[services] %s\n' "$*" >&2; }
die() { printf '[services] ERROR: %s\n' "$*" >&2; exit 1; }

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
