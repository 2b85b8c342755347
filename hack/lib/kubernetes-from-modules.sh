# shellcheck shell=bash
# shellcheck source=toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.sh"
# Sourced by hack/envtest-assets.sh and hack/node-assets.sh: builds commands of k8s.io/kubernetes
# from the Go module proxy, the only place this machine can get them from.
#
# build_kubernetes_commands OUT VERSION COMMAND... builds k8s.io/kubernetes/cmd/<COMMAND> at
# VERSION into OUT, stamped with VERSION so `--version` answers it (the callers' cache check).
# k8s.io/kubernetes replaces its staging modules with ./staging/src paths, which `go install`
# refuses. A throw-away module that requires it and points each staging module at its published
# v0.<minor>.<patch> twin builds the real commands. Needs CGO_ENABLED set by the caller.
build_kubernetes_commands() {
  local out="$1" version="$2"
  shift 2
  local work minor_patch staging_version info_json upstream_gomod upstream_info release_time
  work="$(mktemp -d)"
  minor_patch="${version#v1.}"
  staging_version="v0.$minor_patch"
  (
    cd "$work" || exit
    info_json="$(go mod download -json "k8s.io/kubernetes@$version")"
    upstream_gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$info_json")"
    upstream_info="$(sed -n 's/^[[:space:]]*"Info": "\(.*\)",\{0,1\}$/\1/p' <<<"$info_json")"
    release_time="$(sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$upstream_info")"
    {
      printf 'module banlieue.local/kubernetes-binaries\n\n'
      grep -m1 '^go ' "$upstream_gomod"
      printf '\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$version"
      awk '$2 == "=>" && $3 ~ /^\.\/staging\/src\// { print $1 }' "$upstream_gomod" |
        while read -r module; do
          if grep -qE "^[[:space:]]+${module//./\\.} v0\.0\.0([[:space:]]|$)" "$upstream_gomod"; then
            printf '\t%s => %s %s\n' "$module" "$module" "$staging_version"
          fi
        done
      printf ')\n'
    } >go.mod
    local c pkgs=()
    {
      printf '//go:build tools\n\npackage tools\n\nimport (\n'
      for c in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
      printf ')\n'
    } >tools.go
    for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
    go mod tidy >&2
    local version_flags="" pkg
    for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
      version_flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor_patch%%.*}"
      version_flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$release_time"
    done
    go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags "all=$version_flags -s -w" \
      -o "$out/" "${pkgs[@]}" >&2
  )
  local rc=$?
  rm -rf "$work"
  return $rc
}
