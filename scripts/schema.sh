#!/usr/bin/env bash
# The schema the migrations build, in one file a person reads whole
# (`make schema` writes docs/schema.sql; tests/schema_file.rs checks that
# it is what the migrations build today): a fresh database of the local
# PostgreSQL migrated by this build, dumped schema-only, without the
# day partitions (their names carry the day the dump ran; each is its
# parent's shape), the migrations' own table, owners, or the lines of the
# dump that change from run to run. Prints it, or writes it to $1.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG=postgres://inventory:inventory@127.0.0.1:5432
BIN="${INBOX_BIN_DIR:-$REPO/target/release}"
database="schema_$(date +%Y%m%d%H%M%S)_$$"

psql -q "$PG/inventory" -c "CREATE DATABASE $database"
trap 'psql -q "$PG/inventory" -c "DROP DATABASE IF EXISTS $database WITH (FORCE)"' EXIT
DATABASE_URL="$PG/$database" "$BIN/inventory-inbox" migrate >/dev/null
pg_dump --schema-only --no-owner --exclude-table=_sqlx_migrations \
        --exclude-table='*_p[0-9]*' "$PG/$database" \
    | grep -v -e '^-- Dumped from' -e '^-- Dumped by' -e '^\\restrict' -e '^\\unrestrict' \
    | cat -s >"${1:-/dev/stdout}"
