#!/usr/bin/env bash
# The test suite against real parts: a real kube-apiserver + etcd (built from Go modules), a real
# libvirtd over mutual TLS on 127.0.0.1, and independent ISO readers. Run as root on Debian 12.
#
#   hack/test.sh                 everything
#   hack/test.sh ./pkg/libvirt/  only some packages (any `go test` package patterns)
#
# Env: GO_TEST_FLAGS (extra flags for go test, e.g. "-run TestAdmission -v"),
#      BANLIEUE_KEEP_LAB=1 leaves the libvirt lab running afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH:/usr/sbin:/sbin

phase() { printf '\n==> %s\n' "$*"; }

phase "Debian packages the tests read ISO images and boot guests with"
hack/install-test-deps.sh

phase "control-plane binaries (kube-apiserver, etcd, kubectl)"
KUBEBUILDER_ASSETS="$(hack/envtest-assets.sh | tail -1)"
export KUBEBUILDER_ASSETS
echo "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"

phase "helm, built from Go modules (for the chart tests in test/install)"
hack/helm.sh

phase "libvirt lab host (libvirtd, TLS on 127.0.0.1:16514)"
lab_dir="${BANLIEUE_LIBVIRT_LAB:-/var/tmp/banlieue-lab}"
lab_was_running=0
hack/libvirt-lab.sh status "$lab_dir" >/dev/null 2>&1 && lab_was_running=1
hack/libvirt-lab.sh start "$lab_dir"
if [[ $lab_was_running == 0 && -z "${BANLIEUE_KEEP_LAB:-}" ]]; then
  trap 'hack/libvirt-lab.sh stop "$lab_dir" || true' EXIT
fi
# shellcheck disable=SC1091
source "$lab_dir/env"

phase "the cloud guest (hack/cloud-guest.sh: debootstrap once, then cached)"
# Built here rather than inside test/e2e/cloudguest, so a cold build (minutes) is not spent
# against that package's go test timeout and its time shows on its own.
hack/cloud-guest.sh | tail -1

phase "go vet"
go vet ./...

phase "go test"
# Packages share one libvirtd, so they run one at a time (-p 1); within a package tests may
# still run in parallel. -p 1 limits the builds too, so the test packages are compiled first
# with the machine's parallelism into Go's build cache (go list -export compiles without
# linking; a second through a warm cache): on a fresh machine, compiled one at a time, they made
# hack/test.sh 13 minutes longer than with a warm build cache (docs/performance.md, "The whole
# CI"). A package that does not compile is reported by go test, in its place.
go list -test -export "${@:-./...}" >/dev/null 2>&1 || true
# -ldflags=-w: the test binaries are linked without DWARF, which no test reads (stack traces come
# from the symbol table): 8 of the largest linked in 40 s instead of 56 (docs/performance.md).
# shellcheck disable=SC2086
go test -p 1 -count=1 -timeout 30m -ldflags=-w ${GO_TEST_FLAGS:-} "${@:-./...}"
