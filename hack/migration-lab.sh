#!/bin/bash
# hack/migration-lab.sh — two libvirt hosts on this machine that trust each other for live
# migration: hosts a and b, each a libvirtd (QEMU driver) and a virtlogd of this machine's
# libvirt with its own state, its own mutual-TLS port on 127.0.0.1, its own TLS identities and
# its own host UUID (libvirt refuses a migration between two ends reporting the same one).
# Guests run under QEMU software emulation (domain type 'qemu').
#
# Usage: hack/migration-lab.sh start|stop|status|env [DIR]
#        hack/migration-lab.sh exec HOST DIR CMD...
#        DIR defaults to /var/tmp/banlieue-migration. Must run as root, after hack/libvirt-lab.sh
#        packages (or start) has installed libvirt's packages once; this script installs nothing.
#
#   start   create DIR/pki and start host a on port BASE (env BANLIEUE_MIGRATION_BASE_PORT,
#           default 17100) and host b on BASE+1. A no-op when both answer.
#   stop    stop every daemon start launched (PID files), then the QEMUs they left (found
#           through the daemons' own PID files). `rm -rf DIR` afterwards removes every trace.
#   status  exit 0 when both hosts answer.
#   env     print DIR/env.
#   exec    run CMD in host HOST's (a or b) mount namespace, where its paths are what its
#           libvirtd sees: e.g. qemu-img on a disk whose backing file names a pool path.
#
# Contract of the tests (pkg/libvirt's migration test):
#   DIR/env        export lines: BANLIEUE_MIGRATION_LAB=DIR, BANLIEUE_MIGRATION_PKI=DIR/pki,
#                  BANLIEUE_MIGRATION_A and _B (qemu+tls://127.0.0.1:PORT/system)
#   DIR/pki        cacert.pem, clientcert.pem, clientkey.pem: the lab CA and a client (the
#                  operator) both hosts trust
#   DIR/host-X/state/lib   what host X sees as /var/lib/libvirt (its pools live there)
#
# Peer-to-peer migration makes the source libvirtd a TLS client of the destination's: each
# daemon has its own client certificate where libvirt looks for it, /etc/pki/libvirt/
# clientcert.pem and private/clientkey.pem, with the CA at /etc/pki/CA/cacert.pem. QEMU's
# migration and NBD streams use TLS too (VIR_MIGRATE_TLS) with the certificates in
# /etc/pki/qemu. Each daemon runs in a private mount namespace where /etc is an overlay whose
# upper layer is DIR/host-X/state/etc-upper (the certificates land there, never in this
# machine's /etc), and /etc/libvirt, /var/lib/libvirt, /var/cache/libvirt, /var/log/libvirt,
# /run/libvirt and /var/log/swtpm are bind mounts of DIR/host-X/state/*: the same path names
# another file on each host, as on two machines without shared storage.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

REPO=$(cd "$(dirname "$0")/.." && pwd)
# The daemons must not inherit the caller's descriptors.
# shellcheck source=lib/daemons.sh
source "$REPO/hack/lib/daemons.sh"
close_inherited_fds

cmd=${1:-}
if [ "$cmd" = exec ]; then
	HOST=${2:?exec needs a host, a or b}
	shift
fi
DIR=${2:-/var/tmp/banlieue-migration}
BASE_PORT=${BANLIEUE_MIGRATION_BASE_PORT:-17100}
HOSTS="a b"

say() { printf '[migration-lab] %s\n' "$*" >&2; }
fail() { say "error: $*"; exit 1; }
case "$DIR" in /|"") fail "refusing DIR '$DIR'" ;; esac

# port HOST — host a on BASE_PORT, b on BASE_PORT+1.
port() { if [ "$1" = a ]; then echo "$BASE_PORT"; else echo $((BASE_PORT + 1)); fi; }
answers() { # HOST
	timeout 20 virsh -q -c "qemu+tls://127.0.0.1:$(port "$1")/system?pkipath=$DIR/pki" version >/dev/null 2>&1
}

# issue KEY CERT SUBJECT EXT — a key and a certificate signed by the lab CA.
issue() {
	openssl req -new -newkey rsa:2048 -nodes -keyout "$1" -subj "$3" -out "$1.csr" 2>/dev/null
	openssl x509 -req -in "$1.csr" -CA "$DIR/pki/ca/cacert.pem" -CAkey "$DIR/pki/ca/cakey.pem" \
		-CAcreateserial -days 3650 -extfile "$4" -out "$2" 2>/dev/null
	rm -f "$1.csr" "$DIR/pki/ca/cacert.srl"
	chmod 600 "$1"
}

# host_pki HOST — host's own server and client identities, as libvirtd and QEMU read them
# (DIR/host-X/state/etc-upper/pki becomes /etc/pki in its namespace).
host_pki() {
	local h=$DIR/host-$1 pki ext
	pki=$h/state/etc-upper/pki
	[ -s "$pki/libvirt/private/serverkey.pem" ] && return 0
	mkdir -p "$pki/CA" "$pki/libvirt/private" "$pki/qemu"
	ext=$(mktemp)
	cat >"$ext" <<-EOF
		basicConstraints=critical,CA:FALSE
		keyUsage=critical,digitalSignature,keyEncipherment
		extendedKeyUsage=serverAuth
		subjectAltName=IP:127.0.0.1,DNS:localhost
	EOF
	issue "$pki/libvirt/private/serverkey.pem" "$pki/libvirt/servercert.pem" "/O=banlieue migration lab/CN=host-$1" "$ext"
	cat >"$ext" <<-EOF
		basicConstraints=critical,CA:FALSE
		keyUsage=critical,digitalSignature,keyEncipherment
		extendedKeyUsage=clientAuth
	EOF
	issue "$pki/libvirt/private/clientkey.pem" "$pki/libvirt/clientcert.pem" "/O=banlieue migration lab/CN=host-$1-client" "$ext"
	rm -f "$ext"
	cp "$DIR/pki/cacert.pem" "$pki/CA/cacert.pem"
	# QEMU's TLS directory: its migration server (destination) and client (source) identities.
	cp "$DIR/pki/cacert.pem" "$pki/qemu/ca-cert.pem"
	cp "$pki/libvirt/servercert.pem" "$pki/qemu/server-cert.pem"
	cp "$pki/libvirt/private/serverkey.pem" "$pki/qemu/server-key.pem"
	cp "$pki/libvirt/clientcert.pem" "$pki/qemu/client-cert.pem"
	cp "$pki/libvirt/private/clientkey.pem" "$pki/qemu/client-key.pem"
}

# host_config HOST — libvirtd.conf (TLS on 127.0.0.1:PORT with the host's server identity, its
# own host_uuid), virtlogd.conf and qemu.conf.
host_config() {
	local h=$DIR/host-$1 uuid lo
	mkdir -p "$h/conf" "$h/log" "$h/state/etc" "$h/state/log/qemu"
	[ -s "$h/host-uuid" ] || cat /proc/sys/kernel/random/uuid >"$h/host-uuid"
	uuid=$(cat "$h/host-uuid")
	cat >"$h/conf/libvirtd.conf" <<-EOF
		listen_tls = 1
		listen_tcp = 0
		listen_addr = "127.0.0.1"
		tls_port = "$(port "$1")"
		auth_tls = "none"
		ca_file = "/etc/pki/CA/cacert.pem"
		cert_file = "/etc/pki/libvirt/servercert.pem"
		key_file = "/etc/pki/libvirt/private/serverkey.pem"
		unix_sock_group = "root"
		unix_sock_ro_perms = "0700"
		unix_sock_rw_perms = "0700"
		auth_unix_ro = "none"
		auth_unix_rw = "none"
		host_uuid = "$uuid"
		log_outputs = "3:file:$h/log/libvirtd.log"
	EOF
	echo "log_outputs = \"3:file:$h/log/virtlogd.log\"" >"$h/conf/virtlogd.conf"
	# Both hosts share this machine's network: each takes its own range of ports for incoming
	# migration and NBD streams. libvirt refuses a loopback migration_host or migration_address
	# in qemu.conf ("must not be the address of the local machine"), so the test passes
	# 127.0.0.1 in the migrate_uri and listen_address parameters of each migration instead.
	if [ "$1" = a ]; then lo=49152; else lo=49184; fi
	cat >"$h/state/etc/qemu.conf" <<-EOF
		user = "root"
		group = "root"
		migration_port_min = $lo
		migration_port_max = $((lo + 31))
		migrate_tls_x509_cert_dir = "/etc/pki/qemu"
		migrate_tls_x509_verify = 1
	EOF
}

# in_host_namespace HOST CMD... — run CMD in host's mount namespace, entered through its
# virtlogd; without one, a new namespace is made.
in_host_namespace() {
	local h=$DIR/host-$1 m script
	shift
	if running "$h/virtlogd.pid"; then
		nsenter --mount="/proc/$(cat "$h/virtlogd.pid")/ns/mnt" -- "$@"
		return
	fi
	script=$h/conf/namespace.sh
	mkdir -p "$h/state/etc-upper" "$h/state/etc-work"
	{
		echo 'set -e'
		echo "mount -t overlay banlieue-migration-etc -o lowerdir=/etc,upperdir=$h/state/etc-upper,workdir=$h/state/etc-work /etc"
		for m in etc:/etc/libvirt lib:/var/lib/libvirt cache:/var/cache/libvirt log:/var/log/libvirt \
			run:/run/libvirt swtpm:/var/log/swtpm; do
			mkdir -p "$h/state/${m%%:*}"
			echo "mkdir -p ${m#*:} && mount --bind $h/state/${m%%:*} ${m#*:}"
		done
		echo 'exec "$@"'
	} >"$script"
	unshare --mount --propagation private /bin/sh "$script" "$@"
}

wait_for_file() {
	for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
	fail "$1 never appeared"
}

start_host() { # HOST
	local h=$DIR/host-$1
	if ! running "$h/virtlogd.pid"; then
		rm -f "$h/virtlogd.pid"
		in_host_namespace "$1" virtlogd --daemon --config "$h/conf/virtlogd.conf" --pid-file "$h/virtlogd.pid" \
			>>"$h/log/start.log" 2>&1 || fail "host $1: virtlogd did not start (see $h/log/start.log)"
		wait_for_file "$h/virtlogd.pid"
	fi
	if ! running "$h/libvirtd.pid"; then
		rm -f "$h/libvirtd.pid"
		in_host_namespace "$1" libvirtd --daemon --listen --config "$h/conf/libvirtd.conf" --pid-file "$h/libvirtd.pid" \
			>>"$h/log/start.log" 2>&1 || fail "host $1: libvirtd did not start (see $h/log/start.log)"
		wait_for_file "$h/libvirtd.pid"
	fi
}

wait_answers() { # HOST
	local deadline=$(($(date +%s) + 120))
	until answers "$1"; do
		running "$DIR/host-$1/libvirtd.pid" || fail "host $1: libvirtd exited (see $DIR/host-$1/log/libvirtd.log)"
		[ "$(date +%s)" -lt "$deadline" ] || fail "host $1 not answering on 127.0.0.1:$(port "$1") after 120s"
		sleep 0.2
	done
}

# stop_guests HOST — the QEMUs and swtpms host's libvirtd left, found through its own PID files
# and checked by executable so a recycled PID is never hit.
stop_guests() {
	local h=$DIR/host-$1 f pid exe
	for f in "$h"/state/run/qemu/*.pid "$h"/state/run/qemu/swtpm/*.pid; do
		[ -s "$f" ] || continue
		pid=$(tr -dc 0-9 <"$f")
		if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then continue; fi
		exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
		case "$exe" in
		*/qemu-system-* | */swtpm) echo "$pid" >"$h/guest.pid"; stop_pid "host $1: ${exe##*/}" "$h/guest.pid" ;;
		esac
	done
	rm -f "$h/guest.pid"
}

case "$cmd" in
start)
	[ "$(id -u)" = 0 ] || fail "must run as root"
	command -v libvirtd >/dev/null || fail "no libvirtd: run hack/libvirt-lab.sh packages once to install libvirt's packages"
	mkdir -p "$DIR"
	DIR=$(cd "$DIR" && pwd)
	if [ -s "$DIR/env" ] && answers a && answers b; then
		say "already running"
		exit 0
	fi
	# The lab CA and the operator's client identity (and a server certificate this lab does not use).
	"$REPO/hack/libvirt-lab.sh" pki "$DIR" >/dev/null
	for x in $HOSTS; do
		host_pki "$x"
		host_config "$x"
	done
	begin=$SECONDS
	start_host a
	wait_answers a
	# Host a probes QEMU once; b starts from a copy of its capabilities cache.
	virsh -q -c "qemu+tls://127.0.0.1:$(port a)/system?pkipath=$DIR/pki" capabilities >/dev/null
	if [ ! -d "$DIR/host-b/state/cache/qemu" ]; then
		mkdir -p "$DIR/host-b/state/cache"
		cp -a "$DIR/host-a/state/cache/qemu" "$DIR/host-b/state/cache/qemu"
	fi
	start_host b
	wait_answers b
	cat >"$DIR/env" <<-EOF
		export BANLIEUE_MIGRATION_LAB=$DIR
		export BANLIEUE_MIGRATION_PKI=$DIR/pki
		export BANLIEUE_MIGRATION_A=qemu+tls://127.0.0.1:$(port a)/system
		export BANLIEUE_MIGRATION_B=qemu+tls://127.0.0.1:$(port b)/system
	EOF
	say "ready in $((SECONDS - begin))s: host a on 127.0.0.1:$(port a), host b on 127.0.0.1:$(port b); source $DIR/env"
	;;
stop)
	for x in $HOSTS; do
		stop_pid "host $x: libvirtd" "$DIR/host-$x/libvirtd.pid"
		stop_pid "host $x: virtlogd" "$DIR/host-$x/virtlogd.pid"
		stop_guests "$x"
		rm -f "$DIR/host-$x/libvirtd.pid" "$DIR/host-$x/virtlogd.pid"
	done
	rm -f "$DIR/env"
	;;
status)
	answers a && answers b
	;;
env)
	cat "$DIR/env"
	;;
exec)
	case "$HOST" in a | b) ;; *) fail "exec: no host '$HOST' (a or b)" ;; esac
	running "$DIR/host-$HOST/virtlogd.pid" || fail "exec: host $HOST is not running"
	shift 2
	in_host_namespace "$HOST" "$@"
	;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
	exit 2
	;;
esac
