#!/usr/bin/env bash
# hack/test-guest.sh - build (once) a tiny Linux guest that prints a NoCloud seed.
#
# Prints the directory holding vmlinuz and initrd.img. Boot it with
#   qemu-system-x86_64 -machine pc,accel=tcg -m 256 -nographic -no-reboot \
#     -net none -kernel DIR/vmlinuz -initrd DIR/initrd.img -append 'console=ttyS0 panic=-1' -cdrom seed.iso
# and the serial console shows, between BANLIEUE-SEED-BEGIN and BANLIEUE-SEED-END:
#   BANLIEUE-MOUNT <the /proc/mounts line of the cdrom>
#   BANLIEUE-DMESG <kernel isofs messages, e.g. the Joliet level>
#   BANLIEUE-NAME <each name in the cdrom root, as the kernel presents it>
#   BANLIEUE-FILE <name> <size>, then the content in base64, then BANLIEUE-FILE-END
# or BANLIEUE-SEED-ERROR <reason>; then the guest powers off.
#
# Everything comes from Debian 12 packages fetched with apt-get download (run
# apt-get update first on a fresh machine): the cloud kernel, whose ata_piix,
# sr_mod and isofs modules (Joliet is built into isofs) read qemu's default
# IDE cdrom, and busybox-static. Nothing is installed on the host. The result
# is cached under ${BANLIEUE_CACHE:-~/.cache/banlieue}/test-guest/, keyed by
# the kernel package and this script, so later runs print the path at once.
set -euo pipefail

cache=${BANLIEUE_CACHE:-$HOME/.cache/banlieue}/test-guest
kernel_pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
if [[ -z $kernel_pkg ]]; then
	echo "test-guest: cannot resolve linux-image-cloud-amd64; run apt-get update" >&2
	exit 1
fi
key=$kernel_pkg-$(sha256sum "$0" | cut -c1-12)
out=$cache/$key
if [[ -s $out/vmlinuz && -s $out/initrd.img ]]; then
	echo "$out"
	exit 0
fi

mkdir -p "$cache"
work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
(
	cd "$work"
	# apt-get download drops privileges to _apt, which may not write here.
	chmod 0777 .
	apt-get download -q "$kernel_pkg" busybox-static >&2
)
mkdir "$work/root"
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
kver=$(ls "$work/root/lib/modules")
busybox=$work/root/bin/busybox
"$busybox" depmod -b "$work/root" "$kver"

initrd=$work/initrd
mkdir -p "$initrd"/{bin,dev,proc,sys,mnt,lib/modules/"$kver"}
cp "$busybox" "$initrd/bin/busybox"
ln -s busybox "$initrd/bin/sh"
modules="ata_piix sr_mod isofs"
moddir=$work/root/lib/modules/$kver
for m in $modules; do
	grep -E "/$m\.ko[^:]*:" "$moddir/modules.dep" | tr -d ':' | tr ' ' '\n'
done | sort -u | while read -r ko; do
	[[ -n $ko ]] || continue
	mkdir -p "$initrd/lib/modules/$kver/$(dirname "$ko")"
	cp "$moddir/$ko" "$initrd/lib/modules/$kver/$ko"
done
cp "$moddir/modules.dep" "$initrd/lib/modules/$kver/"

cat >"$initrd/init" <<EOF_INIT
#!/bin/sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
exec >/dev/ttyS0 2>&1
for m in $modules; do modprobe \$m || echo "BANLIEUE-SEED-ERROR modprobe \$m"; done
n=0
while [ ! -b /dev/sr0 ] && [ \$n -lt 100 ]; do sleep 0.1; n=\$((n + 1)); done
echo BANLIEUE-SEED-BEGIN
if ! mount -t iso9660 -o ro /dev/sr0 /mnt; then
	echo "BANLIEUE-SEED-ERROR cannot mount /dev/sr0"
else
	grep ' /mnt ' /proc/mounts | sed 's/^/BANLIEUE-MOUNT /'
	dmesg | grep -i -E 'iso ?9660|joliet' | sed 's/^/BANLIEUE-DMESG /'
	for f in /mnt/* /mnt/.[!.]*; do
		[ -e "\$f" ] || continue
		name=\${f#/mnt/}
		echo "BANLIEUE-NAME \$name"
		[ -f "\$f" ] || continue
		echo "BANLIEUE-FILE \$name \$(wc -c <"\$f")"
		base64 "\$f"
		echo BANLIEUE-FILE-END
	done
fi
echo BANLIEUE-SEED-END
sync
poweroff -f
EOF_INIT
chmod 0755 "$initrd/init"
(cd "$initrd" && find . | sort | "$busybox" cpio -o -H newc 2>/dev/null | gzip -9n) >"$work/initrd.img"

mkdir -p "$work/out"
cp "$work/root/boot/vmlinuz-$kver" "$work/out/vmlinuz"
mv "$work/initrd.img" "$work/out/initrd.img"
chmod 0644 "$work/out/vmlinuz" "$work/out/initrd.img"
rm -rf "$out"
mv "$work/out" "$out"
echo "$out"
