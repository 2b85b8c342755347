#!/usr/bin/env bash
# Runs every Go fuzz target of the project for a fixed budget each (default 30s).
#   hack/fuzz.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-30s}
for pkg in $(go list ./... ); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "==> fuzz $pkg $target ($budget)"
    # -fuzzminimizetime keeps minimisation from stalling on two cores.
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" -fuzzminimizetime 5s "$pkg"
  done
done
