#!/usr/bin/env bash
# hack/cloud-guest.sh - build (once) a real cloud guest: Debian 12 (bookworm) with cloud-init,
# qemu-guest-agent and systemd, booting with UEFI (ADR-0122).
#
# Prints the directory holding cloud.raw (last line): a raw GPT disk with
#   partition 1  ESP (FAT)   \EFI\BOOT\BOOTX64.EFI, a unified kernel image (systemd-boot's stub +
#                            Debian's kernel + its initramfs + the command line), found by
#                            the firmware's removable-media fallback path (Secure Boot off)
#   partition 2  root (ext4) the debootstrapped system, mounted by its PARTUUID
# It boots only with UEFI (OVMF, which libvirt picks for banlieue's firmware: efi domains).
#
# The guest as banlieue expects it (docs/guides/libvirt-provider.md):
#   - cloud-init reads only NoCloud (the seed cdrom banlieue attaches) and renders the network
#     for systemd-networkd;
#   - qemu-guest-agent runs on the virtio-serial port org.qemu.guest_agent.0;
#   - systemd-logind (with dbus) shuts the guest down on the ACPI power button and on the agent's
#     guest-shutdown (ADR-0152);
#   - banlieue-phase.service writes `installed` to /run/banlieue/phase on every boot once
#     cloud-init's final stage is over (ADR-0043), so GuestReady=True means user-data has run;
#   - a getty on ttyS0, the kernel and systemd log there too.
#
# Everything comes from Debian packages: debootstrap (variant minbase, no recommends) from this
# machine's configured Debian mirror into a directory, then the disk without loop mounts: each
# filesystem is made in a file (mkfs.ext4 -d, mkfs.vfat + mcopy) and written at its partition's
# offset of the sfdisk-partitioned image (dd conv=notrunc). Runs as root (debootstrap chroots).
# Cached under ${BANLIEUE_CACHE:-~/.cache/banlieue}/cloud-guest/, keyed by this script and the
# candidate versions of the main packages, so later runs print the path at once.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LC_ALL=C.UTF-8

cache=${BANLIEUE_CACHE:-$HOME/.cache/banlieue}/cloud-guest
suite=bookworm
# No ifupdown: cloud-init renders the network for systemd-networkd.
# The kernel is Debian's cloud one, as in Debian's genericcloud images: it has no AHCI driver, so
# the guest proves banlieue's seed reaches such images on virtio-scsi (ADR-0122).
# dbus: systemd-logind runs only where a D-Bus daemon is (its unit's ConditionPathExists), and
# without logind nothing acts on the ACPI power button, and `shutdown` (which qemu-guest-agent's
# guest-shutdown runs) fails to reach logind: the guest would ignore every soft power-off.
packages=(linux-image-cloud-amd64 systemd systemd-sysv udev dbus cloud-init qemu-guest-agent
  initramfs-tools systemd-boot-efi e2fsprogs iproute2 netbase
  python3-cffi-backend) # provides python3-cryptography's virtual dependencies, which debootstrap cannot resolve

versions=""
for p in linux-image-cloud-amd64 cloud-init qemu-guest-agent systemd; do
	v=$(apt-cache show --no-all-versions "$p" 2>/dev/null | awk '/^Version:/ {print $2; exit}')
	if [[ -z $v ]]; then
		echo "cloud-guest: apt knows no $p; run apt-get update" >&2
		exit 1
	fi
	versions="$versions$p=$v "
done
key=$(printf '%s' "$versions" | sha256sum | cut -c1-8)-$(sha256sum "$0" | cut -c1-12)
out=$cache/$key
if [[ -s $out/cloud.raw ]]; then
	echo "$out"
	exit 0
fi
for tool in debootstrap sfdisk mkfs.ext4 mkfs.vfat mcopy mmd objcopy; do
	command -v "$tool" >/dev/null || { echo "cloud-guest: $tool is missing (hack/install-test-deps.sh)" >&2; exit 1; }
done
if [[ $(id -u) != 0 ]]; then
	echo "cloud-guest: debootstrap needs root" >&2
	exit 1
fi

# The mirror this machine's apt uses for the suite (deb822 or one-line sources).
mirror=$(
	{ cat /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } | awk -v s="$suite" '
		/^URIs:/ {u=$2} /^Suites:/ {for (i = 2; i <= NF; i++) if ($i == s) m=u} /^$/ {u=""}
		END {print m}'
)
if [[ -z $mirror ]]; then
	mirror=$(grep -hE "^deb +(\[[^]]*\] +)?[a-z]+://[^ ]+ +$suite +" /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		sed -E 's/^deb +(\[[^]]*\] +)?//' | awk '{print $1; exit}' || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}

mkdir -p "$cache"
work=$(mktemp -d "$cache/.build.XXXXXX")
root=$work/root
cleanup() {
	# debootstrap mounts proc and sys inside the target while it configures packages.
	for m in proc sys dev/pts dev; do umount "$root/$m" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s)

echo "cloud-guest: debootstrap $suite from $mirror ($versions)" >&2
include=$(IFS=,; echo "${packages[*]}")
# The downloaded packages are kept (--cache-dir), so a rebuild after a change of this script
# fetches nothing it already has.
mkdir -p "$cache/debs"
# The keyring is named, so a machine without it fails instead of installing unverified packages.
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[[ -s $keyring ]] || { echo "cloud-guest: $keyring is missing (debian-archive-keyring)" >&2; exit 1; }
if ! debootstrap --variant=minbase --keyring="$keyring" --include="$include" --components=main --cache-dir="$cache/debs" \
	"$suite" "$root" "$mirror" >&2; then
	tail -40 "$root/debootstrap/debootstrap.log" >&2 || true
	exit 1
fi

chroot_run() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 "$@"; }

# --- the system ---
# Fixed identifiers keep the image reproducible; the root is found by its partition's UUID.
root_partuuid=6b616e6c-6965-4775-a000-000000000002
printf 'PARTUUID=%s / ext4 defaults,errors=remount-ro 0 1\n' "$root_partuuid" >"$root/etc/fstab"
echo localhost >"$root/etc/hostname" # cloud-init sets the real one from meta-data
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
: >"$root/etc/machine-id" # a fresh one on first boot, per VM
rm -f "$root/var/lib/dbus/machine-id"
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
EOF

cat >"$root/etc/cloud/cloud.cfg.d/90-banlieue.cfg" <<'EOF'
# banlieue's seed is a NoCloud cdrom (label cidata); nothing else is probed.
datasource_list: [ NoCloud, None ]
system_info:
  network:
    renderers: [ networkd ]
  default_user:
    name: debian
    groups: [ adm ]
    lock_passwd: true
# Only modules this minimal image can run; none waits for the network or a package mirror.
cloud_init_modules:
  - seed_random
  - bootcmd
  - write_files
  - set_hostname
  - update_hostname
  - update_etc_hosts
  - users_groups
cloud_config_modules:
  - timezone
  - runcmd
cloud_final_modules:
  - scripts_per_once
  - scripts_per_boot
  - scripts_per_instance
  - scripts_user
  - final_message
  - power_state_change
EOF

mkdir -p "$root/usr/local/lib/systemd/system"
cat >"$root/usr/local/lib/systemd/system/banlieue-phase.service" <<'EOF'
[Unit]
Description=Announce the installed system to banlieue (/run/banlieue/phase)
After=cloud-final.service
Wants=cloud-final.service

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'mkdir -p /run/banlieue && echo installed >/run/banlieue/phase'
RemainAfterExit=yes

# cloud-final runs after multi-user.target; cloud-init.target (after it too) is what wants it.
[Install]
WantedBy=cloud-init.target
EOF
chroot_run systemctl enable banlieue-phase.service serial-getty@ttyS0.service systemd-networkd.service >&2
# What slows a boot under software emulation and does nothing for a test guest: waiting for a
# network that a NIC-less VM never gets, apt's and e2fsprogs' timers.
chroot_run systemctl mask systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer \
	e2scrub_all.timer e2scrub_reap.service fstrim.timer >&2 || true
# qemu-guest-agent is started by udev when its virtio-serial port appears (its unit's own rule).

kver=$(basename "$(ls -d "$root"/lib/modules/*)")
# The initramfs holds only what finds the root (a small one unpacks fast under emulation):
# the virtio disk drivers and ext4; root=PARTUUID= resolves through udev in initramfs-tools.
# The rest (sr_mod and isofs for the seed CD-ROM, virtio_net) loads from the root by udev.
echo MODULES=list >"$root/etc/initramfs-tools/conf.d/banlieue"
printf 'virtio_pci\nvirtio_blk\nvirtio_scsi\nsd_mod\next4\n' >>"$root/etc/initramfs-tools/modules"
chroot_run update-initramfs -u -k all >&2

# Smaller: no package lists, docs, manuals or caches.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
	"$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/*.log \
	"$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old
for m in proc sys dev/pts dev; do umount "$root/$m" 2>/dev/null || true; done

# --- the unified kernel image (systemd 252's stub: sections at fixed VMAs past the stub) ---
cmdline="root=PARTUUID=$root_partuuid ro console=tty0 console=ttyS0,115200 quiet"
printf '%s' "$cmdline" >"$work/cmdline"
cp "$root/etc/os-release" "$work/os-release"
objcopy \
	--add-section .osrel="$work/os-release" --change-section-vma .osrel=0x20000 \
	--add-section .cmdline="$work/cmdline" --change-section-vma .cmdline=0x30000 \
	--add-section .linux="$root/boot/vmlinuz-$kver" --change-section-vma .linux=0x2000000 \
	--add-section .initrd="$root/boot/initrd.img-$kver" --change-section-vma .initrd=0x3000000 \
	"$root/usr/lib/systemd/boot/efi/linuxx64.efi.stub" "$work/BOOTX64.EFI"

# --- the filesystems, each in a file ---
export MTOOLS_SKIP_CHECK=1
esp_mib=64
mkfs.vfat -n ESP -C "$work/esp.img" $((esp_mib * 1024)) >/dev/null
mmd -i "$work/esp.img" ::/EFI ::/EFI/BOOT
mcopy -i "$work/esp.img" "$work/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI
# The root: what the tree holds plus room for cloud-init, logs and the test's files.
used_mib=$(du -sm "$root" | awk '{print $1}')
root_mib=$(((used_mib * 13 / 10 + 256 + 63) / 64 * 64))
mkfs.ext4 -q -F -L root -U 6b616e6c-6965-4775-a000-0000000000e4 -d "$root" "$work/root.img" "${root_mib}M"

# --- the disk: GPT, ESP at 1 MiB, root after it, 1 MiB free at the end for the backup GPT ---
disk=$work/cloud.raw
truncate -s $(((1 + esp_mib + root_mib + 1) * 1024 * 1024)) "$disk"
sfdisk -q --no-reread --no-tell-kernel "$disk" >&2 <<EOF
label: gpt
label-id: 6B616E6C-6965-4775-A000-000000000000
start=1MiB, size=${esp_mib}MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, uuid=6b616e6c-6965-4775-a000-000000000001, name=ESP
start=$((1 + esp_mib))MiB, size=${root_mib}MiB, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, uuid=$root_partuuid, name=root
EOF
dd if="$work/esp.img" of="$disk" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$work/root.img" of="$disk" bs=1M seek=$((1 + esp_mib)) conv=notrunc,sparse status=none

mkdir -p "$work/out"
mv "$disk" "$work/out/"
printf '%s\n' "$versions" >"$work/out/versions"
chmod 0644 "$work/out"/*
rm -rf "$out"
mv "$work/out" "$out"
echo "cloud-guest: built in $(($(date +%s) - start)) s, $(du -m --apparent-size "$out/cloud.raw" | cut -f1) MiB ($(du -m "$out/cloud.raw" | cut -f1) MiB allocated)" >&2
echo "$out"
