#!/usr/bin/env bash
# The real-node suite (test/node, build tag node) from empty node state, as CI runs it: a control
# plane of its own (hack/labcluster, CRDs installed, nothing else of banlieue, so the chart
# installs into it), the node (hack/node.sh), the libvirt lab host, then `go test -tags node` of
# test/node and of the image controller's suites on the node (internal/provider/libvirt/image,
# node_suite_test.go); afterwards the node and the control plane are stopped and their state
# removed. Run as root.
#
#   hack/node-test.sh            GO_TEST_FLAGS: extra go test flags for test/node (e.g. "-run TestHelm");
#                                IMAGE_SUITE_FLAGS: for the image controller's (a later -run wins)
#
# Env: BANLIEUE_NODE_DIR (default /var/tmp/banlieue-node), BANLIEUE_LIBVIRT_LAB (the lab host).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/gotest.sh
source hack/lib/gotest.sh
export PATH=/usr/local/go/bin:$PATH:/usr/sbin:/sbin

# Run under `flock` (the test lock), the control plane must not inherit the lock's descriptor
# either (hack/node.sh closes them for the node's daemons). 255 is bash's own script fd.
for fd in "/proc/$$/fd/"*; do
  fd=${fd##*/}
  if [[ "$fd" -gt 2 && "$fd" -ne 255 ]]; then eval "exec $fd>&-" 2>/dev/null || true; fi
done

node_dir="${BANLIEUE_NODE_DIR:-/var/tmp/banlieue-node}"
libvirt_lab="${BANLIEUE_LIBVIRT_LAB:-/var/tmp/banlieue-lab}"
plane="$(mktemp -d /var/tmp/banlieue-node-plane.XXXXXX)"
start=$SECONDS

# Leftovers must never make the suite green: an earlier node is stopped and its state (images
# included) removed first.
hack/node.sh down >/dev/null 2>&1 || true
rm -rf "${node_dir:?}"

KUBEBUILDER_ASSETS="$(hack/envtest-assets.sh | tail -1)"
export KUBEBUILDER_ASSETS
go build -o "$plane/labcluster" ./hack/labcluster
"$plane/labcluster" --write-kubeconfig "$plane/kubeconfig" --crds config/crd/bases >"$plane/labcluster.log" 2>&1 &
echo $! >"$plane/labcluster.pid"
cleanup() {
  hack/node.sh down || true
  kill "$(cat "$plane/labcluster.pid")" 2>/dev/null || true
  wait "$(cat "$plane/labcluster.pid")" 2>/dev/null || true
  rm -rf "${plane:?}" "${node_dir:?}"
}
trap cleanup EXIT
for _ in $(seq 120); do [[ -s "$plane/kubeconfig" ]] && break; sleep 0.5; done
[[ -s "$plane/kubeconfig" ]] || { tail -20 "$plane/labcluster.log"; echo "node-test: control plane did not start" >&2; exit 1; }

hack/node.sh up "$plane/kubeconfig"
hack/libvirt-lab.sh start "$libvirt_lab"
# shellcheck disable=SC1091
source "$libvirt_lab/env"
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go_test node -tags node -count=1 -p 1 ${GO_TEST_FLAGS:-} ./test/node/
# The image controller's suites whose import Jobs must run as pods (node_suite_test.go): after
# test/node, whose installs they would collide with; their other, envtest suites run in hack/test.sh.
# shellcheck disable=SC2086 # IMAGE_SUITE_FLAGS is a list of flags
go_test node -tags node -count=1 -run 'OnTheRealNode$' ${IMAGE_SUITE_FLAGS:-} ./internal/provider/libvirt/image/
echo "node-test: done in $((SECONDS - start))s"
