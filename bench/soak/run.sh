#!/usr/bin/env bash
# bench/soak/run.sh — the long form of the provider chaos loop (TestChaosProviderKilled in
# test/hardening/chaos_test.go), with the provider's and libvirtd's resources sampled after
# every cycle (BANLIEUE_SOAK=1) so a leak shows as growth from the first to the last decile.
#
#   bench/soak/run.sh                              300 chaos cycles, then 500 steady cycles
#   CHAOS_CYCLES=500 STEADY_CYCLES=0 bench/soak/run.sh
#   BANLIEUE_CHAOS_SEED=1234 bench/soak/run.sh      replay a chaos schedule
#
# Phase "chaos": the real `banlieue provider libvirt` is SIGKILLed once per cycle and restarted
# under the same POD_NAME; every invariant of the test is checked after every kill, restart and
# cycle. Its provider samples are of a process restarted each cycle (its start-up footprint);
# libvirtd's show whether clients killed mid-call leave connections or memory behind in the
# daemon.
# Phase "steady": the same cycles without a kill, so one provider process lives through all of
# them and its RSS, open fds and goroutines show a per-cycle leak.
#
# Needs what the test needs: root, the lab (hack/libvirt-lab.sh start) and the envtest binaries
# (hack/envtest-assets.sh). Each phase holds /tmp/banlieue-lab.lock, as every lab run does: other
# suites kill and restart the shared lab libvirtd. flock -o keeps the lock's descriptor from the
# test's children, so a daemon started under the lock cannot go on holding it. Logs go to SOAK_OUT (default a new
# /tmp/banlieue-soak.* directory); the summary is printed at the end. Exits 1 if a phase failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../hack/lib/toolchain.sh
source hack/lib/toolchain.sh

chaos_cycles=${CHAOS_CYCLES:-300}
steady_cycles=${STEADY_CYCLES:-500}
lock=${BANLIEUE_LAB_LOCK:-/tmp/banlieue-lab.lock}
out=${SOAK_OUT:-$(mktemp -d /tmp/banlieue-soak.XXXXXX)}
mkdir -p "$out"
# shellcheck disable=SC1091
source "${BANLIEUE_LIBVIRT_LAB:-/var/tmp/banlieue-lab}/env"

status=0
# phase NAME CYCLES KILL_EVERY
phase() {
	local name=$1 cycles=$2 kill_every=$3 start rc=0
	[[ $cycles -gt 0 ]] || return 0
	echo "==> $name: $cycles cycles (kill every $kill_every; log $out/$name.log)"
	start=$(date +%s)
	# A cycle takes about 1 s on the lab; the timeout allows 15 s a cycle on a loaded machine.
	BANLIEUE_SOAK=1 BANLIEUE_CHAOS_CYCLES=$cycles BANLIEUE_CHAOS_KILL_EVERY=$kill_every \
		flock -o "$lock" go test -count=1 -run '^TestChaosProviderKilled$' -v -timeout "$((cycles * 15 + 600))s" \
		./test/hardening/ >"$out/$name.log" 2>&1 || rc=$?
	echo "    exit $rc after $(($(date +%s) - start)) s"
	# On failure, the test's own findings (its progress lines aside).
	[[ $rc == 0 ]] || {
		status=1
		grep -E -- '--- FAIL|^ +chaos_test\.go:[0-9]+: ' "$out/$name.log" | grep -vE ': (cycle [0-9]+ \(|chaos: |summary: |soak: )' | head -20 || true
	}
}

phase chaos "$chaos_cycles" 1
phase steady "$steady_cycles" 0

echo
echo "==> summary"
for name in chaos steady; do
	[[ -f $out/$name.log ]] || continue
	echo "[$name]"
	# The test's own summary lines, without the file:line prefix of t.Logf.
	sed -nE 's/^ +chaos_test\.go:[0-9]+: ((chaos|summary|soak): .*)$/  \1/p' "$out/$name.log"
done
exit $status
