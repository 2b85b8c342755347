#!/usr/bin/env bash
# Builds the node's binaries from the Go module proxy into a cache directory and prints that
# directory (last line): kubelet, kube-controller-manager, kube-scheduler and kube-proxy (built as
# hack/envtest-assets.sh builds kube-apiserver: hack/lib/kubernetes-from-modules.sh), and containerd, ctr
# and containerd-shim-runc-v2 (kubelets newer than 1.35 require containerd 2; Debian 12 ships 1.6).
# runc and the CNI plugins come from Debian packages (hack/node.sh installs them). A cached build
# of the pinned versions is reused in well under a second.
#
# Env: BANLIEUE_CACHE (default ~/.cache/banlieue), KUBERNETES_VERSION, CONTAINERD_VERSION
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"
# shellcheck source=lib/kubernetes-from-modules.sh
source "$(dirname "$0")/lib/kubernetes-from-modules.sh"

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.37.2}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
cache="${BANLIEUE_CACHE:-$HOME/.cache/banlieue}"
out="$cache/node/$KUBERNETES_VERSION-containerd$CONTAINERD_VERSION"
mkdir -p "$out"

kube_commands=(kubelet kube-controller-manager kube-scheduler kube-proxy)
have_kubernetes() {
  local c
  for c in "${kube_commands[@]}"; do
    [[ -x "$out/$c" && "$("$out/$c" --version 2>/dev/null)" == "Kubernetes $KUBERNETES_VERSION" ]] || return 1
  done
}
have_containerd() {
  [[ -x "$out/containerd" && -x "$out/ctr" && -x "$out/containerd-shim-runc-v2" ]] &&
    "$out/containerd" --version 2>/dev/null | grep -q " $CONTAINERD_VERSION "
}

if have_kubernetes && have_containerd; then
  echo "$out"
  exit 0
fi
# One build at a time: .ci/run builds in the background what test/install's test asks for too.
exec 9>"$out/.lock"
flock 9
if have_kubernetes && have_containerd; then
  echo "$out"
  exit 0
fi

log() { echo "node-assets: $*" >&2; }
start=$SECONDS
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0

if ! have_kubernetes; then
  log "building ${kube_commands[*]} (about 3 minutes once kube-apiserver's packages are cached)"
  build_kubernetes_commands "$out" "$KUBERNETES_VERSION" "${kube_commands[@]}"
fi

if ! have_containerd; then
  mkdir -p "$work/containerd"
  cd "$work/containerd"
  printf 'module banlieue.local/containerd-binaries\n\ngo 1.26.0\n\nrequire github.com/containerd/containerd/v2 %s\n' \
    "$CONTAINERD_VERSION" >go.mod
  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "github.com/containerd/containerd/v2/cmd/containerd"\n\t_ "github.com/containerd/containerd/v2/cmd/ctr"\n\t_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"\n)\n' >tools.go
  log "resolving containerd $CONTAINERD_VERSION modules"
  go mod tidy >&2
  log "building containerd, ctr and containerd-shim-runc-v2"
  # No btrfs/devmapper/zfs snapshotters: the node uses overlayfs, and these need cgo headers.
  go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
    -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
    -o "$out/" github.com/containerd/containerd/v2/cmd/containerd \
    github.com/containerd/containerd/v2/cmd/ctr \
    github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 >&2
fi

if ! have_kubernetes || ! have_containerd; then
  log "built binaries do not report the pinned versions"
  exit 1
fi
log "done in $((SECONDS - start))s"
echo "$out"
