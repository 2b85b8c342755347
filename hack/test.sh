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
#      BANLIEUE_LIBVIRT_LAB and BANLIEUE_LIBVIRT_PORT (the lab libvirtd's directory and port),
#      BANLIEUE_SHARED_LAB and BANLIEUE_SHARED_LAB_PORT (the shared lane's; default
#      /var/tmp/banlieue-lab-shared, 16515), BANLIEUE_MIGRATION_LAB and BANLIEUE_MIGRATION_BASE_PORT,
#      BANLIEUE_KEEP_LAB=1 leaves the libvirt lab running afterwards,
#      BANLIEUE_TEST_BINARY names a banlieue binary the tests run (default: `make build` here),
#      BANLIEUE_TEST_REPORT=DIR keeps the per-package results there (.ci/run's summary reads them),
#      BANLIEUE_TEST_STREAMS_DONE=FILE is created once the streams and test/hardening's chaos loop
#      are done (.ci/run starts its node suites then, on libvirtds of their own).
#
# The packages run in three streams beside each other, then one package alone
# (docs/testing.md, "How the suite runs"):
#   free    packages that need at most their own API server: two at a time, at a lower CPU
#           priority, beside the lab streams;
#   lab     packages that kill, restart or freeze the lab libvirtd to test what survives it:
#           one at a time, on the lab libvirtd (127.0.0.1:16514);
#   shared  the other packages that use a libvirtd or boot an emulated guest: one at a time, on a
#           second lab libvirtd of their own (127.0.0.1:16515), which nothing restarts;
#   alone   test/hardening, which freezes and kills the daemon and holds tight bounds on how soon
#           the roles recover: last, once the streams are done, with the lab libvirtd to itself
#           and none of this script's other packages beside it; its chaos loop first.
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
# What marks a package's tests as users of the two-host lab of hack/migration-lab.sh.
migration_marks='BANLIEUE_MIGRATION_LAB|NeedMigrationLab'
# What marks a package's tests as users of the lab libvirtd, of the migration lab or of an
# emulated guest.
lab_marks="RequireLibvirtLab|RequirePodLibvirtLab|LabFromEnv|needLab\\(|BANLIEUE_LIBVIRT|$migration_marks|qemu-system|cloud-guest|CloudGuest"
# What marks a lab package's tests as disturbing the daemon itself (restarting or freezing it).
disturb_marks='"hack", "libvirt-lab.sh"|restartLibvirtd|syscall.SIGSTOP'
# What marks a package as needing root (not in the quick loop).
root_marks='Geteuid'

free=() lab=() shared=() alone=() migration=()
classify() {
  local path dir
  while read -r path dir; do
    if ((quick)); then
      grep -qE "$root_marks" "$dir"/*_test.go || free+=("$path")
    elif [[ " ${alone_pkgs[*]} " == *" $path "* ]]; then
      alone+=("$path")
    elif grep -qE "$lab_marks" "$dir"/*_test.go; then
      if grep -qE "$disturb_marks" "$dir"/*_test.go; then
        lab+=("$path")
      else
        shared+=("$path")
      fi
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

# Each lab's env file exports BANLIEUE_LIBVIRT_LAB: the lab's directory is read before any is
# sourced, and the lab stream's env is sourced last, so the free and lab streams see it.
lab_dir=${BANLIEUE_LIBVIRT_LAB:-/var/tmp/banlieue-lab}
shared_lab=${BANLIEUE_SHARED_LAB:-/var/tmp/banlieue-lab-shared}
shared_port=${BANLIEUE_SHARED_LAB_PORT:-16515}
if ((${#lab[@]} + ${#shared[@]} + ${#alone[@]})); then
  if ((${#shared[@]})); then
    phase "the shared lane's libvirt lab host (TLS on 127.0.0.1:$shared_port)"
    BANLIEUE_LIBVIRT_PORT=$shared_port start_lab hack/libvirt-lab.sh "$shared_lab"
  fi
  if ((${#lab[@]} + ${#alone[@]})); then
    phase "libvirt lab host (libvirtd, TLS on 127.0.0.1:${BANLIEUE_LIBVIRT_PORT:-16514})"
    start_lab hack/libvirt-lab.sh "$lab_dir"
  fi
  if ((${#migration[@]})); then
    phase "the two-host migration lab (hack/migration-lab.sh: libvirtds on 127.0.0.1 from port ${BANLIEUE_MIGRATION_BASE_PORT:-17100})"
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
go list -test -export "${free[@]}" "${lab[@]}" "${shared[@]}" "${alone[@]}" >/dev/null 2>&1 || true

phase "the banlieue binary (make build), shared by the tests that run it"
# Built once here, where no test's deadline runs: a cold build of it (-trimpath shares nothing
# with the test builds) beside the streams took over ten minutes, and each package built its own.
if [[ -z ${BANLIEUE_TEST_BINARY:-} ]]; then
  bin_dir=${TMPDIR:-/tmp}/banlieue-test-bin-$(printf %s "$PWD" | sha256sum | cut -c1-8)
  mkdir -p "$bin_dir"
  # Renamed into place, so a process still running the previous binary keeps it.
  make --no-print-directory build BIN="$bin_dir/banlieue.new"
  mv -f "$bin_dir/banlieue.new" "$bin_dir/banlieue"
  export BANLIEUE_TEST_BINARY=$bin_dir/banlieue
fi
# Each package's result goes to the report directory, read by the table at the end (and by
# .ci/run's): a directory of this run's own unless BANLIEUE_TEST_REPORT names one.
# shellcheck source=lib/gotest.sh
source hack/lib/gotest.sh
export BANLIEUE_TEST_REPORT="${BANLIEUE_TEST_REPORT:-$(mktemp -d)}"
rm -f "$BANLIEUE_TEST_REPORT"/{free,lab,shared,alone}.summary{,.tests}
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

phase "go test: ${#free[@]} free packages (2 at a time) beside ${#lab[@]} lab and ${#shared[@]} shared-lab packages (1 at a time each), then ${#alone[@]} alone"
free_rc=0 lab_rc=0 shared_rc=0 alone_rc=0
# The free stream at a lower priority: the lab stream's emulated guests are the critical path
# and their tests wait on deadlines.
nice -n 10 bash -c "set -o pipefail; $(declare -f go_test run); run free 2 \"\$@\"" _ "${free[@]}" &
free_pid=$!
# The shared lane's packages reach the second lab through its env file (the endpoint names its
# port); without them there is no second lab to source.
shared_pid=
if ((${#shared[@]})); then
  bash -c "set -o pipefail; $(declare -f go_test run); source \"\$1/env\"; shift; run shared 1 \"\$@\"" _ "$shared_lab" "${shared[@]}" &
  shared_pid=$!
fi
run lab 1 "${lab[@]}" || lab_rc=$?
if [[ -n $shared_pid ]]; then wait "$shared_pid" || shared_rc=$?; fi
wait "$free_pid" || free_rc=$?
phase "the three streams are done; alone: ${alone[*]}"
# test/hardening's chaos loop holds its tightest bound (a machine realised within 3 s of its
# held start's completion, which a loaded machine misses), so it runs first, with the machine to
# itself; then the rest of the package, which .ci/run's node suites may join
# (BANLIEUE_TEST_STREAMS_DONE). A run narrowed by GO_TEST_FLAGS keeps its own -run.
rest=()
if ((${#alone[@]})) && [[ -z ${GO_TEST_FLAGS:-} ]]; then
  run alone 1 -run '^TestChaos' "${alone[@]}" || alone_rc=$?
  rest=(-skip '^TestChaos')
fi
if [[ -n ${BANLIEUE_TEST_STREAMS_DONE:-} ]]; then : >"$BANLIEUE_TEST_STREAMS_DONE"; fi
run alone 1 "${rest[@]}" "${alone[@]}" || alone_rc=$?

phase "results (every package's time; the streams overlapped)"
"$TESTREPORT" -table -slowest 25 "$BANLIEUE_TEST_REPORT"/{free,lab,shared,alone}.summary
echo "hack/test.sh: done in $((SECONDS - start))s (free rc=$free_rc, lab rc=$lab_rc, shared rc=$shared_rc, alone rc=$alone_rc)"
((free_rc == 0 && lab_rc == 0 && shared_rc == 0 && alone_rc == 0))
