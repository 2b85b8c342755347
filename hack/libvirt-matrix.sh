#!/bin/bash
# hack/libvirt-matrix.sh — libvirtd of other Debian releases next to the lab, each in its own
# debootstrapped root, speaking mutual TLS on 127.0.0.1, to run the provisioning and teardown
# suite against every libvirt banlieue supports (no systemd, no KVM needed).
#
# Usage: hack/libvirt-matrix.sh start|stop|env|status|clean|build RELEASE
#        hack/libvirt-matrix.sh test [RELEASE...]
#        RELEASE is bullseye (libvirt 7.0, TLS port 16521), trixie (11.x, 16522) or bookworm
#        (9.0, 16523; the host's own release, which the lab of hack/libvirt-lab.sh already
#        covers on 16514). Must run as root.
#
#   build   debootstrap (--variant=minbase) the release's root with libvirtd, QEMU, OVMF, swtpm
#           (where the release has it) and dnsmasq, once: it is cached under
#           ${BANLIEUE_CACHE:-~/.cache/banlieue}/libvirt-roots/RELEASE/KEY, KEY a hash of the
#           release, the package list and this script's build steps, so changing either rebuilds.
#   start   build if needed, create the PKI, start that root's virtlogd + libvirtd, check that
#           the daemon reports the release's libvirt version and a qemu domain type for x86_64.
#           A no-op when already running.
#   stop    stop only what start launched (PID files), then any QEMU/swtpm/dnsmasq the daemon
#           left behind (found through the daemon's own PID files), and the bridge and firewall
#           rules of each network it had up (its status files).
#   env     print DIR/env.   status  exit 0 when libvirtd answers on the release's TLS port.
#   clean   stop, then rm -rf DIR (the cached root stays).
#   test    for each RELEASE (default: bullseye trixie): clean, start, run the provisioning and
#           teardown suite (go test -count=1 -p 1 ./internal/provider/libvirt/ -run
#           "$BANLIEUE_MATRIX_RUN", default '^TestMachineAgainstLabHost$'), stop; print each
#           release's libvirt version, go test's result line and the time taken. Exits non-zero
#           when any release fails. The go test output stays in DIR/test.log.
#
# DIR is /var/tmp/banlieue-matrix/RELEASE. It has the lab's contract (hack/libvirt-lab.sh):
#   DIR/env            shell `export` lines: BANLIEUE_LIBVIRT_LAB=DIR,
#                      BANLIEUE_LIBVIRT_ENDPOINT=qemu+tls://127.0.0.1:PORT/system,
#                      BANLIEUE_LIBVIRT_PKI=DIR/pki
#   DIR/pki/           made by `hack/libvirt-lab.sh pki DIR`: cacert.pem, clientcert.pem,
#                      clientkey.pem, untrusted/, other-ca/; the server certificate covers
#                      127.0.0.1 and localhost only
#   DIR/libvirtd.pid, DIR/virtlogd.pid
# State: the daemons run in a private mount namespace whose root (pivot_root) is an overlay of
# the cached root with DIR/upper as its writable layer, so /etc/libvirt, /var/lib/libvirt,
# /var/log/libvirt, /run/libvirt and every socket are the root's own, never the host's or the
# lab's. DIR itself is bind-mounted at the same path inside (storage pools the tests create
# under DIR, and the daemon's logs in DIR/log, have one path on both sides). /dev is the root's
# own too: fresh device nodes and a devpts instance, /dev/kvm hidden (guests run under QEMU
# software emulation) unless BANLIEUE_LAB_KVM=1. `rm -rf DIR` after stop removes every trace.
# Env: BANLIEUE_DEBIAN_MIRROR overrides the mirror read from the host's apt sources.
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"
export PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# The daemons must not inherit the caller's descriptors.
# shellcheck source=lib/daemons.sh
source "$(dirname "$0")/lib/daemons.sh"
close_inherited_fds

cmd=${1:-}
REPO=$(cd "$(dirname "$0")/.." && pwd)
ADDR=127.0.0.1
CACHE=${BANLIEUE_CACHE:-$HOME/.cache/banlieue}/libvirt-roots
BASE=/var/tmp/banlieue-matrix
# What every root gets; OPTIONAL only where the release has the package (bullseye has no swtpm;
# trixie splits libvirt-daemon's drivers into packages of their own, only recommended by it).
PACKAGES="libvirt-daemon libvirt-clients qemu-system-x86 qemu-utils ovmf dnsmasq-base openssl iptables"
OPTIONAL="libvirt-daemon-driver-qemu libvirt-daemon-driver-storage libvirt-daemon-driver-network
          libvirt-daemon-driver-nodedev libvirt-daemon-driver-nwfilter libvirt-daemon-driver-secret
          libvirt-daemon-driver-interface libvirt-daemon-log swtpm swtpm-tools"
# Bump when the build steps change in a way the package list does not show.
BUILD_REVISION=1
HOST_PACKAGES="debootstrap libvirt-clients openssl qemu-utils"

say() { printf '[libvirt-matrix] %s\n' "$*" >&2; }
fail() { say "error: $*"; exit 1; }

# release RELEASE — sets REL, PORT, WANT (the daemon's version prefix), DIR.
release() {
	REL=${1:-}
	case "$REL" in
	bullseye) PORT=16521 WANT=7.0. ;;
	trixie) PORT=16522 WANT=11. ;;
	bookworm) PORT=16523 WANT=9.0. ;;
	*) fail "unknown release '$REL' (bullseye, trixie or bookworm)" ;;
	esac
	DIR=$BASE/$REL
	URI="qemu+tls://$ADDR:$PORT/system?pkipath=$DIR/pki"
}

need_root() { [ "$(id -u)" = 0 ] || fail "must run as root"; }

install_host_packages() {
	local missing="" p
	for p in $HOST_PACKAGES; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	say "installing on the host:$missing"
	mkdir -p "$BASE"
	apt-get update -qq
	# shellcheck disable=SC2086 # one word per package
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >"$BASE/apt.log" 2>&1 ||
		{ tail -20 "$BASE/apt.log" >&2; fail "apt-get install failed"; }
}

# The Debian mirror the host's apt uses (deb822 .sources or one-line sources.list), so the
# roots come from wherever this machine is allowed to fetch packages.
mirror() {
	local m=${BANLIEUE_DEBIAN_MIRROR:-}
	if [ -z "$m" ]; then
		m=$(awk 'tolower($1)=="uris:" {u=$2} tolower($1)=="suites:" && $0 !~ /-security/ && u!="" {print u; exit}
			/^$/ {u=""}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
	fi
	if [ -z "$m" ]; then
		m=$(awk '$1=="deb" && $0 !~ /-security/ {for (i=2; i<=NF; i++) if ($i !~ /^\[/) {print $i; exit}}' \
			/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -1 || true)
	fi
	[ -n "$m" ] || fail "no Debian mirror in /etc/apt/sources.list*; set BANLIEUE_DEBIAN_MIRROR"
	echo "${m%/}"
}

root_key() {
	printf '%s\n' "$REL" "$PACKAGES" "$OPTIONAL" "$BUILD_REVISION" "$(declare -f build_in_chroot)" |
		sha256sum | cut -c1-12
}

# build_in_chroot — runs inside the new root (chroot, private mount namespace): installs the
# packages, creates the users libvirt insists on, and trims the apt caches.
build_in_chroot() {
	set -eu
	export DEBIAN_FRONTEND=noninteractive LC_ALL=C PATH=/usr/sbin:/usr/bin:/sbin:/bin
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d # nothing starts services here
	chmod 755 /usr/sbin/policy-rc.d
	apt-get update -qq
	pkgs="$1"
	for p in $2; do
		if apt-cache show "$p" >/dev/null 2>&1; then pkgs="$pkgs $p"; else echo "not in this release: $p"; fi
	done
	# trixie's QEMU driver depends on "systemd-container | sysvinit-core"; the smaller one is
	# enough for a root that never boots.
	if apt-cache depends libvirt-daemon-driver-qemu 2>/dev/null | grep -q sysvinit-core; then
		pkgs="$pkgs sysvinit-core"
	fi
	echo "installing: $pkgs"
	# shellcheck disable=SC2086 # one word per package
	apt-get install -y -q --no-install-recommends $pkgs
	# The QEMU driver refuses to load unless its compiled-in user exists; swtpm runs as tss.
	getent group libvirt-qemu >/dev/null || groupadd --system libvirt-qemu
	getent passwd libvirt-qemu >/dev/null ||
		useradd --system -g libvirt-qemu -d /var/lib/libvirt -M -s /usr/sbin/nologin libvirt-qemu
	if command -v swtpm >/dev/null; then
		getent group tss >/dev/null || groupadd --system tss
		getent passwd tss >/dev/null || useradd --system -g tss -d /var/lib/tpm -M -s /bin/false tss
	fi
	apt-get clean
	rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
	dpkg-query -W -f='${Package} ${Version}\n' >/banlieue-packages
}

# build — sets ROOTFS to the release's cached root, building it when there is none.
build() {
	local key dir tmp t0 m
	key=$(root_key)
	dir=$CACHE/$REL
	ROOTFS=$dir/$key
	[ -s "$ROOTFS/banlieue-packages" ] && return 0
	mkdir -p "$dir"
	exec 9>"$dir/.lock"
	flock 9
	if [ -s "$ROOTFS/banlieue-packages" ]; then exec 9>&-; return 0; fi
	t0=$(date +%s)
	m=$(mirror)
	say "building the $REL root in $ROOTFS (debootstrap from $m; a few minutes, once)"
	tmp=$(mktemp -d "$dir/.build.XXXXXX")
	if ! debootstrap --variant=minbase "$REL" "$tmp/root" "$m" >"$tmp/debootstrap.log" 2>&1; then
		tail -20 "$tmp/debootstrap.log" >&2
		rm -rf "$tmp"
		fail "debootstrap $REL failed"
	fi
	{
		declare -f build_in_chroot
		printf 'build_in_chroot %q %q\n' "$PACKAGES" "$OPTIONAL"
	} >"$tmp/root/banlieue-build.sh"
	# shellcheck disable=SC2016 # expanded by the inner shell
	if ! unshare --mount --propagation private /bin/sh -c '
		set -e; r=$1
		mount -t proc proc "$r/proc"; mount -t sysfs sysfs "$r/sys"; mount --rbind /dev "$r/dev"
		exec chroot "$r" /bin/bash /banlieue-build.sh' sh "$tmp/root" >"$tmp/apt.log" 2>&1; then
		tail -30 "$tmp/apt.log" >&2
		rm -rf "$tmp"
		fail "installing libvirt into the $REL root failed"
	fi
	rm -f "$tmp/root/banlieue-build.sh"
	mv "$tmp/apt.log" "$tmp/debootstrap.log" "$tmp/root/"
	mv "$tmp/root" "$ROOTFS"
	rmdir "$tmp"
	# Roots of other keys are stale: nothing uses them once this one exists.
	find "$dir" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
	exec 9>&-
	say "built the $REL root in $(($(date +%s) - t0))s ($(du -sh "$ROOTFS" | cut -f1))"
}

write_config() {
	mkdir -p "$DIR/upper" "$DIR/work" "$DIR/root"
	# The lab's own daemon configuration, on this release's port.
	BANLIEUE_LIBVIRT_PORT=$PORT "$REPO/hack/libvirt-lab.sh" daemon-config "$DIR"
	# QEMU runs as root, as in the lab (see hack/libvirt-lab.sh).
	printf 'user = "root"\ngroup = "root"\n' >"$DIR/conf/qemu.conf"
	cat >"$DIR/env" <<-EOF
		export BANLIEUE_LIBVIRT_LAB=$DIR
		export BANLIEUE_LIBVIRT_ENDPOINT=qemu+tls://$ADDR:$PORT/system
		export BANLIEUE_LIBVIRT_PKI=$DIR/pki
	EOF
}

# node NAME MODE — a command making the host's character device /dev/NAME (when it has one) as
# a new node of the same numbers in the root's /dev.
node() {
	local major minor
	[ -c "/dev/$1" ] || return 0
	read -r major minor < <(stat -c '%t %T' "/dev/$1")
	echo "mkdir -p $(dirname "$DIR/root/dev/$1") && mknod -m $2 $DIR/root/dev/$1 c $((16#$major)) $((16#$minor))"
}

# namespace_script — DIR/conf/namespace.sh: mounts the root (overlay of ROOTFS, writes into
# DIR/upper) with /proc, /sys, a /dev without kvm and DIR itself, makes it the namespace's root
# and runs its arguments there.
namespace_script() {
	local r=$DIR/root m
	{
		echo 'set -e'
		echo "mount -t overlay banlieue-matrix -o lowerdir=$ROOTFS,upperdir=$DIR/upper,workdir=$DIR/work $r"
		echo "mount --rbind /proc $r/proc"
		echo "mount --rbind /sys $r/sys"
		echo "mount -t tmpfs -o mode=755 matrix-dev $r/dev"
		# Device nodes are made afresh on the root's /dev (a tmpfs), never bind mounts of the
		# host's: libvirt moves every mount under /dev into each QEMU's private /dev, and a
		# bind-mounted ptmx opened there finds no "pts" beside it ("Failed to create PTY: No such
		# file or directory"). PTYs come from a devpts instance of the root's own.
		for m in null:666 zero:666 full:666 random:666 urandom:666 tty:666 ptmx:666 net/tun:600; do
			node "${m%%:*}" "${m#*:}"
		done
		if [ "${BANLIEUE_LAB_KVM:-0}" = 1 ]; then node kvm 660; fi
		echo "mkdir -p $r/dev/pts && mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 matrix-pts $r/dev/pts"
		echo "mkdir -p $r/dev/shm && mount -t tmpfs -o mode=1777 matrix-shm $r/dev/shm"
		echo "ln -s /proc/self/fd $r/dev/fd && ln -s /proc/self/fd/0 $r/dev/stdin"
		echo "ln -s /proc/self/fd/1 $r/dev/stdout && ln -s /proc/self/fd/2 $r/dev/stderr"
		echo "mkdir -p $r$DIR && mount --bind $DIR $r$DIR"
		echo "cp $DIR/conf/qemu.conf $r/etc/libvirt/qemu.conf"
		# banlieue pins serial logs at /var/log/libvirt/qemu/<domain>-serial.log.
		echo "mkdir -p $r/var/log/libvirt/qemu $r/var/log/swtpm/libvirt/qemu $r/run/libvirt"
		# pivot_root, not chroot: libvirt builds each QEMU's private /dev from a helper that
		# joins the daemon's mount namespace with setns(), which lands on the namespace's root.
		# Under a mere chroot that root is the host's, and the helper rewrites the host's /dev
		# (it replaced /dev/ptmx here). After pivot_root the namespace holds the root only.
		echo "mkdir -p $r/.oldroot && cd $r && pivot_root . .oldroot && cd / && umount -l /.oldroot && rmdir /.oldroot"
		echo 'exec "$@"'
	} >"$DIR/conf/namespace.sh"
}

# in_root CMD... — run CMD in the release's root: the daemons' mount namespace (entered through
# virtlogd, which outlives libvirtd restarts), created when there is none.
in_root() {
	local envv=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C)
	if running "$DIR/virtlogd.pid"; then
		nsenter --mount="/proc/$(cat "$DIR/virtlogd.pid")/ns/mnt" -- "${envv[@]}" "$@"
	else
		unshare --mount --propagation private /bin/sh "$DIR/conf/namespace.sh" "${envv[@]}" "$@"
	fi
}

answers() { timeout 20 virsh -q -c "$URI" version >/dev/null 2>&1; }

wait_for_file() {
	for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
	fail "$1 never appeared"
}

wait_ready() {
	local deadline=$(($(date +%s) + 60))
	until answers; do
		running "$DIR/libvirtd.pid" || { tail -20 "$DIR/log/libvirtd.log" >&2 || true; fail "$REL libvirtd exited"; }
		[ "$(date +%s)" -lt "$deadline" ] || fail "$REL libvirtd not answering on $ADDR:$PORT after 60s"
		sleep 0.2
	done
}

start_daemons() {
	if ! running "$DIR/virtlogd.pid"; then
		rm -f "$DIR/virtlogd.pid" "$DIR/libvirtd.pid"
		# The writable layer belongs to one lower root; a rebuilt root starts with a fresh one.
		if [ "$(cat "$DIR/rootfs" 2>/dev/null)" != "$ROOTFS" ]; then
			rm -rf "$DIR/upper" "$DIR/work"
			mkdir -p "$DIR/upper" "$DIR/work"
			echo "$ROOTFS" >"$DIR/rootfs"
		fi
		namespace_script
		in_root virtlogd --daemon --config "$DIR/conf/virtlogd.conf" --pid-file "$DIR/virtlogd.pid" \
			>>"$DIR/log/start.log" 2>&1 || { tail -5 "$DIR/log/start.log" >&2; fail "virtlogd did not start (see $DIR/log/start.log)"; }
		wait_for_file "$DIR/virtlogd.pid"
	fi
	if ! running "$DIR/libvirtd.pid"; then
		rm -f "$DIR/libvirtd.pid"
		in_root libvirtd --daemon --listen --config "$DIR/conf/libvirtd.conf" --pid-file "$DIR/libvirtd.pid" \
			>>"$DIR/log/start.log" 2>&1 || { tail -5 "$DIR/log/start.log" >&2; fail "libvirtd did not start (see $DIR/log/start.log)"; }
		wait_for_file "$DIR/libvirtd.pid"
	fi
	wait_ready
}

# daemon_version — the libvirt version the daemon reports, e.g. 7.0.0.
daemon_version() {
	timeout 20 virsh -c "$URI" version --daemon 2>/dev/null | awk -F': *' '/Running against daemon/ {print $2}' |
		awk '{print $NF}'
}

# verify — the daemon is the release's libvirt and offers qemu guests for x86_64.
verify() {
	local v caps
	v=$(daemon_version)
	case "$v" in
	"$WANT"*) ;;
	*) fail "$REL: libvirtd on $ADDR:$PORT reports libvirt '${v:-?}', expected $WANT*" ;;
	esac
	# The first capabilities request probes every QEMU binary; it runs here rather than inside
	# some test's call budget.
	caps=$(timeout 120 virsh -q -c "$URI" capabilities 2>&1) || fail "$REL: virsh capabilities: $caps"
	if ! sed -n "/<arch name='x86_64'>/,/<\/arch>/p" <<<"$caps" | grep -q "<domain type='qemu'"; then
		fail "$REL: capabilities list no qemu domain type for x86_64"
	fi
	echo "$v" >"$DIR/version"
}

# QEMU, swtpm and dnsmasq outlive libvirtd; their PID files are in the root's /run, that is in
# DIR/upper/run. Each is checked by executable so a recycled PID is never hit.
stop_leftovers() {
	local run=$DIR/upper/run/libvirt f pid exe
	[ -d "$run" ] || return 0
	for f in "$run"/qemu/*.pid "$run"/qemu/swtpm/*.pid "$run"/network/*.pid; do
		[ -s "$f" ] || continue
		pid=$(tr -dc 0-9 <"$f")
		if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then continue; fi
		exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
		case "$exe" in
		*/qemu-system-* | */swtpm | */dnsmasq) echo "$pid" >"$DIR/leftover.pid"; stop_pid "$REL ${exe##*/}" "$DIR/leftover.pid" ;;
		esac
	done
	rm -f "$DIR/leftover.pid"
}

do_start() {
	need_root
	mkdir -p "$DIR"
	if running "$DIR/libvirtd.pid" && running "$DIR/virtlogd.pid" && answers; then
		say "$REL already running (libvirtd pid $(cat "$DIR/libvirtd.pid"))"
		return 0
	fi
	install_host_packages
	build
	"$REPO/hack/libvirt-lab.sh" pki "$DIR"
	write_config
	start_daemons
	verify
	say "$REL ready: libvirt $(cat "$DIR/version") on $ADDR:$PORT, libvirtd pid $(cat "$DIR/libvirtd.pid"); source $DIR/env"
}

do_stop() {
	stop_pid "$REL libvirtd" "$DIR/libvirtd.pid"
	stop_pid "$REL virtlogd" "$DIR/virtlogd.pid"
	stop_leftovers
	remove_leftover_networks "$DIR/upper/run/libvirt"
	rm -f "$DIR/libvirtd.pid" "$DIR/virtlogd.pid"
}

do_clean() {
	do_stop
	[ -d "$DIR" ] || return 0
	# Never delete through a mount: the root is only mounted inside the daemons' namespace.
	if awk -v d="$DIR" '$2 == d || index($2, d "/") == 1 {found=1} END {exit !found}' /proc/self/mounts; then
		fail "something is mounted under $DIR in this namespace; not removing it"
	fi
	rm -rf "$DIR"
}

do_test() {
	need_root
	local releases=("$@") rel failed=0 t0 t1 rc line summary=() run
	[ ${#releases[@]} -gt 0 ] || releases=(bullseye trixie)
	run=${BANLIEUE_MATRIX_RUN:-^TestMachineAgainstLabHost$}
	"$REPO/hack/install-test-deps.sh"
	KUBEBUILDER_ASSETS=$("$REPO/hack/envtest-assets.sh" | tail -1)
	export KUBEBUILDER_ASSETS
	for rel in "${releases[@]}"; do
		release "$rel"
		say "=== $REL"
		t0=$(date +%s)
		# A failing clean or stop is that release's failure; the other releases still run.
		if ! bash "$0" clean "$REL"; then
			summary+=("$(printf '%-9s libvirt %-8s %s' "$REL" "?" "FAIL: clean (see the output above)")")
			failed=1
			continue
		fi
		if ! bash "$0" start "$REL"; then
			summary+=("$(printf '%-9s libvirt %-8s %s' "$REL" "?" "FAIL: start (see $DIR/log/)")")
			failed=1
			continue
		fi
		t1=$(date +%s)
		rc=0
		(
			# shellcheck disable=SC1091
			source "$DIR/env"
			cd "$REPO"
			go test -count=1 -p 1 -timeout 20m -v ./internal/provider/libvirt/ -run "$run"
		) >"$DIR/test.log" 2>&1 || rc=$?
		line=$(grep -E '^(ok|FAIL)[[:space:]]' "$DIR/test.log" | tail -1 | tr -s '\t ' ' ' || true)
		[ -n "$line" ] || line="no result line (go test exit $rc)"
		if [ "$rc" != 0 ]; then
			failed=1
			say "$REL: go test failed; failing tests and their errors (full log: $DIR/test.log):"
			# (not the controllers' JSON log lines, which the suite also writes through t.Log)
			grep -E -e '--- FAIL' -e '^[[:space:]]+[a-z_]+_test\.go:[0-9]+:' "$DIR/test.log" | grep -v '{"level"' |
				cut -c1-600 | head -40 >&2 || true
		fi
		bash "$0" stop "$REL" || { failed=1; say "$REL: stop failed"; }
		summary+=("$(printf '%-9s libvirt %-8s %s, %ss (start %ss, tests %ss)' "$REL" "$(cat "$DIR/version")" \
			"$line" $(($(date +%s) - t0)) $((t1 - t0)) $(($(date +%s) - t1)))")
	done
	echo
	echo "libvirt matrix ($run):"
	printf '  %s\n' "${summary[@]}"
	return "$failed"
}

case "$cmd" in
build) need_root; release "${2:-}"; install_host_packages; build; echo "$ROOTFS" ;;
start) release "${2:-}"; do_start ;;
stop) release "${2:-}"; do_stop ;;
clean) release "${2:-}"; do_clean ;;
env) release "${2:-}"; cat "$DIR/env" ;;
status) release "${2:-}"; running "$DIR/libvirtd.pid" && answers ;;
test) shift; do_test "$@" ;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
	exit 2
	;;
esac
