#!/usr/bin/env bash
# What the local services need on a fresh machine, installed idempotently
# (quick when everything is there): PostgreSQL 15, Java, Maven and kcat from
# Debian's packages (Kafka's jars are fetched by services/common.sh, per
# version). Run by `scripts/services.sh up`, `make services-up` and
# scripts/compat.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/services/common.sh"

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

((EUID == 0)) || die "run as root (it installs Debian packages)"
# On its own it takes the lock of up/down (two apt-get at once fail).
[[ -n ${SERVICES_LOCKED:-} ]] || lock
ensure_packages
