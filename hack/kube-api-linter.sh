#!/usr/bin/env bash
# Runs kube-api-linter over the API types (api/), under .golangci-kal.yml: the rules of the
# Kubernetes API conventions the project keeps (docs/security.md, "A bounded API"). The linter is
# a golangci-lint module plugin; its own module ships a golangci-lint with the plugin built in
# (cmd/golangci-lint-kube-api-linter), built here from the Go module proxy by module path and
# version (go install) into ${BANLIEUE_CACHE:-~/.cache/banlieue}/bin, never downloaded prebuilt.
#
# Usage: hack/kube-api-linter.sh [ARGS...]   (default: run ./api/...; run gets the config)
# Env:   BANLIEUE_CACHE (default ~/.cache/banlieue)
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"
cd "$(dirname "$0")/.."

# kube-api-linter publishes no tags: the version is a commit's pseudo-version.
KAL_VERSION=v0.0.0-20260716143926-092fe0c72997
bin_dir="${BANLIEUE_CACHE:-$HOME/.cache/banlieue}/bin"
lint="$bin_dir/golangci-lint-kube-api-linter"

# The golangci-lint this kube-api-linter commit is built on cannot read the export data of
# go1.27 (hack/lib/toolchain.sh): it is built and run with the machine's own Go (GOTOOLCHAIN=local;
# go.mod's go line, 1.26, is what .golangci-kal.yml targets). It only reads the API types; the
# build and the other linters use go.mod's toolchain. Rebuilt when another Go built it.
go_version="$(GOTOOLCHAIN=local go env GOVERSION)"
if [[ ! -x "$lint" ]] || ! "$lint" version 2>/dev/null | grep -qF "kube-api-linter has version ${KAL_VERSION#v} " ||
  ! "$lint" version 2>/dev/null | grep -qF "built with $go_version "; then
  echo "kube-api-linter: installing $KAL_VERSION into $bin_dir" >&2
  mkdir -p "$bin_dir"
  rm -f "$lint" # go install will not replace a file it did not build
  GOTOOLCHAIN=local GOBIN="$bin_dir" go install "sigs.k8s.io/kube-api-linter/cmd/golangci-lint-kube-api-linter@$KAL_VERSION"
fi

if [[ $# -eq 0 ]]; then
  set -- run ./api/...
fi
if [[ $1 == run ]]; then
  # It waits for a golangci-lint already running rather than failing, and keeps a cache of its
  # own: it is another golangci-lint release than hack/golangci-lint.sh's.
  set -- run --config .golangci-kal.yml --allow-serial-runners "${@:2}"
fi
export GOLANGCI_LINT_CACHE="${BANLIEUE_CACHE:-$HOME/.cache/banlieue}/golangci-lint-kal"
GOTOOLCHAIN=local exec "$lint" "$@"
