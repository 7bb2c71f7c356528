#!/usr/bin/env bash
# The OpenTelemetry Collector the tests run (tests/common/private_otelcol.rs):
# tools/otelcol, a minimal distribution pinned by its go.mod, built from the
# Go module proxy with the machine's Go.
#
# Usage: scripts/otelcol.sh build
#
#   build   build .local/otelcol/otelcol if it is missing or was built from
#           other sources (tools/otelcol's go.mod, go.sum, *.go) or another
#           Go; print its path. The first build takes minutes (make test-deps
#           does it before cargo test); later calls only compare a checksum.
#           Concurrent calls wait for one another (flock).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SOURCE="$REPO/tools/otelcol"
OUT="$REPO/.local/otelcol"
BINARY="$OUT/otelcol"
# The checksum of what the binary was built from, written after a build.
STAMP="$OUT/otelcol.sources"

# What the binary is built from: the module's files and the Go that builds it.
sources_checksum() {
  (
    cd "$SOURCE"
    go version
    sha256sum go.mod go.sum ./*.go
  ) | sha256sum | cut -d' ' -f1
}

build() {
  command -v go >/dev/null || {
    echo "otelcol: Go is not installed (tools/otelcol needs the machine's Go, 1.26)" >&2
    exit 1
  }
  mkdir -p "$OUT"
  exec 9>"$OUT/build.lock"
  flock 9
  local checksum
  checksum="$(sources_checksum)"
  if [[ -x $BINARY && -f $STAMP && $(<"$STAMP") == "$checksum" ]]; then
    echo "$BINARY"
    return
  fi
  echo "otelcol: building $BINARY from tools/otelcol (minutes the first time)" >&2
  local started=$SECONDS
  # -mod=readonly: the versions are go.mod's, never resolved anew here.
  (cd "$SOURCE" && go build -mod=readonly -trimpath -buildvcs=false -o "$BINARY.new" .)
  mv -f "$BINARY.new" "$BINARY"
  echo "$checksum" >"$STAMP"
  echo "otelcol: built in $((SECONDS - started)) s" >&2
  echo "$BINARY"
}

case "${1:-}" in
  build) build ;;
  *)
    echo "usage: scripts/otelcol.sh build" >&2
    exit 2
    ;;
esac
