#!/bin/bash
# hack/libvirt-lab.sh — a throw-away libvirtd speaking mutual TLS on port 16514, for banlieue's
# integration tests (no systemd, no KVM needed). Clients on this machine dial 127.0.0.1; pods of
# the lab's real node (hack/node.sh) dial 10.244.0.1, the node's bridge, so the daemon listens on
# every address (TLS with a client certificate of the lab's CA is still required).
#
# Usage: hack/libvirt-lab.sh start|stop|env|restart-libvirtd|status|packages|pki|daemon-config [DIR]
#        hack/libvirt-lab.sh hold-start|forget-start DOMAIN [DIR]
#        DIR defaults to $BANLIEUE_LIBVIRT_LAB, else /var/tmp/banlieue-lab. Must run as root.
#
#   start             install missing Debian packages (apt-get update only when installing),
#                     create the PKI, start virtlogd + libvirtd. A no-op when already running.
#   stop              stop only what start launched (PID files), then any QEMU/swtpm/dnsmasq
#                     the daemon left behind (found through the daemon's own PID files), and
#                     the bridge and firewall rules of each network it had up (its status files).
#   env               print DIR/env.
#   restart-libvirtd  kill -9 libvirtd (a crash, not a clean stop) and start it again with the
#                     same state; tests use it after killing the daemon mid-call.
#   hold-start DOMAIN the next start of DOMAIN stops inside libvirtd, after libvirtd saved the
#                     domain's status and before QEMU runs, until libvirtd is killed (a fault
#                     test's kill point, docs/reliability.md B10). DIR/held/DOMAIN appears when it
#                     is held. A qemu hook (the lab's private /etc/libvirt/hooks/qemu) makes the
#                     domain's PID file a FIFO, whose open blocks libvirtd's forked child; only
#                     with a private state.
#   forget-start DOMAIN  the host repair of a start libvirtd lost (DomainStartLost, docs/reliability.md
#                     B10): stop libvirtd, remove its status file of DOMAIN, start libvirtd again;
#                     the domain is then shut off and banlieue starts it.
#   status            exit 0 when libvirtd answers on the TLS port.
#
# Env: BANLIEUE_LIBVIRT_PORT, the TLS port (default 16514), for a second lab beside the first.
#   packages          only install the missing Debian packages (as start does), e.g. ahead of
#                     start while something else runs (.ci/run).
#   pki               only create DIR/pki (as start does; kept when present).
#   daemon-config     only write DIR/conf/libvirtd.conf and virtlogd.conf (as start does, but
#                     listening on 127.0.0.1 only). hack/libvirt-matrix.sh uses
#                     pki and daemon-config for the libvirtds it runs in other Debian releases.
#
# Contract other tests rely on (do not rename):
#   DIR/env            shell `export` lines: BANLIEUE_LIBVIRT_LAB=DIR,
#                      BANLIEUE_LIBVIRT_ENDPOINT=qemu+tls://127.0.0.1/system,
#                      BANLIEUE_LIBVIRT_PKI=DIR/pki,
#                      BANLIEUE_LIBVIRT_POD_ENDPOINT=qemu+tls://10.244.0.1/system (from pods)
#   DIR/pki/cacert.pem, clientcert.pem, clientkey.pem   the CA and a client it trusts
#   DIR/pki/untrusted/clientcert.pem, clientkey.pem     a client signed by another CA
#   DIR/pki/other-ca/cacert.pem                         a CA unrelated to the server
#   DIR/libvirtd.pid, DIR/virtlogd.pid                  the daemons' PIDs
#   The server certificate covers 127.0.0.1, 10.244.0.1 and localhost only.
#
# State: by default the daemons run in a private mount namespace where /etc/libvirt,
# /var/lib/libvirt, /var/cache/libvirt, /var/log/libvirt, /run/libvirt and /var/log/swtpm are
# bind mounts of DIR/state/*, so `rm -rf DIR` after stop removes every trace.
# BANLIEUE_LAB_SHARED_STATE=1 uses the real system paths instead (when unshare is refused).
# BANLIEUE_LAB_KVM=1 lets guests use /dev/kvm; by default the lab hides it and guests run under
# QEMU software emulation, as on a machine without KVM.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# The daemons must not inherit the caller's descriptors.
# shellcheck source=lib/daemons.sh
source "$(dirname "$0")/lib/daemons.sh"
close_inherited_fds

cmd=${1:-}
if [ "$cmd" = forget-start ] || [ "$cmd" = hold-start ]; then
	DOMAIN=${2:?$cmd needs the domain name}
	shift
fi
DIR=${2:-${BANLIEUE_LIBVIRT_LAB:-/var/tmp/banlieue-lab}}
ADDR=127.0.0.1
# hack/node.sh's bridge address (its node IP): where the node's pods reach this machine.
POD_ADDR=10.244.0.1
# libvirtd takes one listen address; the pods' bridge may not exist yet when it starts.
LISTEN_ADDR=0.0.0.0
# A second lab beside the first (hack/test.sh's shared lane) takes another port; the endpoints in
# DIR/env then name it, and the later commands on DIR read it back from DIR's configuration.
PORT=${BANLIEUE_LIBVIRT_PORT:-$(sed -n 's/^tls_port = "\([0-9]*\)"$/\1/p' "$DIR/conf/libvirtd.conf" 2>/dev/null || true)}
PORT=${PORT:-16514}
HOST=$ADDR POD_HOST=$POD_ADDR
if [ "$PORT" != 16514 ]; then HOST=$ADDR:$PORT POD_HOST=$POD_ADDR:$PORT; fi
PACKAGES="libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 qemu-utils
          swtpm swtpm-tools ovmf openssl dnsmasq-base iptables"

say() { printf '[libvirt-lab] %s\n' "$*" >&2; }
fail() { say "error: $*"; exit 1; }

case "$DIR" in /|"") fail "refusing DIR '$DIR'" ;; esac

install_packages() {
	local missing="" p
	for p in $PACKAGES; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	say "installing:$missing"
	apt-get update -qq
	# shellcheck disable=SC2086 # one word per package
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >"$DIR/apt.log" 2>&1 ||
		{ tail -20 "$DIR/apt.log" >&2; fail "apt-get install failed"; }
}

# The QEMU driver refuses to load unless its compiled-in user exists; that user normally comes
# from libvirt-daemon-system, which we avoid because it pulls in systemd units.
ensure_qemu_user() {
	getent group libvirt-qemu >/dev/null || groupadd --system libvirt-qemu
	getent passwd libvirt-qemu >/dev/null ||
		useradd --system -g libvirt-qemu -d /var/lib/libvirt -M -s /usr/sbin/nologin libvirt-qemu
}

# issue KEYOUT CERTOUT SUBJECT EXTFILE CA_DIR — an RSA key and a certificate signed by CA_DIR.
# RSA keeps libvirt's GnuTLS key-usage checks (digitalSignature + keyEncipherment) meaningful.
issue() {
	local key=$1 crt=$2 subj=$3 ext=$4 ca=$5
	openssl req -new -newkey rsa:2048 -nodes -keyout "$key" -subj "$subj" -out "$key.csr" 2>/dev/null
	openssl x509 -req -in "$key.csr" -CA "$ca/cacert.pem" -CAkey "$ca/cakey.pem" -CAcreateserial \
		-days 3650 -extfile "$ext" -out "$crt" 2>/dev/null
	rm -f "$key.csr"
}

make_ca() { # DIR CN
	openssl req -x509 -new -newkey rsa:2048 -nodes -days 3650 -subj "/O=banlieue lab/CN=$2" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
		-keyout "$1/cakey.pem" -out "$1/cacert.pem" 2>/dev/null
}

# server_cert_current — the server certificate names every address clients dial.
server_cert_current() {
	openssl x509 -in "$DIR/pki/server/servercert.pem" -noout -ext subjectAltName 2>/dev/null |
		grep -q "IP Address:$POD_ADDR"
}

# issue_server_cert — the server's key and certificate, signed by the lab CA.
issue_server_cert() {
	local pki=$DIR/pki
	cat >"$pki/server.ext" <<-EOF
		basicConstraints=critical,CA:FALSE
		keyUsage=critical,digitalSignature,keyEncipherment
		extendedKeyUsage=serverAuth
		subjectAltName=IP:$ADDR,IP:$POD_ADDR,DNS:localhost
	EOF
	issue "$pki/server/serverkey.pem" "$pki/server/servercert.pem" "/O=banlieue lab/CN=$ADDR" "$pki/server.ext" "$pki/ca"
	rm -f "$pki/server.ext" "$pki/ca/cacert.srl"
	chmod 600 "$pki/server/serverkey.pem"
}

make_pki() {
	local pki=$DIR/pki
	if [ -s "$pki/clientkey.pem" ] && [ -s "$pki/server/servercert.pem" ]; then
		# A PKI from before the pods' address: only the server certificate is re-issued, by the
		# same CA, so every client credential and CA bundle stays valid.
		if ! server_cert_current; then
			say "re-issuing the server certificate for $POD_ADDR"
			issue_server_cert
		fi
		return 0
	fi
	say "creating PKI in $pki"
	rm -rf "$pki"
	mkdir -p "$pki"/{ca,server,untrusted,other-ca,rogue-ca}
	chmod 700 "$pki"
	make_ca "$pki/ca" "banlieue lab CA"
	make_ca "$pki/rogue-ca" "banlieue lab rogue CA"
	make_ca "$pki/other-ca" "banlieue lab unrelated CA"
	cat >"$pki/client.ext" <<-EOF
		basicConstraints=critical,CA:FALSE
		keyUsage=critical,digitalSignature,keyEncipherment
		extendedKeyUsage=clientAuth
	EOF
	issue_server_cert
	issue "$pki/clientkey.pem" "$pki/clientcert.pem" "/O=banlieue lab/CN=banlieue-test-client" "$pki/client.ext" "$pki/ca"
	issue "$pki/untrusted/clientkey.pem" "$pki/untrusted/clientcert.pem" "/O=banlieue lab/CN=untrusted-client" "$pki/client.ext" "$pki/rogue-ca"
	cp "$pki/ca/cacert.pem" "$pki/cacert.pem"
	rm -f "$pki"/*.ext "$pki"/*/cacert.srl
	chmod 600 "$pki"/clientkey.pem "$pki"/*/*key.pem
}

# write_daemon_config — DIR/conf/libvirtd.conf (mutual TLS on $LISTEN_ADDR:$PORT with DIR/pki, unix
# sockets root-only) and DIR/conf/virtlogd.conf, both logging into DIR/log.
write_daemon_config() {
	mkdir -p "$DIR/conf" "$DIR/log"
	cat >"$DIR/conf/libvirtd.conf" <<-EOF
		listen_tls = 1
		listen_tcp = 0
		listen_addr = "$LISTEN_ADDR"
		tls_port = "$PORT"
		auth_tls = "none"
		ca_file = "$DIR/pki/cacert.pem"
		cert_file = "$DIR/pki/server/servercert.pem"
		key_file = "$DIR/pki/server/serverkey.pem"
		unix_sock_group = "root"
		unix_sock_ro_perms = "0700"
		unix_sock_rw_perms = "0700"
		auth_unix_ro = "none"
		auth_unix_rw = "none"
		log_outputs = "3:file:$DIR/log/libvirtd.log"
	EOF
	echo "log_outputs = \"3:file:$DIR/log/virtlogd.log\"" >"$DIR/conf/virtlogd.conf"
}

# write_hook writes hold-start's qemu hook into the private /etc/libvirt. It runs inside the
# daemons' namespace at "start begin", after libvirtd removed the domain's stale PID file and
# before it forks QEMU; libvirtd reads its hook scripts when it starts.
write_hook() {
	mkdir -p "$DIR/state/etc/hooks"
	cat >"$DIR/state/etc/hooks/qemu" <<-EOF
		#!/bin/sh
		# Written by hack/libvirt-lab.sh (hold-start).
		cat >/dev/null
		[ "\$2 \$3" = "start begin" ] && [ -e "$DIR/hold-start/\$1" ] || exit 0
		rm -f "$DIR/hold-start/\$1"
		mkfifo "/run/libvirt/qemu/\$1.pid" && mkdir -p "$DIR/held" && touch "$DIR/held/\$1"
		exit 0
	EOF
	chmod 755 "$DIR/state/etc/hooks/qemu"
}

write_config() {
	write_daemon_config
	# QEMU runs as root in the lab: /dev/kvm here is root-only, and libvirt re-probes every
	# QEMU binary on each capabilities call (seconds) while the probe and the configured
	# user disagree about KVM. Only the private /etc/libvirt is touched, never the host's.
	mkdir -p "$DIR/state/etc"
	printf 'user = "root"\ngroup = "root"\n' >"$DIR/state/etc/qemu.conf"
	# banlieue logs each domain's serial console to /var/log/libvirt/qemu/, which a packaged
	# libvirt creates at install time; a fresh lab state has no such directory, and a domain
	# whose log file cannot be opened does not start.
	mkdir -p "$DIR/state/log/qemu"
	write_hook
	cat >"$DIR/env" <<-EOF
		export BANLIEUE_LIBVIRT_LAB=$DIR
		export BANLIEUE_LIBVIRT_ENDPOINT=qemu+tls://$HOST/system
		export BANLIEUE_LIBVIRT_PKI=$DIR/pki
		export BANLIEUE_LIBVIRT_POD_ENDPOINT=qemu+tls://$POD_HOST/system
	EOF
}

# in_lab_namespace CMD... — run CMD in the daemons' mount namespace (entered through
# virtlogd, which outlives libvirtd restarts), creating the namespace when there is none.
in_lab_namespace() {
	if [ "$(cat "$DIR/mode" 2>/dev/null)" = shared ]; then
		"$@"
	elif running "$DIR/virtlogd.pid"; then
		nsenter --mount="/proc/$(cat "$DIR/virtlogd.pid")/ns/mnt" -- "$@"
	else
		local s=$DIR/state m script=$DIR/conf/namespace.sh
		{
			echo 'set -e'
			for m in etc:/etc/libvirt lib:/var/lib/libvirt cache:/var/cache/libvirt log:/var/log/libvirt \
				run:/run/libvirt swtpm:/var/log/swtpm; do
				mkdir -p "$s/${m%%:*}"
				echo "mkdir -p ${m#*:} && mount --bind $s/${m%%:*} ${m#*:}"
			done
			# Guests run under QEMU software emulation unless BANLIEUE_LAB_KVM=1: a nested
			# /dev/kvm can exist and still fail guests mid-boot ("emulation failure"), and CI
			# machines may have none. libvirt re-probes QEMU on every call when /dev/kvm exists
			# but is unusable, so the device must be absent, not merely broken: the daemons get
			# a /dev of their own holding everything but kvm.
			if [ "${BANLIEUE_LAB_KVM:-0}" != 1 ] && [ -e /dev/kvm ]; then
				mkdir -p "$s/dev"
				echo "mount -t tmpfs -o mode=755 lab-dev $s/dev"
				for m in null zero full random urandom tty; do
					[ -e "/dev/$m" ] && echo "touch $s/dev/$m && mount --bind /dev/$m $s/dev/$m"
				done
				for m in pts shm net mqueue hugepages; do
					[ -d "/dev/$m" ] && echo "mkdir -p $s/dev/$m && mount --rbind /dev/$m $s/dev/$m"
				done
				# PTYs come from the devpts instance next to ptmx, as in any container's /dev.
				echo "ln -s pts/ptmx $s/dev/ptmx"
				echo "ln -s /proc/self/fd $s/dev/fd && ln -s /proc/self/fd/0 $s/dev/stdin"
				echo "ln -s /proc/self/fd/1 $s/dev/stdout && ln -s /proc/self/fd/2 $s/dev/stderr"
				echo "mount --move $s/dev /dev"
			fi
			echo 'exec "$@"'
		} >"$script"
		# Capabilities cached under another virtualisation setting would be stale.
		rm -rf "$s/cache/qemu/capabilities"
		unshare --mount --propagation private /bin/sh "$script" "$@"
	fi
}

start_daemons() {
	if [ "${BANLIEUE_LAB_SHARED_STATE:-0}" = 1 ] || ! unshare --mount --propagation private true 2>/dev/null; then
		echo shared >"$DIR/mode"
		mkdir -p /var/log/libvirt/qemu
	else
		echo private >"$DIR/mode"
	fi
	if ! running "$DIR/virtlogd.pid"; then
		rm -f "$DIR/virtlogd.pid"
		in_lab_namespace virtlogd --daemon --config "$DIR/conf/virtlogd.conf" --pid-file "$DIR/virtlogd.pid" \
			>>"$DIR/log/start.log" 2>&1 || fail "virtlogd did not start (see $DIR/log/start.log)"
		wait_for_file "$DIR/virtlogd.pid"
	fi
	start_libvirtd
}

start_libvirtd() {
	rm -f "$DIR/libvirtd.pid"
	in_lab_namespace libvirtd --daemon --listen --config "$DIR/conf/libvirtd.conf" --pid-file "$DIR/libvirtd.pid" \
		>>"$DIR/log/start.log" 2>&1 || fail "libvirtd did not start (see $DIR/log/start.log)"
	wait_for_file "$DIR/libvirtd.pid"
	wait_ready
	# The first capabilities request probes every QEMU binary; do it now rather than inside
	# some test's 30 s call budget.
	virsh -q -c "qemu+tls://$HOST/system?pkipath=$DIR/pki" capabilities >/dev/null 2>&1 || true
}

# crash_restart_libvirtd kills libvirtd (-9, a crash) and starts it again on the same state.
crash_restart_libvirtd() {
	if running "$DIR/libvirtd.pid"; then
		kill -KILL "$(cat "$DIR/libvirtd.pid")"
		while running "$DIR/libvirtd.pid"; do sleep 0.05; done
	fi
	start_libvirtd
}

wait_for_file() {
	for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
	fail "$1 never appeared"
}

answers() {
	timeout 20 virsh -q -c "qemu+tls://$HOST/system?pkipath=$DIR/pki" version >/dev/null 2>&1
}

wait_ready() {
	local deadline=$(($(date +%s) + 60))
	until answers; do
		running "$DIR/libvirtd.pid" || { tail -20 "$DIR/log/libvirtd.log" >&2 || true; fail "libvirtd exited"; }
		[ "$(date +%s)" -lt "$deadline" ] || fail "libvirtd not answering on $ADDR:$PORT after 60s"
		sleep 0.2
	done
}

# libvirt_run prints where the daemon's /run/libvirt is seen from here.
libvirt_run() {
	if [ "$(cat "$DIR/mode" 2>/dev/null)" = private ]; then echo "$DIR/state/run"; else echo /run/libvirt; fi
}

# Children libvirtd spawned keep running after it exits; they are found through the daemon's
# own PID files and checked by executable so a recycled PID is never hit.
stop_leftovers() {
	local run f pid exe
	run=$(libvirt_run)
	[ -d "$run" ] || return 0
	for f in "$run"/qemu/*.pid "$run"/qemu/swtpm/*.pid "$run"/network/*.pid; do
		[ -s "$f" ] || continue
		pid=$(tr -dc 0-9 <"$f")
		if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then continue; fi
		exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
		case "$exe" in
		*/qemu-system-* | */swtpm | */dnsmasq) echo "$pid" >"$DIR/leftover.pid"; stop_pid "${exe##*/}" "$DIR/leftover.pid" ;;
		esac
	done
	rm -f "$DIR/leftover.pid"
}

if [ -n "${DOMAIN:-}" ]; then
	case "$DOMAIN" in */* | .*) fail "$cmd: not a domain name: $DOMAIN" ;; esac
fi

case "$cmd" in
start)
	[ "$(id -u)" = 0 ] || fail "must run as root"
	mkdir -p "$DIR"
	DIR=$(cd "$DIR" && pwd)
	if running "$DIR/libvirtd.pid" && running "$DIR/virtlogd.pid" && answers; then
		if server_cert_current && grep -q "listen_addr = \"$LISTEN_ADDR\"" "$DIR/conf/libvirtd.conf"; then
			say "already running (libvirtd pid $(cat "$DIR/libvirtd.pid"))"
			exit 0
		fi
		# A lab started before the pods' address: new certificate and listen address, then
		# libvirtd restarted on the same state (its guests keep running, as on a crash restart).
		say "libvirtd runs with a configuration from before $POD_ADDR; restarting it"
		make_pki
		write_config
		stop_pid libvirtd "$DIR/libvirtd.pid"
		start_libvirtd
		say "ready: libvirtd pid $(cat "$DIR/libvirtd.pid"); source $DIR/env"
		exit 0
	fi
	install_packages
	ensure_qemu_user
	make_pki
	write_config
	start_daemons
	say "ready: libvirtd pid $(cat "$DIR/libvirtd.pid"); source $DIR/env"
	;;
restart-libvirtd)
	[ -s "$DIR/env" ] || fail "no lab in $DIR; run start first"
	crash_restart_libvirtd
	say "libvirtd restarted (pid $(cat "$DIR/libvirtd.pid"))"
	;;
hold-start)
	[ -s "$DIR/env" ] || fail "no lab in $DIR; run start first"
	[ "$(cat "$DIR/mode")" = private ] || fail "hold-start needs the lab's private state"
	hook=$DIR/state/etc/hooks/qemu
	if [ ! -x "$hook" ] || [ "$hook" -nt "$DIR/libvirtd.pid" ]; then
		# A lab started before the hook existed: libvirtd must start again to read it.
		write_hook
		crash_restart_libvirtd
		say "libvirtd restarted (pid $(cat "$DIR/libvirtd.pid")) to read its qemu hook"
	fi
	mkdir -p "$DIR/hold-start"
	rm -f "$DIR/held/$DOMAIN"
	touch "$DIR/hold-start/$DOMAIN"
	;;
forget-start)
	[ -s "$DIR/env" ] || fail "no lab in $DIR; run start first"
	stop_pid libvirtd "$DIR/libvirtd.pid"
	pidfile=$(libvirt_run)/qemu/$DOMAIN.pid
	# A start held by hold-start: its child blocks opening the FIFO until a reader comes, then
	# finds libvirtd gone and exits without running QEMU.
	if [ -p "$pidfile" ]; then timeout 5 cat "$pidfile" >/dev/null || true; fi
	rm -f "$(libvirt_run)/qemu/$DOMAIN.xml" "$pidfile" "$DIR/held/$DOMAIN"
	start_libvirtd
	say "libvirtd restarted (pid $(cat "$DIR/libvirtd.pid")) without the status of domain $DOMAIN"
	;;
stop)
	stop_pid libvirtd "$DIR/libvirtd.pid"
	stop_pid virtlogd "$DIR/virtlogd.pid"
	stop_leftovers
	remove_leftover_networks "$(libvirt_run)"
	rm -f "$DIR/libvirtd.pid" "$DIR/virtlogd.pid"
	;;
env)
	cat "$DIR/env"
	;;
status)
	running "$DIR/libvirtd.pid" && answers
	;;
packages)
	mkdir -p "$DIR" # for apt.log
	install_packages
	;;
pki)
	mkdir -p "$DIR"
	DIR=$(cd "$DIR" && pwd)
	make_pki
	;;
daemon-config)
	mkdir -p "$DIR"
	DIR=$(cd "$DIR" && pwd)
	# The matrix's daemons serve only tests on this machine, never the node's pods.
	LISTEN_ADDR=$ADDR
	write_daemon_config
	;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
	exit 2
	;;
esac
