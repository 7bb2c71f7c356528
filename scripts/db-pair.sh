#!/usr/bin/env bash
# A PostgreSQL primary with an asynchronous streaming standby, behind one
# endpoint, for the fault runs (make chaos, make explore): its database can
# be restarted, and failed over to a standby that lacks the last commits,
# without touching the shared cluster of scripts/services.sh. The work is
# `inbox-services pair` (services/src/pair.rs), built on first use.
#
#   scripts/db-pair.sh up          a fresh primary (127.0.0.1:15432, role and
#                                  database `inventory`), its standby
#                                  (pg_basebackup -R, 127.0.0.1:15433), and the
#                                  endpoint 127.0.0.1:25433 -> primary (a
#                                  toxiproxy proxy, as a cluster's DNS name);
#                                  prints the endpoint's URL, alone on stdout
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
# stopped by `down`); TOXIPROXY_API is its API (127.0.0.1:8474).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/services/common.sh"
build_services
exec "$SERVICES_BIN" pair "$@"
