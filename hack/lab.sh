#!/usr/bin/env bash
# The local lab: banlieue doing its job on this machine, with nothing to set up by hand.
#
#   hack/lab.sh up      as root on Debian 12: control plane, a libvirt host with TLS, the CRDs,
#                       the guide's credentials Secret and CA ConfigMap, a Provider for the
#                       host, and the banlieue roles running as local processes
#   hack/lab.sh status  what runs, and the banlieue objects
#   hack/lab.sh down    stops exactly what `up` started
#
# Env: BANLIEUE_LAB_DIR (default /var/tmp/banlieue-lab-cluster): kubeconfig, logs, PID files.
#      BANLIEUE_LIBVIRT_LAB (default /var/tmp/banlieue-lab): the libvirt host's state.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH:/usr/sbin:/sbin

lab="${BANLIEUE_LAB_DIR:-/var/tmp/banlieue-lab-cluster}"
libvirt_lab="${BANLIEUE_LIBVIRT_LAB:-/var/tmp/banlieue-lab}"
kubeconfig="$lab/kubeconfig"
provider=lab-host
namespace=banlieue-system

phase_start=0
phase() { phase_start=$SECONDS; printf '==> %s\n' "$*"; }
done_phase() { printf '    done in %ss\n' "$((SECONDS - phase_start))"; }
running() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

kubectl() { "$assets/kubectl" --kubeconfig "$kubeconfig" "$@"; }

# start NAME CMD...: runs CMD in the background once, logging to $lab/NAME.log.
start() {
  local name=$1; shift
  if running "$lab/$name.pid"; then
    echo "    $name already running (pid $(cat "$lab/$name.pid"))"
    return
  fi
  "$@" >"$lab/$name.log" 2>&1 &
  echo $! >"$lab/$name.pid"
  echo "    $name started (pid $!, log $lab/$name.log)"
}

stop() {
  local name=$1
  if running "$lab/$name.pid"; then
    kill "$(cat "$lab/$name.pid")" 2>/dev/null || true
    for _ in $(seq 50); do running "$lab/$name.pid" || break; sleep 0.2; done
    echo "stopped $name"
  fi
  rm -f "$lab/$name.pid"
}

up() {
  mkdir -p "$lab"
  phase "Debian packages"
  hack/install-test-deps.sh
  done_phase

  phase "control-plane binaries (cached under ~/.cache/banlieue; ~10 min the first time)"
  assets="$(hack/envtest-assets.sh | tail -1)"
  done_phase

  phase "banlieue binary"
  make --no-print-directory build >/dev/null
  go build -o "$lab/labcluster" ./hack/labcluster
  done_phase

  phase "control plane: etcd + kube-apiserver on loopback"
  if ! running "$lab/labcluster.pid"; then
    rm -f "$kubeconfig"
    KUBEBUILDER_ASSETS="$assets" start labcluster "$lab/labcluster" --write-kubeconfig "$kubeconfig" --crds config/crd/bases
    for _ in $(seq 120); do [[ -s "$kubeconfig" ]] && break; running "$lab/labcluster.pid" || break; sleep 0.5; done
    [[ -s "$kubeconfig" ]] || { tail -20 "$lab/labcluster.log"; echo "control plane failed to start" >&2; exit 1; }
  fi
  echo "    kubeconfig: $kubeconfig"
  done_phase

  phase "libvirt host: libvirtd with mutual TLS on 127.0.0.1:16514"
  hack/libvirt-lab.sh start "$libvirt_lab"
  # shellcheck disable=SC1091
  source "$libvirt_lab/env"
  done_phase

  phase "banlieue objects: CRDs, RBAC, namespaces, credentials, Provider"
  kubectl apply --server-side --force-conflicts -f config/crd/bases >/dev/null
  # The namespaces first: the imagebuilder's role file also holds its Role in banlieue-imagebuild.
  for ns in banlieue-system banlieue-imagebuild; do
    kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply --server-side --force-conflicts -f - >/dev/null
  done
  for role in config/rbac/*/role.yaml; do kubectl apply --server-side --force-conflicts -f "$role" >/dev/null; done
  # The guide's step 2, from the lab host's client credentials.
  kubectl -n "$namespace" create secret generic libvirt-lab-creds \
    --from-file=tls.crt="$BANLIEUE_LIBVIRT_PKI/clientcert.pem" \
    --from-file=tls.key="$BANLIEUE_LIBVIRT_PKI/clientkey.pem" \
    --dry-run=client -o yaml | kubectl apply --server-side --force-conflicts -f - >/dev/null
  kubectl -n "$namespace" create configmap libvirt-lab-ca \
    --from-file=ca.crt="$BANLIEUE_LIBVIRT_PKI/cacert.pem" \
    --dry-run=client -o yaml | kubectl apply --server-side --force-conflicts -f - >/dev/null
  kubectl apply --server-side --force-conflicts -f examples/09-providerclass-libvirt.yaml >/dev/null
  kubectl apply --server-side --force-conflicts -f - >/dev/null <<YAML
apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata:
  name: $provider
  namespace: $namespace
spec:
  providerClassRef: {name: libvirt}
  connection:
    endpoint: $BANLIEUE_LIBVIRT_ENDPOINT
    credentialsRef: {name: libvirt-lab-creds}
    caBundle: {configMapRef: {name: libvirt-lab-ca}}
  capabilities:
    storageClasses:
      - {name: standard, target: {pool: lab}}
YAML
  ensure_lab_pool
  done_phase

  phase "banlieue roles as local processes"
  # Restarted on every up, so they always run the binary just built.
  stop provider-libvirt >/dev/null
  stop controller >/dev/null
  # Local development: plain /metrics on 127.0.0.1, so `curl localhost:18080/metrics` reads it
  # (docs/operations.md, "Metrics"); in a cluster the roles keep the default, HTTPS with a token.
  local common=(--kubeconfig "$kubeconfig" --no-leader-elect --log-format text --metrics-secure=false)
  start controller bin/banlieue controller "${common[@]}" --health-port 18081 --metrics-port 18080
  start provider-libvirt bin/banlieue provider libvirt "${common[@]}" --provider-name "$provider" \
    --import-service-account "$provider-import" --namespace "$namespace" --health-port 18083 --metrics-port 18082
  done_phase

  phase "waiting for the Provider to verify the host"
  wait_for "Provider $provider Ready" 60 kubectl -n "$namespace" get provider "$provider" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
  done_phase

  phase "guest image: a tiny Linux from Debian packages (cached after the first build)"
  local guest
  guest="$(hack/test-guest-image.sh | tail -1)/guest.raw"
  echo "    $guest"
  done_phase

  phase "importing the image onto the host (the guide's 'Running an import by hand')"
  bin/banlieue provider libvirt import --kubeconfig "$kubeconfig" \
    --vmimage lab-guest --provider "$provider" --provider-namespace "$namespace" \
    --pool lab --source "$guest"
  done_phase

  phase "VMImage, VMClass and VirtualMachine (hack/lab/virtualmachine.yaml)"
  kubectl apply --server-side --force-conflicts -f hack/lab/virtualmachine.yaml
  wait_for "VirtualMachine lab-vm-01 Ready" 180 kubectl -n "$namespace" get virtualmachine lab-vm-01 \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
  done_phase
  status
}

# wait_for WHAT SECONDS CMD...: polls CMD until it prints True.
wait_for() {
  local what=$1 seconds=$2; shift 2
  for _ in $(seq "$seconds"); do
    [[ "$("$@" 2>/dev/null)" == True ]] && return 0
    sleep 1
  done
  echo "    timed out waiting for $what; see $lab/*.log" >&2
  return 1
}

# ensure_lab_pool gives the lab host the dir pool "lab" the Provider maps standard to.
ensure_lab_pool() {
  local pki="pkipath=$BANLIEUE_LIBVIRT_PKI"
  local uri="qemu+tls://127.0.0.1/system?$pki"
  if ! virsh -c "$uri" pool-info lab >/dev/null 2>&1; then
    mkdir -p "$libvirt_lab/pools/lab"
    virsh -c "$uri" pool-define-as lab dir --target "$libvirt_lab/pools/lab" >/dev/null
    virsh -c "$uri" pool-start lab >/dev/null
  fi
}

status() {
  assets="${assets:-$(hack/envtest-assets.sh | tail -1)}"
  for name in labcluster controller provider-libvirt; do
    if running "$lab/$name.pid"; then echo "$name: running (pid $(cat "$lab/$name.pid"), log $lab/$name.log)"
    else echo "$name: stopped"; fi
  done
  if [[ -s "$kubeconfig" ]] && running "$lab/labcluster.pid"; then
    echo
    echo "\$ kubectl --kubeconfig $kubeconfig get banlieue -A"
    kubectl get banlieue -A
    echo
    echo "\$ kubectl --kubeconfig $kubeconfig get virtualmachine,libvirtmachine -A"
    kubectl get virtualmachine,libvirtmachine -A
    echo
    echo "\$ virsh -c 'qemu+tls://127.0.0.1/system?pkipath=$libvirt_lab/pki' list --all"
    virsh -c "qemu+tls://127.0.0.1/system?pkipath=$libvirt_lab/pki" list --all
    local domain="$namespace-lab-vm-01"
    echo "serial console log of $domain: $libvirt_lab/state/log/qemu/$domain-serial.log"
    echo "  (on the host it is /var/log/libvirt/qemu/$domain-serial.log; the lab keeps libvirt's state under $libvirt_lab/state)"
  fi
}

down() {
  for name in provider-libvirt controller labcluster; do stop "$name"; done
  hack/libvirt-lab.sh stop "$libvirt_lab"
  rm -f "$kubeconfig"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: hack/lab.sh up|status|down" >&2; exit 2 ;;
esac
