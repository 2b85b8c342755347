#!/usr/bin/env bash
# Runs every Go fuzz target of the project for a fixed budget each (default 30s).
#   hack/fuzz.sh [DURATION]
#   hack/fuzz.sh build    only compiles each fuzzed package's instrumented test binary into Go's
#                         build cache, running nothing: with an empty cache that is about half of
#                         a 10s-budget run's time (the standard library instrumented first, about
#                         30 s), which .ci/run does in the background long before it fuzzes.
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"
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

if [[ $budget == build ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
for pkg in $(go list ./... ); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  # Fuzz target names are single words, so the word split reads one per line.
  # shellcheck disable=SC2013
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    if [[ $budget == build ]]; then
      # The instrumentation is the package's, whichever target: one build per package.
      echo "==> fuzz build $pkg"
      go test -c -fuzz "^${target}\$" -o "$out/fuzz.test" "$pkg"
      break
    fi
    echo "==> fuzz $pkg $target ($budget)"
    fuzz "$pkg" "$target"
  done
done
