# shellcheck shell=bash
# Sourced by the scripts that start libvirt daemons (hack/libvirt-lab.sh, hack/libvirt-matrix.sh,
# hack/migration-lab.sh, bench/load/hosts.sh), which define say.
#
# close_inherited_fds closes every descriptor of this shell but 0-2 and 255 (bash's own script
# fd), so daemons started from it inherit none: started from a test run under `flock`, libvirtd
# would otherwise hold the lock for as long as it lives.
close_inherited_fds() {
	local fd
	for fd in "/proc/$$/fd/"*; do
		fd=${fd##*/}
		if [ "$fd" -gt 2 ] && [ "$fd" -ne 255 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
	done
}

# remove_leftover_networks RUN removes what the networks of a stopped libvirtd left behind; RUN is
# that libvirtd's /run/libvirt as seen from here. A network outlives its daemon: the bridge and
# its firewall rules stay in this machine's network namespace, which the daemons share, and the
# next libvirtd refuses a network on that bridge ("Network is already in use by interface ...").
# libvirtd keeps a status file for each live network, naming its bridge: the bridge goes, with
# every rule that names it or its subnet (the kernel's route for the bridge's address), then the
# status file.
remove_leftover_networks() {
	local f bridge subnet table rule
	for f in "$1"/network/*.xml; do
		[ -s "$f" ] || continue
		bridge=$(grep -o "<bridge name='[^']*'" "$f" | head -1 | cut -d"'" -f2)
		if [ -n "$bridge" ] && ip link show "$bridge" >/dev/null 2>&1; then
			subnet=$(ip -4 -o route show dev "$bridge" proto kernel scope link | awk '{print $1; exit}')
			ip link del "$bridge"
			for table in filter nat mangle; do
				iptables -t "$table" -S 2>/dev/null | grep -F -e "$bridge" ${subnet:+-e "$subnet"} |
					while read -ra rule; do iptables -t "$table" -D "${rule[@]:1}"; done
			done
			say "removed bridge $bridge${subnet:+ ($subnet)} and its firewall rules, left by a stopped libvirtd"
		fi
		rm -f "$f"
	done
}

# running PIDFILE — its process lives. A daemon killed a moment ago is a zombie until reaped,
# which kill -0 still finds: that one is not running.
running() {
	local pid
	[ -s "$1" ] || return 1
	pid=$(cat "$1")
	kill -0 "$pid" 2>/dev/null || return 1
	[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

# stop_pid NAME PIDFILE — SIGTERM, then SIGKILL after 15 s; returns once the process is gone, so
# nothing is started again on its state (its PID file lock included) while it lives.
stop_pid() {
	local pid
	running "$2" || return 0
	pid=$(cat "$2")
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || { say "$1 (pid $pid) stopped"; return 0; }; sleep 0.1; done
	say "$1 (pid $pid) ignored SIGTERM; killing"
	kill -KILL "$pid" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
}
