#!/usr/bin/env bash
# Builds the helm CLI from the Go module proxy (helm.sh/helm/v3) into a cache directory and
# prints the binary's path. Only Go modules are reachable, so no release tarball is downloaded;
# helm is never a dependency of banlieue's own module (it is built on its own, outside it). A
# cached build of the pinned version is reused in well under a second; a cold build takes a few
# minutes on 2 cores (most of it compiling the Kubernetes client libraries).
#
# Usage: hack/helm.sh            -> prints the helm binary's path on stdout (last line)
# Env:   BANLIEUE_CACHE (default ~/.cache/banlieue), HELM_VERSION
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"

HELM_VERSION="${HELM_VERSION:-v3.21.4}"
cache="${BANLIEUE_CACHE:-$HOME/.cache/banlieue}"
out="$cache/helm/$HELM_VERSION"
helm="$out/helm"

have_pinned_binary() {
  [[ -x "$helm" ]] &&
    [[ "$("$helm" version --template '{{.Version}}' 2>/dev/null)" == "$HELM_VERSION" ]]
}

if have_pinned_binary; then
  echo "$helm"
  exit 0
fi

log() { echo "helm: $*" >&2; }
start=$SECONDS
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0
# Run outside any module (banlieue's go.mod must not see helm) and with a private GOBIN.
cd "$work"
export GO111MODULE=on

# Helm's release build stamps its version and the Kubernetes version `helm template` assumes
# (.Capabilities.KubeVersion) from the client-go it is built with; do the same.
if ! info_json="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION")"; then
  log "cannot download helm.sh/helm/v3@$HELM_VERSION from the Go module proxy:"
  echo "$info_json" >&2
  exit 1
fi
upstream_gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$info_json")"
client_go="$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$upstream_gomod")" # v0.37.0
k8s_minor="$(cut -d. -f2 <<<"$client_go")"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done

mkdir -p "$work/bin" "$out"
log "building helm $HELM_VERSION (a few minutes cold)"
if ! GOBIN="$work/bin" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" 2>"$work/install.log"; then
  cat "$work/install.log" >&2
  if ! grep -q 'replace directives\|exclude directives' "$work/install.log"; then
    exit 1
  fi
  # A release whose go.mod carries replace directives: `go install pkg@version` refuses it, so
  # build it from a throw-away module that requires helm and copies those replaces.
  log "go install refused $HELM_VERSION; building it from a wrapper module"
  mkdir -p "$work/wrapper"
  cd "$work/wrapper"
  {
    printf 'module banlieue.local/helm-binary\n\n'
    grep -m1 '^go ' "$upstream_gomod"
    printf '\nrequire helm.sh/helm/v3 %s\n\n' "$HELM_VERSION"
    awk '/^replace \($/ { inblock = 1; print; next }
         inblock { print; if ($0 ~ /^\)$/) inblock = 0; next }
         /^replace / { print }' "$upstream_gomod"
  } >go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "helm.sh/helm/v3/cmd/helm"\n' >tools.go
  go mod tidy >&2
  go build -trimpath -ldflags "$ldflags" -o "$work/bin/helm" helm.sh/helm/v3/cmd/helm >&2
fi
mv "$work/bin/helm" "$helm"

have_pinned_binary || { log "built binary does not report $HELM_VERSION"; exit 1; }
log "done in $((SECONDS - start))s"
echo "$helm"
