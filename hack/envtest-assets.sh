#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and etcd from the Go module proxy into a cache directory and
# prints that directory (usable as KUBEBUILDER_ASSETS). Nothing is downloaded as a prebuilt binary:
# only Go modules are reachable. A cached build of the pinned versions is reused in well under a
# second; a cold build takes about 12 minutes on 2 cores.
#
# Usage: hack/envtest-assets.sh            -> prints the asset directory on stdout (last line)
# Env:   BANLIEUE_CACHE (default ~/.cache/banlieue), KUBERNETES_VERSION, ETCD_VERSION
set -euo pipefail

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

# k8s.io/kubernetes replaces its staging modules with ./staging/src paths, which `go install`
# refuses. A throw-away module that requires it and points each staging module at its published
# v0.<minor>.<patch> twin builds the real commands.
minor_patch="${KUBERNETES_VERSION#v1.}"
staging_version="v0.$minor_patch"
mkdir -p "$work/kubernetes"
cd "$work/kubernetes"
info_json="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION")"
upstream_gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$info_json")"
upstream_info="$(sed -n 's/^[[:space:]]*"Info": "\(.*\)",\{0,1\}$/\1/p' <<<"$info_json")"
release_time="$(sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$upstream_info")"
{
  printf 'module banlieue.local/kubernetes-binaries\n\n'
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
printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kubectl"\n)\n' >tools.go
log "resolving Kubernetes $KUBERNETES_VERSION modules"
go mod tidy >&2
version_flags=""
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  version_flags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor_patch%%.*}"
  version_flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$release_time"
done
log "building kube-apiserver and kubectl (about 10 minutes cold)"
go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags "all=$version_flags -s -w" \
  -o "$out/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl >&2

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
