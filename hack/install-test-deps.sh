#!/usr/bin/env bash
# Installs the Debian packages the test suite uses as independent readers and guest runners,
# running apt-get only when something is missing.
set -euo pipefail
packages=(genisoimage xorriso p7zip-full util-linux qemu-system-x86 make
  debootstrap fdisk dosfstools mtools e2fsprogs binutils # the second line: hack/cloud-guest.sh
  shellcheck)                                             # make lint (hack/shellcheck.sh)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
