#!/usr/bin/env bash
# Writes pkg/libvirt/testdata/procedures.tsv: every procedure of libvirt's REMOTE, QEMU and
# KEEPALIVE programs with its number, read from the protocol definitions (remote_protocol.x,
# qemu_protocol.x, virkeepaliveprotocol.x) of one pinned libvirt release. The test
# TestProcedureNumbersMatchLibvirt holds pkg/libvirt's procedure constants to that table; run
# this only to move the pin. The source tarball is Debian's copy of the release, checked by
# SHA-256, cached in ${BANLIEUE_CACHE:-~/.cache/banlieue}; nothing of it is committed but the
# table of names and numbers.
#
# Usage: hack/libvirt-procedures.sh
set -euo pipefail
cd "$(dirname "$0")/.."

LIBVIRT_VERSION=9.0.0
TARBALL_SHA256=deca5cff1b7baac297bca9663907c61f71a47183371dc7ac019c107806d5435a
url="http://deb.debian.org/debian/pool/main/libv/libvirt/libvirt_${LIBVIRT_VERSION}.orig.tar.xz"
cache="${BANLIEUE_CACHE:-$HOME/.cache/banlieue}/libvirt-src"
tarball="$cache/libvirt_${LIBVIRT_VERSION}.orig.tar.xz"

mkdir -p "$cache"
if ! echo "$TARBALL_SHA256  $tarball" | sha256sum -c --quiet >/dev/null 2>&1; then
  curl -sSfL -o "$tarball.part" "$url"
  echo "$TARBALL_SHA256  $tarball.part" | sha256sum -c --quiet
  mv "$tarball.part" "$tarball"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -xJf "$tarball" -C "$work" --strip-components=1 \
  "libvirt-$LIBVIRT_VERSION/src/remote/remote_protocol.x" "libvirt-$LIBVIRT_VERSION/src/remote/qemu_protocol.x" \
  "libvirt-$LIBVIRT_VERSION/src/rpc/virkeepaliveprotocol.x"

out=pkg/libvirt/testdata/procedures.tsv
{
  echo "# program	procedure	number — from libvirt $LIBVIRT_VERSION ($url, sha256 $TARBALL_SHA256), by hack/libvirt-procedures.sh"
  for f in remote/remote_protocol.x remote/qemu_protocol.x rpc/virkeepaliveprotocol.x; do
    # Enum members such as "    REMOTE_PROC_CONNECT_OPEN = 1," (the last has no comma).
    sed -nE 's/^[[:space:]]*(REMOTE|QEMU|KEEPALIVE)_PROC_([A-Z0-9_]+)[[:space:]]*=[[:space:]]*([0-9]+),?[[:space:]]*$/\1\t\2\t\3/p' "$work/src/$f"
  done
} >"$out"
echo "wrote $out: $(grep -vc '^#' "$out") procedures of libvirt $LIBVIRT_VERSION"
