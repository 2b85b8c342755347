#!/usr/bin/env bash
# hack/test-guest-image.sh - build (once) a tiny guest that boots from its own disk, BIOS or UEFI.
#
# Prints the directory holding guest.raw: a 64 MiB raw disk with an MBR and one FAT partition
# (type 0xEF, active) that boots both ways:
#   BIOS  syslinux's mbr.bin -> ldlinux.sys (syslinux, installed with mtools) -> /vmlinuz + /initrd.img
#   UEFI  \EFI\BOOT\BOOTX64.EFI, a unified kernel image (systemd-boot's stub + kernel + initrd +
#         command line), found by the firmware's removable-media fallback path (Secure Boot off)
# guest-efi.iso is the same guest as a UEFI-bootable CD (El Torito, no BIOS boot record), for the
# installMedia shape; the same directory holds vmlinuz and initrd.img for direct kernel boot.
#
# The initramfs /init (busybox) loads ahci/virtio_scsi/sr_mod/isofs (install media is SATA, the seed virtio-scsi), the virtio
# drivers, tpm_crb/tpm_tis, mounts the NoCloud seed (the cdrom holding meta-data) and writes a
# report, then repeats it on the serial console (ttyS0) every 2 s forever, so a reader that
# attaches late still gets a whole copy:
#   BANLIEUE-GUEST-BEGIN
#   BANLIEUE-FIRMWARE efi|bios
#   BANLIEUE-TPM <tpm0 major version, e.g. 2>|none
#   BANLIEUE-SEED <device>|none
#   BANLIEUE-FILE <name> <size>, then the content in base64, then BANLIEUE-FILE-END
#     (for meta-data and user-data, when present)
#   BANLIEUE-AGENT <port device>|absent
#   BANLIEUE-ACPI acpid|ignored
#   BANLIEUE-GUEST-END
# Before the first report it prints BANLIEUE-BOOT once per boot, so a reader counts boots
# (a restart). busybox acpid answers the ACPI power button with `poweroff -f` (the guest shuts
# down the way a graceful shutdown asks, banlieue's powerOffMode Soft and TrySoft), unless the
# seed's user-data holds the word banlieue-ignore-acpi: then no acpid runs and the button does
# nothing, a guest for TrySoft's timeout. After the first report a busybox shell (prompt
# `guest# `) reads the serial console, so a console session can run a command in the guest.
# It writes `installed` to /run/banlieue/phase (banlieue's guest-side contract, ADR-0043) and
# runs Debian's qemu-ga on the virtio-serial port org.qemu.guest_agent.0 (the binary plus the
# shared libraries ldd names, copied from this Debian host).
#
# Everything comes from Debian 12 packages fetched with apt-get download (run apt-get update
# first on a fresh machine); nothing is installed on the host and nothing is loop-mounted. The
# result is cached under ${BANLIEUE_CACHE:-~/.cache/banlieue}/test-guest-image/, keyed by the
# kernel package and this script, so later runs print the path at once.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

cache=${BANLIEUE_CACHE:-$HOME/.cache/banlieue}/test-guest-image
kernel_pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
if [[ -z $kernel_pkg ]]; then
	echo "test-guest-image: cannot resolve linux-image-amd64; run apt-get update" >&2
	exit 1
fi
key=$kernel_pkg-$(sha256sum "$0" | cut -c1-12)
out=$cache/$key
if [[ -s $out/guest.raw && -s $out/guest-efi.iso && -s $out/vmlinuz && -s $out/initrd.img ]]; then
	echo "$out"
	exit 0
fi
for tool in dpkg-deb objcopy ldd gzip; do
	command -v "$tool" >/dev/null || { echo "test-guest-image: $tool is missing" >&2; exit 1; }
done

mkdir -p "$cache"
work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
debs=$cache/debs
mkdir -p "$debs"
chmod 0777 "$debs" # apt-get download drops privileges to _apt
pkgs="$kernel_pkg busybox-static systemd-boot-efi syslinux syslinux-common mtools dosfstools qemu-guest-agent
      xorriso libisoburn1 libburn4 libisofs6 libjte2"
need=""
for p in $pkgs; do
	ls "$debs/${p}"_*.deb >/dev/null 2>&1 || need="$need $p"
done
if [[ -n $need ]]; then
	# shellcheck disable=SC2086 # one word per package
	(cd "$debs" && apt-get download -q $need >&2)
fi
root=$work/root
mkdir "$root"
for p in $pkgs; do
	for deb in "$debs/${p}"_*.deb; do dpkg-deb -x "$deb" "$root"; done
done
kver=$(ls "$root/lib/modules")
busybox=$root/bin/busybox
"$busybox" depmod -b "$root" "$kver"
# The host tools run from the extracted packages (they need only libc).
tools=$root/usr/bin:$root/sbin:$root/usr/sbin
PATH=$tools:$PATH

# --- initramfs ---
initrd=$work/initrd
mkdir -p "$initrd"/{bin,dev,proc,sys,run,mnt,tmp,lib/modules/"$kver"}
cp "$busybox" "$initrd/bin/busybox"
ln -s busybox "$initrd/bin/sh"
modules="ahci virtio_scsi sr_mod sd_mod isofs virtio_pci virtio_blk virtio_console virtio_net tpm_crb tpm_tis button evdev"
moddir=$root/lib/modules/$kver
for m in $modules; do
	line=$(grep -E "/$m\.ko[^:/]*:" "$moddir/modules.dep" || true)
	# A driver built into the kernel has no line; modprobe then succeeds without a file.
	echo "$line" | tr -d ':' | tr ' ' '\n'
done | sort -u | while read -r ko; do
	[[ -n $ko ]] || continue
	mkdir -p "$initrd/lib/modules/$kver/$(dirname "$ko")"
	cp "$moddir/$ko" "$initrd/lib/modules/$kver/$ko"
done
cp "$moddir"/modules.{dep,alias,builtin,order} "$initrd/lib/modules/$kver/" 2>/dev/null || true

# qemu-ga and the libraries it links, taken from this (Debian) host.
ga=$root/usr/sbin/qemu-ga
cp "$ga" "$initrd/bin/qemu-ga"
ldd "$ga" | awk '/=>/ {print $3} /^\s*\/lib/ {print $1}' | while read -r lib; do
	[[ -f $lib ]] || { echo "test-guest-image: qemu-ga needs $lib, which this host lacks" >&2; exit 1; }
	mkdir -p "$initrd$(dirname "$lib")"
	cp -L "$lib" "$initrd$lib"
done
# The dynamic loader, at the path the binary names.
interp=$(ldd "$ga" | awk '/ld-linux/ {print $1}')
mkdir -p "$initrd$(dirname "$interp")"
cp -L "$interp" "$initrd$interp"

# busybox acpid's default map and action table send the power button (KEY_POWER on the ACPI
# button's input device) to /etc/acpi/PWRF/00000080.
mkdir -p "$initrd/etc/acpi/PWRF"
printf 'PWRF PWRF/00000080\n' >"$initrd/etc/acpid.conf"
printf '#!/bin/sh\necho BANLIEUE-ACPI-POWEROFF >/dev/ttyS0\nexec poweroff -f\n' >"$initrd/etc/acpi/PWRF/00000080"
chmod 0755 "$initrd/etc/acpi/PWRF/00000080"

cat >"$initrd/init" <<EOF_INIT
#!/bin/sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs run /run
exec >/dev/ttyS0 2>&1 </dev/null
echo 1 >/proc/sys/kernel/printk
echo BANLIEUE-BOOT
for m in $modules; do modprobe \$m 2>/dev/null; done
r=/run/banlieue/report
mkdir -p /run/banlieue
n=0
# The seed is the cdrom whose root holds meta-data; wait up to 15 s for the cdroms.
seed=none
while [ \$n -lt 150 ]; do
	for d in /dev/sr*; do
		[ -b "\$d" ] || continue
		mkdir -p /mnt/\${d#/dev/}
		grep -q " /mnt/\${d#/dev/} " /proc/mounts || mount -t iso9660 -o ro "\$d" /mnt/\${d#/dev/} 2>/dev/null || continue
		[ -f /mnt/\${d#/dev/}/meta-data ] && seed=\$d && break 2
		# Any other cdrom (an installer) is released: a mounted cdrom locks its tray, and the
		# host must be able to eject the install media once the system is installed.
		umount /mnt/\${d#/dev/} 2>/dev/null || true
	done
	sleep 0.1
	n=\$((n + 1))
done
{
	echo BANLIEUE-GUEST-BEGIN
	if [ -d /sys/firmware/efi ]; then echo BANLIEUE-FIRMWARE efi; else echo BANLIEUE-FIRMWARE bios; fi
	if [ -e /sys/class/tpm/tpm0 ] || [ -e /dev/tpm0 ]; then
		echo "BANLIEUE-TPM \$(cat /sys/class/tpm/tpm0/tpm_version_major 2>/dev/null || echo unknown)"
	else
		echo BANLIEUE-TPM none
	fi
	echo "BANLIEUE-SEED \$seed"
	if [ "\$seed" != none ]; then
		for name in meta-data user-data; do
			f=/mnt/\${seed#/dev/}/\$name
			[ -f "\$f" ] || continue
			echo "BANLIEUE-FILE \$name \$(wc -c <"\$f")"
			base64 "\$f"
			echo BANLIEUE-FILE-END
		done
	fi
} >\$r.tmp
echo installed >/run/banlieue/phase
acpi=acpid
if [ "\$seed" != none ] && grep -q banlieue-ignore-acpi /mnt/\${seed#/dev/}/user-data 2>/dev/null; then
	acpi=ignored
else
	# The button's input device appears once the button driver bound: wait up to 5 s for it.
	n=0
	while ! grep -qs "Power Button" /sys/class/input/*/name && [ \$n -lt 50 ]; do sleep 0.1; n=\$((n + 1)); done
	acpid -f -c /etc/acpi -a /etc/acpid.conf -l /run/acpid.log -p /run/acpid.pid &
fi
port=absent
for p in /sys/class/virtio-ports/*; do
	[ "\$(cat \$p/name 2>/dev/null)" = org.qemu.guest_agent.0 ] && port=/dev/\${p##*/}
done
n=0
while [ "\$port" != absent ] && [ ! -c "\$port" ] && [ \$n -lt 50 ]; do sleep 0.1; n=\$((n + 1)); done
if [ "\$port" != absent ]; then
	mkdir -p /var/run /usr/local/var/run
	/bin/qemu-ga -m virtio-serial -p "\$port" -t /run -d || port="failed:\$port"
fi
{ cat \$r.tmp; echo "BANLIEUE-AGENT \$port"; echo "BANLIEUE-ACPI \$acpi"; echo BANLIEUE-GUEST-END; } >\$r
cat \$r
# A shell reads the serial console, so a console session can run a command and read its output
# (banlieue console, ADR-0140). Started after the first report, so its banner and prompt fall
# between two reports, never inside one; the report goes on beside it.
PS1='guest# ' sh -i </dev/ttyS0 >/dev/ttyS0 2>&1 &
while true; do
	sleep 2
	cat \$r
done
EOF_INIT
chmod 0755 "$initrd/init"
(cd "$initrd" && find . | sort | "$busybox" cpio -o -H newc 2>/dev/null | gzip -9n) >"$work/initrd.img"
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
# no_timer_check: under software emulation on a loaded host the kernel's check of the IO-APIC
# timer can miss its ticks and panic ("IO-APIC + timer doesn't work!"), as cloud images avoid.
cmdline="console=ttyS0 quiet loglevel=3 panic=0 no_timer_check"

# --- unified kernel image for UEFI (systemd 252's stub: sections at fixed VMAs past the stub) ---
stub=$root/usr/lib/systemd/boot/efi/linuxx64.efi.stub
printf '%s' "$cmdline" >"$work/cmdline"
printf 'NAME="banlieue test guest"\nID=banlieue-test\n' >"$work/os-release"
objcopy \
	--add-section .osrel="$work/os-release" --change-section-vma .osrel=0x20000 \
	--add-section .cmdline="$work/cmdline" --change-section-vma .cmdline=0x30000 \
	--add-section .linux="$work/vmlinuz" --change-section-vma .linux=0x2000000 \
	--add-section .initrd="$work/initrd.img" --change-section-vma .initrd=0x3000000 \
	"$stub" "$work/BOOTX64.EFI"

# --- the FAT partition: syslinux for BIOS, the UKI for UEFI ---
part_mib=62
part=$work/part.img
mkfs.fat -n BANLIEUE -C "$part" $((part_mib * 1024)) >/dev/null
cat >"$work/syslinux.cfg" <<EOF
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  LINUX /vmlinuz
  APPEND initrd=/initrd.img $cmdline
EOF
export MTOOLS_SKIP_CHECK=1
mcopy -i "$part" "$work/vmlinuz" "$work/initrd.img" "$work/syslinux.cfg" ::/
mmd -i "$part" ::/EFI ::/EFI/BOOT
mcopy -i "$part" "$work/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI
syslinux --install "$part"

# --- the disk: syslinux's MBR code, one active partition of type 0xEF at 1 MiB ---
disk=$work/guest.raw
truncate -s $(((part_mib + 2) * 1024 * 1024)) "$disk"
dd if="$root/usr/lib/syslinux/mbr/mbr.bin" of="$disk" conv=notrunc status=none
# The format is the point: it turns the four \xNN escapes into the bytes.
# shellcheck disable=SC2059
le32() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))\\x$(printf %02x $(($1 >> 16 & 255)))\\x$(printf %02x $(($1 >> 24 & 255)))"; }
{
	printf '\x80\xfe\xff\xff\xef\xfe\xff\xff' # active; CHS unused (LBA only); type EF; CHS unused
	le32 2048
	le32 $((part_mib * 2048))
} | dd of="$disk" bs=1 seek=446 conv=notrunc status=none
printf '\x55\xaa' | dd of="$disk" bs=1 seek=510 conv=notrunc status=none
dd if="$part" of="$disk" bs=1M seek=1 conv=notrunc,sparse status=none

# --- an installer-style ISO for UEFI (El Torito no-emulation image = a small FAT holding the UKI),
# for installMode deferred/manual, where banlieue attaches the image as a SATA CD-ROM ---
efiboot=$work/iso/efiboot.img
mkdir -p "$work/iso"
mkfs.fat -n EFIBOOT -C "$efiboot" $(($(stat -c %s "$work/BOOTX64.EFI") / 1024 + 2048)) >/dev/null
mmd -i "$efiboot" ::/EFI ::/EFI/BOOT
mcopy -i "$efiboot" "$work/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI
LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu xorriso -as mkisofs -quiet -V BANLIEUE_INSTALL -J -e efiboot.img -no-emul-boot -o "$work/guest-efi.iso" "$work/iso" >&2

mkdir -p "$work/out"
mv "$disk" "$work/guest-efi.iso" "$work/vmlinuz" "$work/initrd.img" "$work/out/"
chmod 0644 "$work/out"/*
rm -rf "$out"
mv "$work/out" "$out"
echo "$out"
