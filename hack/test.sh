#!/usr/bin/env bash
# The test suite against real parts: a real kube-apiserver + etcd (built from Go modules), a real
# libvirtd over mutual TLS on 127.0.0.1, the real cloud guest, and independent ISO readers. Run
# as root on Debian 12.
#
#   hack/test.sh                 everything (what CI runs)
#   hack/test.sh --quick         the contributor's loop: the pure and API-server packages, without
#                                root, libvirtd, a node or a guest (docs/testing.md, "The quick loop")
#   hack/test.sh ./pkg/libvirt/  only some packages (any `go test` package patterns)
#
# Env: GO_TEST_FLAGS (extra flags for go test, e.g. "-run TestAdmission -v"),
#      BANLIEUE_KEEP_LAB=1 leaves the libvirt lab running afterwards,
#      BANLIEUE_TEST_REPORT=DIR keeps the per-package results there (.ci/run's summary reads them).
#
# The packages run in two streams beside each other, then one package alone
# (docs/testing.md, "How the suite runs"):
#   free    packages that need at most their own API server: two at a time, at a lower CPU
#           priority, beside the lab stream;
#   lab     packages that use the lab libvirtd or boot an emulated guest: one at a time, since
#           several kill and restart the daemon to test what survives it;
#   alone   test/hardening, which freezes and kills the daemon and holds tight bounds on how soon
#           the roles recover: last, once both streams are done, with the machine to itself.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH:/usr/sbin:/sbin
# The Go release of go.mod's toolchain line (hack/lib/toolchain.sh): a machine ignores that line.
export GOTOOLCHAIN=go1.27.3

quick=0
if [[ ${1:-} == --quick ]]; then
  quick=1
  shift
fi

start=$SECONDS
phase() { printf '\n==> [hack/test.sh %ds] %s\n' "$((SECONDS - start))" "$*"; }

alone_pkgs=(banlieue.io/banlieue/test/hardening)
# What marks a package's tests as users of the lab libvirtd or of an emulated guest.
lab_marks='RequireLibvirtLab|RequirePodLibvirtLab|LabFromEnv|needLab\(|BANLIEUE_LIBVIRT|qemu-system|cloud-guest|CloudGuest'
# What marks a package as needing root (not in the quick loop).
root_marks='Geteuid'

# What marks a package's tests as users of the two-host lab of hack/migration-lab.sh.
migration_marks='BANLIEUE_MIGRATION_LAB'

free=() lab=() alone=() migration=()
classify() {
  local path dir
  while read -r path dir; do
    if ((quick)); then
      grep -qE "$root_marks" "$dir"/*_test.go || free+=("$path")
    elif [[ " ${alone_pkgs[*]} " == *" $path "* ]]; then
      alone+=("$path")
    elif grep -qE "$lab_marks" "$dir"/*_test.go; then
      lab+=("$path")
      if grep -qE "$migration_marks" "$dir"/*_test.go; then
        migration+=("$path")
      fi
    else
      free+=("$path")
    fi
  done < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "$@")
}
classify "${@:-./...}"
if ((quick)); then
  # Every package but those that need root, in -short mode (no guest boots) and without the lab's
  # environment, so the lab's tests skip; CI empty, so a missing lab skips rather than fails.
  unset BANLIEUE_LIBVIRT_LAB BANLIEUE_LIBVIRT_ENDPOINT BANLIEUE_LIBVIRT_PKI BANLIEUE_LIBVIRT_POD_ENDPOINT
  export CI='' GO_TEST_FLAGS="-short ${GO_TEST_FLAGS:-}"
fi

if ((!quick)); then
  phase "Debian packages the tests read ISO images and boot guests with"
  hack/install-test-deps.sh
fi

phase "control-plane binaries (kube-apiserver, etcd, kubectl)"
KUBEBUILDER_ASSETS="$(hack/envtest-assets.sh | tail -1)"
export KUBEBUILDER_ASSETS
echo "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"

phase "helm, built from Go modules (for the chart tests in test/install)"
hack/helm.sh

# What hack/test.sh started and stops at exit, in reverse order (BANLIEUE_KEEP_LAB keeps them).
stops=()
stop_all() {
  local i
  for ((i = ${#stops[@]} - 1; i >= 0; i--)); do
    ${stops[i]} || true
  done
}
trap stop_all EXIT

# start_lab SCRIPT DIR: starts a lab script's daemons in DIR, to be stopped at exit unless they
# ran already or BANLIEUE_KEEP_LAB is set, and sources its env file.
start_lab() {
  local script=$1 dir=$2 was_running=0
  "$script" status "$dir" >/dev/null 2>&1 && was_running=1
  "$script" start "$dir"
  if [[ $was_running == 0 && -z "${BANLIEUE_KEEP_LAB:-}" ]]; then
    stops+=("$script stop $dir")
  fi
  # shellcheck disable=SC1090,SC1091
  source "$dir/env"
}

if ((${#lab[@]} + ${#alone[@]})); then
  phase "libvirt lab host (libvirtd, TLS on 127.0.0.1:16514)"
  start_lab hack/libvirt-lab.sh "${BANLIEUE_LIBVIRT_LAB:-/var/tmp/banlieue-lab}"
  if ((${#migration[@]})); then
    phase "the two-host migration lab (hack/migration-lab.sh: libvirtds on 127.0.0.1:17100-17101)"
    start_lab hack/migration-lab.sh "${BANLIEUE_MIGRATION_LAB:-/var/tmp/banlieue-migration}"
  fi

  phase "the cloud guest (hack/cloud-guest.sh: debootstrap once, then cached)"
  # Built here rather than inside test/e2e/cloudguest, so a cold build (minutes) is not spent
  # against that package's go test timeout and its time shows on its own.
  hack/cloud-guest.sh | tail -1
fi

phase "the test packages compiled"
# go test -p limits the builds too, so the test packages are compiled first with the machine's
# parallelism into Go's build cache (go list -export compiles without linking; a second through a
# warm cache). A package that does not compile is reported by go test, in its place.
go list -test -export "${free[@]}" "${lab[@]}" "${alone[@]}" >/dev/null 2>&1 || true
# Each package's result goes to the report directory, read by the table at the end (and by
# .ci/run's): a directory of this run's own unless BANLIEUE_TEST_REPORT names one.
# shellcheck source=lib/gotest.sh
source hack/lib/gotest.sh
export BANLIEUE_TEST_REPORT="${BANLIEUE_TEST_REPORT:-$(mktemp -d)}"
rm -f "$BANLIEUE_TEST_REPORT"/{free,lab,alone}.summary
TESTREPORT="$BANLIEUE_TEST_REPORT/testreport"
export TESTREPORT
go build -o "$TESTREPORT" ./hack/testreport

# run STREAM P PACKAGES...: go test of the packages, P at a time.
# -ldflags=-w: the test binaries are linked without DWARF, which no test reads (stack traces come
# from the symbol table): about 2 s less per binary (docs/performance.md).
run() {
  local stream=$1 p=$2
  shift 2
  (($#)) || return 0
  # shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
  go_test "$stream" -p "$p" -count=1 -timeout 30m -ldflags=-w ${GO_TEST_FLAGS:-} "$@"
}

phase "go test: ${#free[@]} free packages (2 at a time) beside ${#lab[@]} lab packages (1 at a time), then ${#alone[@]} alone"
free_rc=0 lab_rc=0 alone_rc=0
# The free stream at a lower priority: the lab stream's emulated guests are the critical path
# and their tests wait on deadlines.
nice -n 10 bash -c "set -o pipefail; $(declare -f go_test run); run free 2 \"\$@\"" _ "${free[@]}" &
free_pid=$!
run lab 1 "${lab[@]}" || lab_rc=$?
wait "$free_pid" || free_rc=$?
phase "both streams are done; alone: ${alone[*]}"
run alone 1 "${alone[@]}" || alone_rc=$?

phase "results (every package's time; the streams overlapped)"
"$TESTREPORT" -table "$BANLIEUE_TEST_REPORT"/{free,lab,alone}.summary
echo "hack/test.sh: done in $((SECONDS - start))s (free rc=$free_rc, lab rc=$lab_rc, alone rc=$alone_rc)"
((free_rc == 0 && lab_rc == 0 && alone_rc == 0))
