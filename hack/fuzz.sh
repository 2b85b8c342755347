#!/usr/bin/env bash
# Runs every Go fuzz target of the project for a fixed budget each (default 30s).
#   hack/fuzz.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-30s}

# fuzz runs one target. A crash fails at once and leaves its input in testdata/fuzz. When the
# budget ends while a worker is still inside a slow input (FuzzPeer's inputs dial a TLS peer and
# may wait out their timeouts), the Go fuzzer itself fails with "context deadline exceeded"
# and writes no input: that, and only that, is run once more.
fuzz() {
  local pkg=$1 target=$2 out
  # -fuzzminimizetime 1x: a new input found near the end of the budget is minimised past the
  # deadline otherwise, which the engine reports as "context deadline exceeded" with no input.
  if out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" -fuzzminimizetime 1x "$pkg" 2>&1); then
    echo "$out"
    return 0
  fi
  echo "$out"
  if grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written to' <<<"$out"; then
    echo "==> $target: the fuzzer's own deadline, no failing input; once more"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" -fuzzminimizetime 1x "$pkg"
    return
  fi
  return 1
}

for pkg in $(go list ./... ); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "==> fuzz $pkg $target ($budget)"
    fuzz "$pkg" "$target"
  done
done
