#!/usr/bin/env bash
# Builds the image of deploy/Containerfile here and runs it against the local
# services (scripts/services.sh up): three `migrate` containers at once on a
# fresh database, as the owner role, as the init containers of three pods
# could; then `run` as a least-privilege login, read-only root filesystem,
# no capabilities, until /healthz answers; then SIGTERM, which must end it
# with status 0. tests/container_image.rs runs it in `make test` (as root,
# with the tests' binary); where no registry is reachable it makes its own
# Debian base.
#
# No registry is reachable from the development machine, so neither
# debian:bookworm-slim nor a Rust image can be pulled. Instead:
#   - the base is made with debootstrap (bookworm, minbase, from Debian's
#     mirror) and tagged docker.io/library/debian:bookworm-slim locally;
#   - the build stage is replaced by the binary built here (--build-context
#     build=…), by default target/release/inventory-inbox (`make build`).
#
# Usage: sudo scripts/image-check.sh [BINARY]
# Environment: IMAGE (localhost/inventory-inbox:check), METRICS_PORT (19464),
# PODMAN_RUNTIME (runc), PODMAN_ULIMITS (see below).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/.local/container
binary=${1:-$root/target/release/inventory-inbox}
image=${IMAGE:-localhost/inventory-inbox:check}
base=docker.io/library/debian:bookworm-slim
port=${METRICS_PORT:-19464}
admin_url=postgres://inventory:inventory@127.0.0.1:5432
database=image_check
app_role=image_check_app
# Seen on the development machine (a VM without CAP_SYS_RESOURCE, cgroup v1
# with a hybrid v2 hierarchy): crun refused both podman's default rlimits
# ("setrlimit `RLIMIT_NOFILE`: Operation not permitted") and the cgroup
# layout ("cgroups in hybrid mode not supported"); runc with the limits the
# runtime already has works.
runtime=${PODMAN_RUNTIME:-runc}
read -r -a ulimits <<<"${PODMAN_ULIMITS:---ulimit nofile=$(ulimit -Hn):$(ulimit -Hn) --ulimit nproc=32768:32768}"
podman_run=(podman run --runtime "$runtime" "${ulimits[@]}" --network host --pull=never
  --read-only --cap-drop ALL --security-opt no-new-privileges)

say() { echo "image-check: $*"; }
fail() { echo "image-check: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || fail "run it as root (rootful podman)"
[[ -x $binary ]] || fail "no binary at $binary (make build)"
missing=()
for tool in podman buildah runc debootstrap psql curl; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
  say "installing podman buildah runc debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    podman buildah runc debootstrap uidmap >/dev/null
fi
mkdir -p "$work"

if ! podman image exists "$base"; then
  say "making $base with debootstrap (minbase)"
  rm -rf "$work/rootfs"
  debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log"
  tar -C "$work/rootfs" --numeric-owner -c . | podman import --change 'CMD ["bash"]' - "$base" >/dev/null 2>&1
  rm -rf "$work/rootfs"
fi

say "building $image from deploy/Containerfile with $binary"
context=$work/prebuilt
rm -rf "$context" && mkdir -p "$context/build/target/release"
# The tests' binary is a debug build, 175 MB, four fifths of it debug
# information the image never uses: without it the layer is 38 MB (a CI
# machine once ran out of space committing the whole binary's).
objcopy --strip-debug "$binary" "$context/build/target/release/inventory-inbox" 2>/dev/null ||
  cp "$binary" "$context/build/target/release/inventory-inbox"
# podman writes a layer's blob to a temporary directory before it stores it,
# /var/tmp unless TMPDIR says otherwise (a small tmpfs on some machines):
# here it goes beside the context, on the disk that holds the build.
export TMPDIR=$work/tmp
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"
# The runtime stage fetches its packages from Debian's mirror: a fetch that
# fails for a moment (seen once on a fresh CI machine) gets two more tries,
# and a build that still fails shows the end of its log, not only its path.
built=no
for attempt in 1 2 3; do
  if podman build --runtime "$runtime" "${ulimits[@]}" --network host --pull=never \
    --build-context build="$context" -f "$root/deploy/Containerfile" -t "$image" "$root" >"$work/build.log" 2>&1; then
    built=yes
    break
  fi
  say "podman build attempt $attempt failed: $(tail -3 "$work/build.log" | tr '\n' ' ')"
done
[[ $built == yes ]] || fail "podman build failed 3 times; the end of $work/build.log:
$(tail -40 "$work/build.log")
space left where podman writes:
$(df -h "$TMPDIR" /var/lib/containers 2>&1)"
say "built $image: $(($(podman image inspect "$image" --format '{{.Size}}') / 1000000)) MB"
# A build leaves the image it replaces untagged (one a failed run kept);
# without this each would keep another ~340 MB.
podman image prune -f >/dev/null 2>&1 || true

container=image-check-$$
cleanup() {
  podman rm -f "$container" >/dev/null 2>&1 || true
  psql -q "$admin_url/inventory" -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" 2>/dev/null || true
  psql -q "$admin_url/inventory" -c "DROP ROLE IF EXISTS $app_role" 2>/dev/null || true
}
trap 'cleanup; rm -rf "$TMPDIR" "$context"' EXIT
cleanup
psql -q "$admin_url/inventory" -c "CREATE DATABASE $database"

say "three migrate containers at once, as the owner role"
pids=()
for i in 1 2 3; do
  "${podman_run[@]}" --rm -e DATABASE_URL="$admin_url/$database" -e DB_STATEMENT_TIMEOUT_MS=0 \
    "$image" migrate >"$work/migrate-$i.log" 2>&1 &
  pids+=($!)
done
for i in 1 2 3; do
  wait "${pids[$((i - 1))]}" || fail "migrate $i failed: $(cat "$work/migrate-$i.log")"
  say "migrate $i: $(grep '^migrated' "$work/migrate-$i.log")"
done

psql -q "$admin_url/$database" -c "CREATE ROLE $app_role LOGIN PASSWORD '$app_role' IN ROLE inventory_app"
# The consumer refuses to start on a topic the cluster does not have.
"$root/scripts/services.sh" topic image_check 1 >/dev/null
say "run, as $app_role, read-only, no capabilities, metrics on 127.0.0.1:$port"
"${podman_run[@]}" -d --name "$container" \
  -e DATABASE_URL="postgres://$app_role:$app_role@127.0.0.1:5432/$database" \
  -e KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 -e KAFKA_TOPIC=image_check -e KAFKA_GROUP_ID=image_check \
  -e INBOX_CONSUMER_NAME=image_check -e DLQ_TOPIC= -e METRICS_ADDR="127.0.0.1:$port" \
  -e KAFKA_PROPERTY_GROUP_INSTANCE_ID=inventory-inbox-0 "$image" >/dev/null
for _ in $(seq 60); do
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.5
done
healthz=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$port/healthz" | tr -d '\n') || fail "/healthz does not answer: $(podman logs "$container" 2>&1 | tail -5)"
say "/healthz: $healthz"
# Ready: the login connected, the schema checked, maintenance done through
# the owner's function, the topic's partition assigned.
for _ in $(seq 60); do
  readyz=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$port/readyz" | tr -d '\n')
  [[ $readyz == "ready 200" ]] && break
  sleep 0.5
done
say "/readyz: $readyz"
[[ $readyz == "ready 200" ]] || fail "the consumer did not get ready: $readyz $(podman logs "$container" 2>&1 | tail -5)"
say "/metrics: $(curl -s "http://127.0.0.1:$port/metrics" | grep -c '^inbox_') inbox_ samples"
say "user in the container: $(podman top "$container" user huser | tail -1)"
[[ $healthz == "ok 200" ]] || fail "/healthz answered $healthz"

podman stop -t 60 "$container" >/dev/null
status=$(podman inspect "$container" --format '{{.State.ExitCode}}')
say "SIGTERM: exit status $status; $(podman logs "$container" 2>&1 | grep -c .) log lines, the last: $(podman logs "$container" 2>&1 | tail -1)"
[[ $status == 0 ]] || fail "the consumer exited $status on SIGTERM"
say "ok: $image starts, answers /healthz and stops cleanly on SIGTERM"
# The image is made again on every run: keeping it holds its layer for
# nothing (the base image stays, so the next build does not debootstrap).
# -f removes the stopped container with it.
podman rmi -f "$image" >/dev/null 2>&1 || true
