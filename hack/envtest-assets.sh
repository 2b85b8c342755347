#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and etcd from the Go module proxy into a cache directory and
# prints that directory (usable as KUBEBUILDER_ASSETS). Nothing is downloaded as a prebuilt binary:
# only Go modules are reachable. A cached build of the pinned versions is reused in well under a
# second; a cold build takes about 12 minutes on 2 cores.
#
# Usage: hack/envtest-assets.sh            -> prints the asset directory on stdout (last line)
# Env:   BANLIEUE_CACHE (default ~/.cache/banlieue), KUBERNETES_VERSION, ETCD_VERSION
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"
# shellcheck source=lib/kubernetes-from-modules.sh
source "$(dirname "$0")/lib/kubernetes-from-modules.sh"

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
cache="${BANLIEUE_CACHE:-$HOME/.cache/banlieue}"
out="$cache/envtest/$KUBERNETES_VERSION-etcd$ETCD_VERSION"
mkdir -p "$out"

have_pinned_binaries() {
  [[ -x "$out/kube-apiserver" && -x "$out/kubectl" && -x "$out/etcd" ]] &&
    [[ "$("$out/kube-apiserver" --version 2>/dev/null)" == "Kubernetes $KUBERNETES_VERSION" ]] &&
    [[ "$("$out/etcd" --version 2>/dev/null | head -1)" == "etcd Version: ${ETCD_VERSION#v}" ]]
}

if have_pinned_binaries; then
  echo "$out"
  exit 0
fi

log() { echo "envtest-assets: $*" >&2; }
start=$SECONDS
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0

log "building kube-apiserver and kubectl (about 10 minutes cold)"
build_kubernetes_commands "$out" "$KUBERNETES_VERSION" kube-apiserver kubectl

mkdir -p "$work/etcd"
cd "$work/etcd"
printf 'module banlieue.local/etcd-binary\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >go.mod
printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go
log "building etcd $ETCD_VERSION"
go mod tidy >&2
go build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=modules-$ETCD_VERSION" \
  -o "$out/etcd" go.etcd.io/etcd/server/v3 >&2

have_pinned_binaries || { log "built binaries do not report the pinned versions"; exit 1; }
log "done in $((SECONDS - start))s"
echo "$out"
