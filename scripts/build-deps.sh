#!/usr/bin/env bash
# Installs the system packages the Rust build needs (librdkafka is built from
# source with TLS: a C toolchain, cmake, OpenSSL, zlib and curl headers).
# Idempotent: does nothing when everything is present.
set -euo pipefail

needed=(cmake pkg-config libssl-dev zlib1g-dev libcurl4-openssl-dev)
missing=()
for pkg in "${needed[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "build-deps: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
