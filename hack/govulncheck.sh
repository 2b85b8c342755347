#!/usr/bin/env bash
# govulncheck over banlieue's packages, against the Go vulnerability database of a pinned
# golang.org/x/vulndb module (docs/security.md, "Known vulnerabilities"). The database's web
# endpoint is not reachable here; the module proxy is, and the module holds every report as OSV
# JSON (data/osv). x/vulndb's own cmd/indexdb turns that folder into govulncheck's v1 database
# layout (index/db.json, index/modules.json, ID/<id>.json), read with -db file://. Both tools are
# built from the module proxy by module path and version (go install), never downloaded
# prebuilt; the tools and the database are cached under ${BANLIEUE_CACHE:-~/.cache/banlieue}
# by version. Fails (exit 3) on a vulnerability whose vulnerable symbol our code reaches; imported
# or required-only findings are listed by -show verbose but fail nothing.
#
# Usage: hack/govulncheck.sh [ARGS...]   (default: ./...; ARGS replace the patterns)
# Env:   BANLIEUE_CACHE (default ~/.cache/banlieue)
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"
cd "$(dirname "$0")/.."

VULN_VERSION=v1.9.0
VULNDB_VERSION=v0.0.0-20261105234957-e22db6528018
cache="${BANLIEUE_CACHE:-$HOME/.cache/banlieue}"
tools="$cache/govulncheck-$VULN_VERSION"
db="$cache/vulndb-$VULNDB_VERSION"

if [[ ! -x "$tools/govulncheck" ]]; then
  echo "govulncheck: installing golang.org/x/vuln $VULN_VERSION into $tools" >&2
  mkdir -p "$tools"
  GOBIN="$tools" go install "golang.org/x/vuln/cmd/govulncheck@$VULN_VERSION"
fi

if [[ ! -s "$db/index/db.json" ]]; then
  echo "govulncheck: building the database of golang.org/x/vulndb $VULNDB_VERSION into $db" >&2
  mkdir -p "$cache"
  indexdb_bin="$cache/vulndb-tools-$VULNDB_VERSION"
  if [[ ! -x "$indexdb_bin/indexdb" ]]; then
    mkdir -p "$indexdb_bin"
    GOBIN="$indexdb_bin" go install "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION"
  fi
  module_dir="$(go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$module_dir/data/osv" ]] || { echo "govulncheck: no data/osv in $module_dir" >&2; exit 1; }
  rm -rf "$db.tmp"
  "$indexdb_bin/indexdb" -vulns "$module_dir/data/osv" -out "$db.tmp"
  rm -rf "$db"
  mv "$db.tmp" "$db"
fi

if [[ $# -eq 0 ]]; then
  set -- ./...
fi
echo "govulncheck $VULN_VERSION, database golang.org/x/vulndb $VULNDB_VERSION, $(go env GOVERSION)" >&2
exec "$tools/govulncheck" -db "file://$db" "$@"
