#!/usr/bin/env bash
# Builds the node's binaries from the Go module proxy into a cache directory and prints that
# directory (last line): kubelet, kube-controller-manager, kube-scheduler and kube-proxy (the same
# throw-away wrapper module hack/envtest-assets.sh uses for kube-apiserver), and containerd, ctr
# and containerd-shim-runc-v2 (kubelets newer than 1.35 require containerd 2; Debian 12 ships 1.6).
# runc and the CNI plugins come from Debian packages (hack/node.sh installs them). A cached build
# of the pinned versions is reused in well under a second.
#
# Env: BANLIEUE_CACHE (default ~/.cache/banlieue), KUBERNETES_VERSION, CONTAINERD_VERSION
set -euo pipefail

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

log() { echo "node-assets: $*" >&2; }
start=$SECONDS
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0

if ! have_kubernetes; then
  # k8s.io/kubernetes replaces its staging modules with ./staging/src paths, which `go install`
  # refuses; point each at its published v0.<minor>.<patch> twin (as hack/envtest-assets.sh does).
  minor_patch="${KUBERNETES_VERSION#v1.}"
  staging_version="v0.$minor_patch"
  mkdir -p "$work/kubernetes"
  cd "$work/kubernetes"
  info_json="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION")"
  upstream_gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$info_json")"
  upstream_info="$(sed -n 's/^[[:space:]]*"Info": "\(.*\)",\{0,1\}$/\1/p' <<<"$info_json")"
  release_time="$(sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$upstream_info")"
  {
    printf 'module banlieue.local/kubernetes-node-binaries\n\n'
    grep -m1 '^go ' "$upstream_gomod"
    printf '\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$KUBERNETES_VERSION"
    awk '$2 == "=>" && $3 ~ /^\.\/staging\/src\// { print $1 }' "$upstream_gomod" |
      while read -r module; do
        if grep -qE "^[[:space:]]+${module//./\\.} v0\.0\.0([[:space:]]|$)" "$upstream_gomod"; then
          printf '\t%s => %s %s\n' "$module" "$module" "$staging_version"
        fi
      done
    printf ')\n'
  } >go.mod
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in "${kube_commands[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'
  } >tools.go
  log "resolving Kubernetes $KUBERNETES_VERSION modules"
  go mod tidy >&2
  version_flags=""
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    version_flags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor_patch%%.*}"
    version_flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$release_time"
  done
  log "building ${kube_commands[*]} (about 3 minutes once kube-apiserver's packages are cached)"
  pkgs=()
  for c in "${kube_commands[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags "all=$version_flags -s -w" \
    -o "$out/" "${pkgs[@]}" >&2
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

have_kubernetes && have_containerd || { log "built binaries do not report the pinned versions"; exit 1; }
log "done in $((SECONDS - start))s"
echo "$out"
