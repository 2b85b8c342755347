#!/usr/bin/env bash
# Runs the pinned golangci-lint with the given arguments (default: run ./...), under the
# project's .golangci.yml. The binary lives in ${BANLIEUE_CACHE:-~/.cache/banlieue}/bin; when it
# is missing, or reports another version, it is built from the Go module proxy by module path
# and version (go install), never downloaded as a prebuilt binary.
#
# Usage: hack/golangci-lint.sh [ARGS...]
# Env:   BANLIEUE_CACHE (default ~/.cache/banlieue)
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"
cd "$(dirname "$0")/.."

GOLANGCI_LINT_VERSION=v2.15.0
bin_dir="${BANLIEUE_CACHE:-$HOME/.cache/banlieue}/bin"
lint="$bin_dir/golangci-lint"

# It refuses a module whose toolchain is newer than the Go it was built with, so a binary built
# by another Go than hack/lib/toolchain.sh's is rebuilt too.
go_version="$(go env GOVERSION)"
if [[ ! -x "$lint" || "$("$lint" version --short 2>/dev/null)" != "${GOLANGCI_LINT_VERSION#v}" ]] ||
  ! "$lint" version 2>/dev/null | grep -qF "built with $go_version "; then
  echo "golangci-lint: installing $GOLANGCI_LINT_VERSION into $bin_dir" >&2
  mkdir -p "$bin_dir"
  rm -f "$lint" # go install will not replace a file it did not build
  GOBIN="$bin_dir" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
fi

if [[ $# -eq 0 ]]; then
  set -- run ./...
fi
exec "$lint" "$@"
