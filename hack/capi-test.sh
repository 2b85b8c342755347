#!/usr/bin/env bash
# Cluster API's end-to-end suite (test/capi, build tag capi), as CI runs it: Cluster API's core
# manager built from the Go module proxy (hack/capi-assets.sh, cached), kube-controller-manager
# (hack/node-assets.sh, for RBAC aggregation), the envtest binaries, the libvirt lab host, the
# test guest and the cloud guest (hack/cloud-guest.sh), then `go test -tags capi`. Run as root.
#
#   hack/capi-test.sh            GO_TEST_FLAGS: extra go test flags (e.g. "-run TestManager -v")
#
# Env: BANLIEUE_LIBVIRT_LAB (the lab host, default /var/tmp/banlieue-lab).
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"
cd "$(dirname "$0")/.."
# shellcheck source=lib/gotest.sh
source hack/lib/gotest.sh
export PATH=/usr/local/go/bin:$PATH:/usr/sbin:/sbin
start=$SECONDS

# Built here rather than inside the test, so a cold build (minutes) is not spent against the
# package's go test timeout and its time shows on its own.
hack/capi-assets.sh | tail -1
hack/node-assets.sh | tail -1 # kube-controller-manager, for RBAC aggregation
KUBEBUILDER_ASSETS="$(hack/envtest-assets.sh | tail -1)"
export KUBEBUILDER_ASSETS
hack/test-guest-image.sh | tail -1
hack/cloud-guest.sh | tail -1 # the cloud guest of the addresses case (cached)

libvirt_lab="${BANLIEUE_LIBVIRT_LAB:-/var/tmp/banlieue-lab}"
lab_was_running=0
hack/libvirt-lab.sh status "$libvirt_lab" >/dev/null 2>&1 && lab_was_running=1
hack/libvirt-lab.sh start "$libvirt_lab"
if [[ $lab_was_running == 0 ]]; then
  trap 'hack/libvirt-lab.sh stop "$libvirt_lab" || true' EXIT
fi
# shellcheck disable=SC1091
source "$libvirt_lab/env"
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go_test capi -tags capi -count=1 -p 1 -timeout 20m ${GO_TEST_FLAGS:-} ./test/capi/
echo "capi-test: done in $((SECONDS - start))s"
