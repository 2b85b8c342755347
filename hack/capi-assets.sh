#!/usr/bin/env bash
# Builds Cluster API's core manager (sigs.k8s.io/cluster-api/core, the `manager` binary of its
# release image) and clusterctl (sigs.k8s.io/cluster-api/cmd/clusterctl) from the Go module proxy
# into a cache directory, with the manager's CRDs next to them, and prints that directory (last
# line). Nothing is downloaded as a prebuilt binary: only Go modules
# are reachable (hack/envtest-assets.sh builds kube-apiserver the same way). A cached build of the
# pinned version is reused in well under a second.
#
# Layout (from the module's core/config, unchanged): <dir>/manager, <dir>/clusterctl, <dir>/crd/*.yaml (crd/bases),
# <dir>/webhook/manifests.yaml, <dir>/rbac/{role,aggregated_role}.yaml.
# Env:    BANLIEUE_CACHE (default ~/.cache/banlieue), CAPI_VERSION
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"

CAPI_VERSION="${CAPI_VERSION:-v1.14.2}"
cache="${BANLIEUE_CACHE:-$HOME/.cache/banlieue}"
out="$cache/capi/$CAPI_VERSION"
mkdir -p "$out"

# Each binary's build information names the module (its "mod" line) and version its package
# comes from; the manifests are copied after the builds, the RBAC last, so its presence marks a
# complete run.
built_pinned() {
  [[ -x "$1" ]] && go version -m "$1" 2>/dev/null |
    grep -qE "^[[:space:]]+mod[[:space:]]+sigs\.k8s\.io/cluster-api[[:space:]]+${CAPI_VERSION//./\\.}([[:space:]]|$)"
}
have_pinned() {
  [[ -s "$out/crd/cluster.x-k8s.io_machines.yaml" && -s "$out/rbac/aggregated_role.yaml" ]] &&
    built_pinned "$out/manager" && built_pinned "$out/clusterctl"
}

if have_pinned; then
  echo "$out"
  exit 0
fi

log() { echo "capi-assets: $*" >&2; }
start=$SECONDS
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0

cd "$work"
# sigs.k8s.io/cluster-api replaces its api module with ./api, a replace a requiring module does
# not inherit: the wrapper requires the published api module of the same version instead.
printf 'module banlieue.local/capi-manager\n\ngo 1.26.0\n\nrequire (\n\tsigs.k8s.io/cluster-api %s\n\tsigs.k8s.io/cluster-api/api %s\n)\n' \
  "$CAPI_VERSION" "$CAPI_VERSION" >go.mod
printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "sigs.k8s.io/cluster-api/cmd/clusterctl"\n\t_ "sigs.k8s.io/cluster-api/core"\n)\n' >tools.go
log "resolving sigs.k8s.io/cluster-api $CAPI_VERSION modules"
go mod tidy >&2
src="$(go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"
info="$(go mod download -json "sigs.k8s.io/cluster-api@$CAPI_VERSION" | sed -n 's/^[[:space:]]*"Info": "\(.*\)",\{0,1\}$/\1/p')"
release_time="$(sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$info")"
minor="${CAPI_VERSION#v1.}"
minor="${minor%%.*}"
pkg=sigs.k8s.io/cluster-api/version
# The stamp its release build sets (hack/scripts/release/version.sh), so the manager logs its
# version at start.
ldflags="-s -w -X $pkg.gitVersion=$CAPI_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit=module-$CAPI_VERSION -X $pkg.buildDate=$release_time"
log "building the core manager (a few minutes cold)"
go build -trimpath -ldflags "$ldflags" -o "$out/manager" sigs.k8s.io/cluster-api/core >&2
log "building clusterctl"
go build -trimpath -ldflags "$ldflags" -o "$out/clusterctl" sigs.k8s.io/cluster-api/cmd/clusterctl >&2

rm -rf "$out/crd" "$out/webhook" "$out/rbac"
mkdir -p "$out/crd" "$out/webhook" "$out/rbac"
cp "$src"/core/config/crd/bases/*.yaml "$out/crd/"
cp "$src"/core/config/webhook/manifests.yaml "$out/webhook/"
cp "$src"/core/config/rbac/role.yaml "$src"/core/config/rbac/aggregated_role.yaml "$out/rbac/"
# The module cache is read-only; the copies need not be.
chmod -R u+w "$out/crd" "$out/webhook" "$out/rbac"

have_pinned || { log "the built manager or clusterctl does not report sigs.k8s.io/cluster-api $CAPI_VERSION"; exit 1; }
log "done in $((SECONDS - start))s"
echo "$out"
