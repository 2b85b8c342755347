#!/bin/bash
# bench/load/hosts.sh — N simulated hypervisor hosts for bench/load -hosts N: N real
# libvirtds of this machine's libvirt, each with the QEMU driver, its own state and its own TLS
# port on 127.0.0.1, so each is a host of its own to banlieue. Nothing is simulated but the
# machines behind them: the bench defines powered-off domains only, so no QEMU runs.
#
# Usage: bench/load/hosts.sh start N [DIR] | stop [DIR] | status [DIR]
#        DIR defaults to /var/tmp/banlieue-fleet. Must run as root, after hack/libvirt-lab.sh
#        start has installed libvirt's packages once (this script installs nothing).
#
#   start   create DIR/pki (hack/libvirt-lab.sh pki: one CA, one server certificate for
#           127.0.0.1, one client) and start hosts 0..N-1, host i listening on port
#           BASE_PORT+i (env BANLIEUE_FLEET_BASE_PORT, default 17000). Host 0 probes QEMU once;
#           the others start with a copy of its capabilities cache, so N hosts cost N daemon
#           starts, not N probes. Writes DIR/hosts: "index port dir" per host.
#   stop    stop every daemon start launched (PID files). `rm -rf DIR` afterwards removes
#           every trace.
#   status  exit 0 when every host answers.
#
# State: as in hack/libvirt-lab.sh, each daemon runs in a private mount namespace where
# /etc/libvirt, /var/lib/libvirt, /var/cache/libvirt, /var/log/libvirt and /run/libvirt are
# bind mounts of DIR/host-i/state/*. No virtlogd: a host of this bench never starts a domain.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

REPO=$(cd "$(dirname "$0")/../.." && pwd)
# The daemons must not inherit the caller's descriptors.
# shellcheck source=../../hack/lib/daemons.sh
source "$REPO/hack/lib/daemons.sh"
close_inherited_fds
cmd=${1:-}
case "$cmd" in
start) N=${2:?usage: $0 start N [DIR]}; DIR=${3:-/var/tmp/banlieue-fleet} ;;
*) DIR=${2:-/var/tmp/banlieue-fleet} ;;
esac
BASE_PORT=${BANLIEUE_FLEET_BASE_PORT:-17000}

say() { printf '[fleet-hosts] %s\n' "$*" >&2; }
fail() { say "error: $*"; exit 1; }
case "$DIR" in /|"") fail "refusing DIR '$DIR'" ;; esac

answers() { # PORT
	timeout 20 virsh -q -c "qemu+tls://127.0.0.1:$1/system?pkipath=$DIR/pki" version >/dev/null 2>&1
}

# start_host I — host I's configuration and daemon, in the background of nothing: libvirtd
# daemonises itself. Returns once its PID file exists.
start_host() {
	local i=$1 port=$((BASE_PORT + $1)) h=$DIR/host-$1 m script
	mkdir -p "$h"
	ln -sfn ../pki "$h/pki"
	BANLIEUE_LIBVIRT_PORT=$port "$REPO/hack/libvirt-lab.sh" daemon-config "$h" >/dev/null
	# libvirtd's bounds on one client (max_client_requests 5) stay its defaults: the bench
	# measures banlieue against a host as shipped.
	mkdir -p "$h/state/etc" "$h/state/log/qemu"
	printf 'user = "root"\ngroup = "root"\n' >"$h/state/etc/qemu.conf"
	script=$h/conf/namespace.sh
	{
		echo 'set -e'
		for m in etc:/etc/libvirt lib:/var/lib/libvirt cache:/var/cache/libvirt log:/var/log/libvirt run:/run/libvirt; do
			mkdir -p "$h/state/${m%%:*}"
			echo "mkdir -p ${m#*:} && mount --bind $h/state/${m%%:*} ${m#*:}"
		done
		echo 'exec "$@"'
	} >"$script"
	rm -f "$h/libvirtd.pid"
	unshare --mount --propagation private /bin/sh "$script" \
		libvirtd --daemon --listen --config "$h/conf/libvirtd.conf" --pid-file "$h/libvirtd.pid" \
		>>"$h/log/start.log" 2>&1 || fail "host $i: libvirtd did not start (see $h/log/start.log)"
	echo "$i $port $h" >>"$DIR/hosts.new"
}

wait_answers() { # I
	local port=$((BASE_PORT + $1)) deadline=$(($(date +%s) + 120))
	until answers "$port"; do
		running "$DIR/host-$1/libvirtd.pid" || [ ! -s "$DIR/host-$1/libvirtd.pid" ] ||
			fail "host $1: libvirtd exited (see $DIR/host-$1/log/libvirtd.log)"
		[ "$(date +%s)" -lt "$deadline" ] || fail "host $1 not answering on 127.0.0.1:$port after 120s"
		sleep 0.2
	done
}

stop_all() {
	local f pid pids=()
	for f in "$DIR"/host-*/libvirtd.pid; do
		running "$f" || continue
		pid=$(cat "$f")
		kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
	done
	# A daemon removes its PID file as it exits: wait on the PIDs read above, not on the files.
	for pid in "${pids[@]}"; do
		for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	done
	rm -f "$DIR"/host-*/libvirtd.pid
}

case "$cmd" in
start)
	[ "$(id -u)" = 0 ] || fail "must run as root"
	command -v libvirtd >/dev/null || fail "no libvirtd: run hack/libvirt-lab.sh start once to install libvirt's packages"
	[ "$N" -ge 1 ] || fail "N must be at least 1"
	if [ -s "$DIR/hosts" ] && "$0" status "$DIR" 2>/dev/null; then
		[ "$(wc -l <"$DIR/hosts")" -eq "$N" ] || fail "$DIR runs $(wc -l <"$DIR/hosts") hosts, not $N: stop it first"
		say "already running: $N hosts"
		exit 0
	fi
	stop_all
	mkdir -p "$DIR"
	DIR=$(cd "$DIR" && pwd)
	"$REPO/hack/libvirt-lab.sh" pki "$DIR"
	rm -f "$DIR/hosts.new"
	begin=$SECONDS
	# Host 0 probes QEMU (seconds of CPU); every other host starts from its cache, which libvirt
	# keys on the binaries and the kernel, all shared here.
	start_host 0
	wait_answers 0
	virsh -q -c "qemu+tls://127.0.0.1:$BASE_PORT/system?pkipath=$DIR/pki" capabilities >/dev/null
	for ((i = 1; i < N; i++)); do
		mkdir -p "$DIR/host-$i/state/cache"
		rm -rf "$DIR/host-$i/state/cache/qemu"
		cp -a "$DIR/host-0/state/cache/qemu" "$DIR/host-$i/state/cache/qemu"
		start_host "$i"
	done
	for ((i = 1; i < N; i++)); do wait_answers "$i"; done
	sort -n "$DIR/hosts.new" >"$DIR/hosts" && rm -f "$DIR/hosts.new"
	say "ready: $N hosts on 127.0.0.1:$BASE_PORT-$((BASE_PORT + N - 1)) in $((SECONDS - begin))s; list in $DIR/hosts"
	;;
stop)
	stop_all
	;;
status)
	[ -s "$DIR/hosts" ] || exit 1
	while read -r i port _; do
		running "$DIR/host-$i/libvirtd.pid" && answers "$port" || exit 1
	done <"$DIR/hosts"
	;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
	exit 2
	;;
esac
