#!/usr/bin/env bash
# Validates the Kubernetes manifests of deploy/ offline, with pinned tools
# it installs into .local/ on first use (run by tests/deploy_manifests.rs):
#
#   kustomize      v5.8.2 (go install from the Go module proxy; v5.8.3 needs
#                  Go 1.27), renders each kustomization; where kubectl is
#                  installed, `kubectl kustomize` renders it too and its
#                  output is validated as well (it is what `kubectl apply -k`
#                  applies)
#   kubernetes-validate 1.37.0 (PyPI, scripts/deploy-check-requirements.txt,
#                  venv .local/venv-deploy): every built-in kind, --strict (an
#                  unknown field fails), against the schemas of Kubernetes
#                  1.31 and 1.37
#   prometheus-operator v0.85.0's CRDs (the Go module's
#                  example/prometheus-operator-crd/, checksum pinned here):
#                  the PodMonitor, by scripts/deploy_manifest_check.py, which
#                  also fails on a document of a kind no schema knows and
#                  checks selectors, port names and config references
#
# Usage: scripts/deploy-check.sh [KUSTOMIZATION_DIR...]
#        (default: deploy/base deploy/overlays/example)
# Exits non-zero when a tool cannot be installed or a document is invalid.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
local_dir=$root/.local
kustomize_version=v5.8.2
kubernetes_versions=(1.31.0 1.37.0)
operator_module=github.com/prometheus-operator/prometheus-operator
operator_version=v0.85.0
operator_sum=h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s=
requirements=$root/scripts/deploy-check-requirements.txt
venv=$local_dir/venv-deploy
kustomize=$local_dir/bin/kustomize

if (($#)); then
  targets=("$@")
else
  targets=("$root/deploy/base" "$root/deploy/overlays/example")
fi

say() { echo "deploy-check: $*"; }
fail() { echo "deploy-check: $*" >&2; exit 1; }

mkdir -p "$local_dir/bin"
# One installer at a time (the tests run the check concurrently).
exec 9>"$local_dir/deploy-check.lock"
flock 9

if [[ ! -x $kustomize ]] || [[ $("$kustomize" version 2>/dev/null) != "$kustomize_version" ]]; then
  command -v go >/dev/null || fail "Go is needed to install kustomize $kustomize_version"
  say "installing kustomize $kustomize_version into .local/bin"
  GOBIN=$local_dir/bin GOFLAGS=-mod=mod nice -n 19 go install "sigs.k8s.io/kustomize/kustomize/v5@$kustomize_version" ||
    fail "could not install kustomize $kustomize_version"
fi

if ! cmp -s "$requirements" "$venv/requirements.txt" 2>/dev/null; then
  say "installing kubernetes-validate into .local/venv-deploy"
  rm -rf "$venv"
  if ! python3 -m venv "$venv" 2>/dev/null; then
    # Debian's python3 has no venv module without python3-venv.
    rm -rf "$venv"
    sudo_cmd=()
    [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    python3 -m venv "$venv" || fail "could not create a Python venv in $venv"
  fi
  nice -n 19 "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements" ||
    fail "could not install $requirements"
  cp "$requirements" "$venv/requirements.txt"
fi

module=$(cd "$local_dir" && go mod download -json "$operator_module@$operator_version") ||
  fail "could not download $operator_module@$operator_version: $module"
{ read -r dir; read -r sum; } < <("$venv/bin/python" -c \
  'import json, sys; m = json.load(sys.stdin); print(m["Dir"]); print(m["Sum"])' <<<"$module")
[[ $sum == "$operator_sum" ]] || fail "$operator_module@$operator_version has checksum $sum, expected $operator_sum"
crds=("$dir"/example/prometheus-operator-crd/monitoring.coreos.com_{podmonitors,servicemonitors}.yaml)
flock -u 9

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Validates one rendered build (a file in $out): kubernetes-validate for the
# built-in kinds, deploy_manifest_check.py for the rest and the references.
validate() {
  local build=$1 status=0
  for version in "${kubernetes_versions[@]}"; do
    (cd "$out" && "$venv/bin/kubernetes-validate" --strict -k "$version" "$build") || status=1
  done
  (cd "$out" && "$venv/bin/python" "$root/scripts/deploy_manifest_check.py" \
    "${kubernetes_versions[@]/#/--kubernetes-version=}" "${crds[@]/#/--crd=}" "$build") || status=1
  return $status
}

documents=0
failed=()
for target in "${targets[@]}"; do
  name=$(basename "$(dirname "$target")")-$(basename "$target")
  build=$name.yaml
  say "$target: kustomize $kustomize_version build > $build"
  if ! "$kustomize" build "$target" >"$out/$build"; then
    failed+=("$target (kustomize build)")
    continue
  fi
  validate "$build" || failed+=("$target")
  documents=$((documents + $(grep -c '^kind:' "$out/$build")))
  if command -v kubectl >/dev/null; then
    kubectl_build=$name.kubectl.yaml
    if ! kubectl kustomize "$target" >"$out/$kubectl_build"; then
      failed+=("$target (kubectl kustomize)")
    elif cmp -s "$out/$build" "$out/$kubectl_build"; then
      say "$target: kubectl kustomize renders the same"
    else
      say "$target: kubectl kustomize renders differently; validating its output too"
      validate "$kubectl_build" || failed+=("$target (kubectl kustomize)")
    fi
  fi
done

if ((${#failed[@]})); then
  fail "invalid: ${failed[*]}"
fi
say "ok: ${#targets[@]} kustomizations, $documents documents valid (Kubernetes ${kubernetes_versions[*]}, strict; PodMonitor by prometheus-operator $operator_version's CRD)"
