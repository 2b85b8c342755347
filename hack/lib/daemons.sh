# Sourced by the scripts that start libvirt daemons (hack/libvirt-lab.sh, hack/libvirt-matrix.sh,
# bench/load/hosts.sh).
#
# close_inherited_fds closes every descriptor of this shell but 0-2 and 255 (bash's own script
# fd), so daemons started from it inherit none: started from a test run under `flock`, libvirtd
# would otherwise hold the lock for as long as it lives.
close_inherited_fds() {
	local fd
	for fd in /proc/$$/fd/*; do
		fd=${fd##*/}
		if [ "$fd" -gt 2 ] && [ "$fd" -ne 255 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
	done
}
