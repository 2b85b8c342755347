#!/usr/bin/env bash
# banlieue's container image without a container engine: the static binary (make build,
# CGO_ENABLED=0) and Debian's CA roots packed by hack/image (go-containerregistry) into an image
# tarball, the same image the Dockerfile describes (/banlieue as entrypoint, user 65532:65532,
# roots at /etc/ssl/certs/ca-certificates.crt). Prints the image reference (last line).
#
#   hack/image.sh           writes bin/banlieue-image.tar
#   hack/image.sh import    also imports it into the real node's containerd (hack/node.sh up)
#
# Env: IMAGE (default registry.example/banlieue:<make's VERSION>, the chart's repository),
#      CA_BUNDLE (default /etc/ssl/certs/ca-certificates.crt, from Debian's ca-certificates).
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH:/usr/sbin:/sbin

# The Makefile's VERSION, computed the same way, so the image's label and `banlieue version` agree.
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
image="${IMAGE:-registry.example/banlieue:$version}"
ca_bundle="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
out=bin/banlieue-image.tar

[[ -s "$ca_bundle" ]] || { echo "image: no CA roots at $ca_bundle (apt-get install ca-certificates)" >&2; exit 1; }
make --no-print-directory build VERSION="$version" >/dev/null
# --path and --user are left at hack/image's defaults: the Dockerfile's (its test checks them).
go run ./hack/image --binary bin/banlieue \
  --ca-bundle "$ca_bundle" --version "$version" --tag "$image" --out "$out"
echo "image: wrote $out ($(du -h "$out" | cut -f1))" >&2

case "${1:-}" in
  "") ;;
  import) hack/node.sh import "$out" >&2 ;;
  *) echo "usage: hack/image.sh [import]" >&2; exit 2 ;;
esac
echo "$image"
