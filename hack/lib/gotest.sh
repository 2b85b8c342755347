# shellcheck shell=bash
# shellcheck source=toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.sh"
# go_test NAME ARGS...: `go test -json ARGS` read by hack/testreport, which prints a line per
# package and the whole output of whatever failed; with BANLIEUE_TEST_REPORT set, each package's
# result is appended to $BANLIEUE_TEST_REPORT/NAME.summary for .ci/run's closing table. Fails when
# a test, a package or a build failed. Run from the repository's root.
# envtest gives a control plane 20 s to start by default; with the free packages' API servers,
# the lab stream's guests and the background builds sharing two cores, a start took longer
# (kube-apiserver "timeout waiting for process ... to start", five retries). A slow start is not
# what any test checks.
export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT=${KUBEBUILDER_CONTROLPLANE_START_TIMEOUT:-120s}
go_test() {
  local name=$1 dir=${BANLIEUE_TEST_REPORT:-} summary=()
  shift
  if [[ ! -x ${TESTREPORT:-} ]]; then
    TESTREPORT="$(mktemp -d)/testreport"
    go build -o "$TESTREPORT" ./hack/testreport
  fi
  if [[ -n $dir ]]; then
    mkdir -p "$dir"
    summary=(-summary "$dir/$name.summary")
  fi
  go test -json "$@" 2>&1 | "$TESTREPORT" "${summary[@]}"
}
