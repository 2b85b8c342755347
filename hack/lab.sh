#!/usr/bin/env bash
# The local lab: banlieue installed and doing its job on this machine as a user's cluster runs
# it, with nothing to set up by hand (docs/guides/real-node.md).
#
#   hack/lab.sh up      as root on Debian 12: control plane, a libvirt host with TLS, the real
#                       node (kubelet, containerd, kube-proxy; hack/node.sh), the release's image
#                       and chart (hack/release.sh) installed with helm, the guide's credentials
#                       Secret and CA ConfigMap, a Provider for the host, and the guide's image
#                       flow: a VMImage of kind Url served over https (hack/labsource), its build
#                       and import Jobs run as pods, then a VirtualMachine of the real cloud guest
#                       (hack/cloud-guest.sh) on a libvirt NAT network, waited for until it has an
#                       IPv4 address and GuestReady=True; beside it a vCenter simulated by vcsim
#                       (hack/labsource --vcenter), a vsphere Provider for it and a VirtualMachine
#                       cloned there (hack/lab/vsphere.yaml), waited for until Ready
#   hack/lab.sh status  what runs, and the banlieue objects
#   hack/lab.sh down    stops exactly what `up` started, the NAT network and its bridge included
#
# Env: BANLIEUE_LAB_DIR (default /var/tmp/banlieue-lab-cluster): kubeconfig, logs, PID files,
#      the release artifacts. BANLIEUE_LIBVIRT_LAB (default /var/tmp/banlieue-lab): the libvirt
#      host's state, BANLIEUE_LIBVIRT_PORT (default 16514) its TLS port. BANLIEUE_NODE_DIR (default /var/tmp/banlieue-node): the node's.
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH:/usr/sbin:/sbin

# The lab's daemons must not inherit the caller's descriptors (the test lock, under flock), as
# hack/node.sh's. 255 is bash's own script fd.
for fd in "/proc/$$/fd/"*; do
  fd=${fd##*/}
  if [[ "$fd" -gt 2 && "$fd" -ne 255 ]]; then eval "exec $fd>&-" 2>/dev/null || true; fi
done

lab="${BANLIEUE_LAB_DIR:-/var/tmp/banlieue-lab-cluster}"
libvirt_lab="${BANLIEUE_LIBVIRT_LAB:-/var/tmp/banlieue-lab}"
node_dir="${BANLIEUE_NODE_DIR:-/var/tmp/banlieue-node}"
export BANLIEUE_NODE_DIR="$node_dir"
kubeconfig="$lab/kubeconfig"
provider="lab-host"
namespace=banlieue-system
build_namespace=banlieue-imagebuild
# One fixed version: every up retags one image in the node instead of one per commit.
version=v0.0.0-lab
image=registry.example/banlieue:$version
# The guest's https source, on the node's bridge (where pods reach the host);
# hack/lab/virtualmachine.yaml's importFrom names it.
source_listen=10.244.0.1:18443
# The lab vCenter (vcsim, served by labsource with the same certificate); hack/lab/vsphere.yaml's
# Provider names it.
vcenter_listen=10.244.0.1:18989
vsphere_vm="lab-vm-vsphere"
# The VM's network: a libvirt NAT network with DHCP on the lab host, behind the Provider's network
# class "nat". Its /24 is in 198.18.0.0/15 (RFC 2544, nobody's real network) beside the suites'
# 198.18.64.x and 198.18.65.x, so a lab left up does not collide with them; the node's pods are
# on 10.244.0.0/24.
nat_network=banlieue-lab-nat
nat_bridge=banlieue-lab0
nat_subnet=198.18.66.
vm="lab-vm-01"
domain=$namespace-$vm

phase_start=0
phase() { phase_start=$SECONDS; printf '==> %s\n' "$*"; }
done_phase() { printf '    done in %ss\n' "$((SECONDS - phase_start))"; }
running() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

kubectl() { "$assets/kubectl" --kubeconfig "$kubeconfig" "$@"; }
# The lab host's TLS port: 16514 unless BANLIEUE_LIBVIRT_PORT names another (hack/libvirt-lab.sh).
libvirt_host=127.0.0.1
[[ ${BANLIEUE_LIBVIRT_PORT:-16514} == 16514 ]] || libvirt_host=127.0.0.1:$BANLIEUE_LIBVIRT_PORT
lab_virsh_uri="qemu+tls://$libvirt_host/system?pkipath=$libvirt_lab/pki"
lab_virsh() { virsh -c "$lab_virsh_uri" "$@"; }
# A private helm home under the lab directory: no repositories or config of the user.
helm() {
  HELM_CONFIG_HOME="$lab/helm/config" HELM_CACHE_HOME="$lab/helm/cache" HELM_DATA_HOME="$lab/helm/data" \
    "$helm_bin" --kubeconfig "$kubeconfig" "$@"
}

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
  local total=$SECONDS
  phase "Debian packages"
  hack/install-test-deps.sh
  done_phase

  phase "control-plane binaries (cached under ~/.cache/banlieue; ~10 min the first time)"
  assets="$(hack/envtest-assets.sh | tail -1)"
  helm_bin="$(hack/helm.sh | tail -1)"
  go build -o "$lab/labcluster" ./hack/labcluster
  go build -o "$lab/labsource" ./hack/labsource
  done_phase

  phase "control plane: etcd + kube-apiserver (advertised on the node's bridge), the CRDs"
  if ! running "$lab/labcluster.pid"; then
    rm -f "$kubeconfig"
    KUBEBUILDER_ASSETS="$assets" start labcluster "$lab/labcluster" --write-kubeconfig "$kubeconfig" --crds config/crd/bases
    for _ in $(seq 120); do [[ -s "$kubeconfig" ]] && break; running "$lab/labcluster.pid" || break; sleep 0.5; done
    [[ -s "$kubeconfig" ]] || { tail -20 "$lab/labcluster.log"; echo "control plane failed to start" >&2; exit 1; }
  fi
  echo "    kubeconfig: $kubeconfig"
  done_phase

  phase "libvirt host: libvirtd with mutual TLS on ${BANLIEUE_LIBVIRT_PORT:-16514} (127.0.0.1 here, 10.244.0.1 from pods)"
  hack/libvirt-lab.sh start "$libvirt_lab"
  # shellcheck disable=SC1091
  source "$libvirt_lab/env"
  # Before the Provider, which must find the network its class names.
  start_nat_network
  done_phase

  phase "the real node (hack/node.sh): kubelet, containerd 2, kube-proxy, controller-manager, scheduler"
  hack/node.sh up "$kubeconfig" | sed 's/^/    /'
  done_phase

  phase "release artifacts (hack/release.sh): the chart and the image, the image into the node"
  VERSION="$version" IMAGE="$image" DIST="$lab/release" hack/release.sh >/dev/null 2>"$lab/release.log" ||
    { tail -20 "$lab/release.log"; exit 1; }
  hack/node.sh import "$lab/release/banlieue-image.tar" >/dev/null
  local chart="$lab/release/banlieue-${version#v}.tgz"
  echo "    $chart, $image"
  done_phase

  phase "the artifacts PVC's volume: a local PersistentVolume on the node"
  artifacts_volume
  done_phase

  phase "guest image (hack/cloud-guest.sh: Debian 12, cloud-init, qemu-guest-agent, UEFI; cached, ~2 min the first time) and its https source"
  local guest
  guest="$(hack/cloud-guest.sh | tail -1)"
  start labsource "$lab/labsource" --dir "$guest" --listen "$source_listen" --pki "$lab/source-pki" \
    --vcenter "$vcenter_listen"
  for _ in $(seq 100); do grep -q '^vcenter https://' "$lab/labsource.log" && break; running "$lab/labsource.pid" || break; sleep 0.2; done
  grep -q '^vcenter https://' "$lab/labsource.log" || { cat "$lab/labsource.log"; echo "labsource did not start" >&2; exit 1; }
  echo "    https://$source_listen/cloud.raw"
  echo "    the lab vCenter (vcsim): https://$vcenter_listen/sdk"
  done_phase

  phase "helm install of the release's chart (docs/guides/install.md)"
  # The CRDs are the control plane's (hack/labcluster --crds), so the chart installs none and
  # renders the ProviderClass at once. The image is in the node, never pulled. The source's CA
  # reaches the builds through the documented trust option, its address through the allow-list.
  helm upgrade --install banlieue "$chart" --namespace "$namespace" --create-namespace \
    -f examples/helm/values-single-node.yaml --set crds.enabled=false --set image.pullPolicy=Never \
    --set imagebuilder.jobs.caBundleConfigMap=lab-source-ca --set "imagebuilder.limits.allowNetworks={${source_listen%:*}/32}" \
    --wait --timeout 5m >/dev/null
  # The ConfigMap the trust option names, in the build namespace the chart made.
  kubectl -n "$build_namespace" create configmap lab-source-ca --from-file=ca.crt="$lab/source-pki/ca.crt" \
    --dry-run=client -o yaml | kubectl apply --server-side --force-conflicts -f - >/dev/null
  kubectl -n "$namespace" get deployments | sed 's/^/    /'
  done_phase

  phase "the guide's step 2 and 4: credentials Secret, CA ConfigMap, a Provider for the host"
  kubectl -n "$namespace" create secret generic libvirt-lab-creds \
    --from-file=tls.crt="$BANLIEUE_LIBVIRT_PKI/clientcert.pem" \
    --from-file=tls.key="$BANLIEUE_LIBVIRT_PKI/clientkey.pem" \
    --dry-run=client -o yaml | kubectl apply --server-side --force-conflicts -f - >/dev/null
  kubectl -n "$namespace" create configmap libvirt-lab-ca \
    --from-file=ca.crt="$BANLIEUE_LIBVIRT_PKI/cacert.pem" \
    --dry-run=client -o yaml | kubectl apply --server-side --force-conflicts -f - >/dev/null
  ensure_lab_pool
  kubectl apply --server-side --force-conflicts -f - >/dev/null <<YAML
apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata:
  name: $provider
  namespace: $namespace
spec:
  providerClassRef: {name: libvirt}
  connection:
    endpoint: $BANLIEUE_LIBVIRT_POD_ENDPOINT
    credentialsRef: {name: libvirt-lab-creds}
    caBundle: {configMapRef: {name: libvirt-lab-ca}}
  capabilities:
    storageClasses:
      - {name: standard, target: {pool: lab}}
    networkClasses:
      - {name: nat, target: {network: $nat_network}}
YAML
  wait_for "Provider $provider Ready (its pod, made by the operator, probes the host)" 180 \
    kubectl -n "$namespace" get provider "$provider" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
  done_phase

  phase "the vSphere backend (hack/lab/vsphere.yaml): the lab vCenter's Secret and CA, a vsphere Provider, a VM"
  # The password from labsource's file, never on a command line.
  kubectl -n "$namespace" create secret generic lab-vcenter-creds \
    --from-literal=username=banlieue@vsphere.local --from-file=password="$lab/source-pki/vcenter-password" \
    --dry-run=client -o yaml | kubectl apply --server-side --force-conflicts -f - >/dev/null
  kubectl -n "$namespace" create configmap lab-vcenter-ca --from-file=ca.crt="$lab/source-pki/ca.crt" \
    --dry-run=client -o yaml | kubectl apply --server-side --force-conflicts -f - >/dev/null
  kubectl apply --server-side --force-conflicts -f hack/lab/vsphere.yaml >/dev/null
  wait_for "Provider lab-vcenter Ready (its pod, made by the operator, reads vCenter's inventory)" 180 \
    kubectl -n "$namespace" get provider lab-vcenter -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
  echo "    failure domains: $(kubectl -n "$namespace" get provider lab-vcenter -o jsonpath='{.status.failureDomains[*].name}')"
  done_phase

  phase "VMImage (kind Url), VMClass and VirtualMachine (hack/lab/virtualmachine.yaml)"
  kubectl apply --server-side --force-conflicts -f hack/lab/virtualmachine.yaml
  wait_for "VMImage lab-guest built (its build Job's pod wrote the artifact)" 300 \
    kubectl get vmimage lab-guest -o jsonpath='{.status.buildArtifact.phase}' --for-value Ready
  echo "    built after $((SECONDS - phase_start))s"
  wait_for "VirtualMachine $vm Ready (imported, domain running)" 300 kubectl -n "$namespace" get virtualmachine "$vm" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
  local running_at=$SECONDS
  echo "    Ready after $((SECONDS - phase_start))s"
  # The guest's own word, through its agent: cloud-init's final stage is over (ADR-0043). Under
  # software emulation the Debian guest takes about a minute and a half to get there.
  wait_for "VirtualMachine $vm GuestReady (cloud-init done, reported by qemu-guest-agent)" 600 \
    kubectl -n "$namespace" get virtualmachine "$vm" -o jsonpath='{.status.conditions[?(@.type=="GuestReady")].status}'
  wait_for "VirtualMachine $vm's IPv4 address in status.addresses" 120 vm_has_ipv4
  echo "    GuestReady with an address $((SECONDS - phase_start))s after the apply ($((SECONDS - running_at))s after Ready)"
  echo "    \$ kubectl -n $build_namespace get jobs -l banlieue.io/vmimage=lab-guest"
  kubectl -n "$build_namespace" get jobs -l banlieue.io/vmimage=lab-guest | sed 's/^/    /'
  # vcsim runs no guest: the clone is Ready (cloned, powered on), never GuestReady.
  wait_for "VirtualMachine $vsphere_vm Ready on the lab vCenter (cloned from the template, powered on)" 180 \
    kubectl -n "$namespace" get virtualmachine "$vsphere_vm" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
  done_phase
  status
  how_to_see
  echo "lab up in $((SECONDS - total))s"
}

# start_nat_network starts the lab's NAT network on the lab libvirtd, the same network
# labhost.StartNATNetwork starts for the suites (internal/testenv/labhost/network.go): libvirtd
# makes the bridge, runs its dnsmasq (leases .100 to .199) and adds its NAT rules. Defined and
# autostarted, not transient: a lab libvirtd that restarts (a crash, a host repair) brings the
# network back by itself and the Provider's network class stays satisfied; down undefines it.
# banlieue itself never starts networks: it only attaches NICs to the network its Provider's
# class names.
start_nat_network() {
  local info
  if ! lab_virsh net-info "$nat_network" >/dev/null 2>&1; then
    cat >"$lab/nat-network.xml" <<XML
<network><name>$nat_network</name><forward mode='nat'/><bridge name='$nat_bridge' stp='off'/><ip address='${nat_subnet}1' netmask='255.255.255.0'><dhcp><range start='${nat_subnet}100' end='${nat_subnet}199'/></dhcp></ip></network>
XML
    lab_virsh net-define "$lab/nat-network.xml" >/dev/null
  fi
  info=$(lab_virsh net-info "$nat_network")
  if grep -q '^Persistent: *no' <<<"$info"; then
    # A transient network of an older lab: made persistent in place.
    lab_virsh net-dumpxml "$nat_network" >"$lab/nat-network.xml"
    lab_virsh net-define "$lab/nat-network.xml" >/dev/null
  fi
  lab_virsh net-autostart "$nat_network" >/dev/null
  if grep -q '^Active: *yes' <<<"$info"; then
    echo "    network $nat_network already active"
    return
  fi
  lab_virsh net-start "$nat_network" >/dev/null
  echo "    network $nat_network: NAT, DHCP, bridge $nat_bridge, ${nat_subnet}0/24, autostarted"
}

# stop_nat_network destroys and undefines the network (libvirtd removes its bridge, dnsmasq and
# NAT rules). A libvirtd that stopped with the network up left them behind: hack/libvirt-lab.sh
# stop removes those, for every network its libvirtd had started.
stop_nat_network() {
  if hack/libvirt-lab.sh status "$libvirt_lab" >/dev/null 2>&1 &&
    lab_virsh net-info "$nat_network" >/dev/null 2>&1; then
    lab_virsh net-destroy "$nat_network" >/dev/null 2>&1 || true
    lab_virsh net-undefine "$nat_network" >/dev/null 2>&1 || true
    echo "stopped network $nat_network"
  fi
}

# vm_ipv4 prints the VirtualMachine's first IPv4 address from status.addresses.
vm_ipv4() {
  kubectl -n "$namespace" get virtualmachine "$vm" -o jsonpath='{range .status.addresses[*]}{.address}{"\n"}{end}' |
    grep -m1 -E '^([0-9]{1,3}\.){3}[0-9]{1,3}$'
}
vm_has_ipv4() { vm_ipv4 >/dev/null && echo True; }

# how_to_see prints what the user-data did and the commands that show the VM, each of which
# works against this lab as printed.
how_to_see() {
  local address serial="$libvirt_lab/state/log/qemu/$domain-serial.log"
  address="$(vm_ipv4)"
  echo
  echo "The VM $namespace/$vm runs the Debian 12 cloud guest at $address (DHCP on $nat_network)."
  # The console log reaches the host a little after the guest wrote it.
  for _ in $(seq 20); do grep -qa 'BANLIEUE-LAB' "$serial" 2>/dev/null && break; sleep 0.5; done
  echo "Its user-data's runcmd said on the serial console:"
  grep -ao 'BANLIEUE-LAB.*' "$serial" | tr -d '\r' | tail -1 | sed 's/^/    /' || echo "    (nothing yet in $serial)"
  echo
  echo "The VM $namespace/$vsphere_vm is a clone of the lab vCenter's template (vcsim, https://$vcenter_listen/sdk),"
  echo "Ready and powered on there: kubectl get vspheremachine -A shows its failure domain."
  echo
  echo "See it:"
  echo "    export KUBECONFIG=$kubeconfig"
  echo "    $assets/kubectl -n $namespace get virtualmachine $vm"
  echo "    $assets/kubectl -n $namespace get virtualmachine $vm -o jsonpath='{.status.addresses}'"
  echo "    virsh -c '$lab_virsh_uri' net-dhcp-leases $nat_network   # $address's lease"
  echo "    grep -a BANLIEUE-LAB $serial"
  echo "    virsh -c '$lab_virsh_uri' console $domain   # the serial console; Ctrl-] leaves"
}

# artifacts_volume gives the chart's artifacts PVC (banlieue-imagebuild/banlieue-artifacts) a
# local PersistentVolume under the node's directory, pre-bound to it, as a single-node
# cluster's local-path provisioner would. The build pod's fsGroup makes it writable for the
# non-root build.
artifacts_volume() {
  mkdir -p "$node_dir/artifacts"
  kubectl apply --server-side --force-conflicts -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata:
  name: banlieue-lab-artifacts
spec:
  capacity: {storage: 20Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  claimRef: {namespace: $build_namespace, name: banlieue-artifacts}
  local: {path: $node_dir/artifacts}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: kubernetes.io/hostname, operator: In, values: [${BANLIEUE_NODE_NAME:-banlieue-node}]}
YAML
  echo "    PersistentVolume banlieue-lab-artifacts at $node_dir/artifacts"
}

# wait_for WHAT SECONDS CMD... [--for-value VALUE]: polls CMD until it prints VALUE (True).
wait_for() {
  local what=$1 seconds=$2 want=True; shift 2
  local cmd=("$@")
  if (($# >= 2)) && [[ "${cmd[-2]}" == --for-value ]]; then
    want="${cmd[-1]}"
    cmd=("${cmd[@]:0:$(($# - 2))}")
  fi
  for _ in $(seq "$seconds"); do
    [[ "$("${cmd[@]}" 2>/dev/null)" == "$want" ]] && return 0
    sleep 1
  done
  echo "    timed out waiting for $what; see $lab/*.log" >&2
  return 1
}

# ensure_lab_pool gives the lab host the dir pool "lab" the Provider maps standard to.
ensure_lab_pool() {
  if ! lab_virsh pool-info lab >/dev/null 2>&1; then
    mkdir -p "$libvirt_lab/pools/lab"
    lab_virsh pool-define-as lab dir --target "$libvirt_lab/pools/lab" >/dev/null
    lab_virsh pool-start lab >/dev/null
  fi
}

status() {
  assets="${assets:-$(hack/envtest-assets.sh | tail -1)}"
  for name in labcluster labsource; do
    if running "$lab/$name.pid"; then echo "$name: running (pid $(cat "$lab/$name.pid"), log $lab/$name.log)"
    else echo "$name: stopped"; fi
  done
  hack/node.sh status 2>/dev/null | grep -E '^[a-z-]+: ' || true
  if [[ -s "$kubeconfig" ]] && running "$lab/labcluster.pid"; then
    echo
    echo "\$ kubectl --kubeconfig $kubeconfig -n $namespace get pods"
    kubectl -n "$namespace" get pods
    echo
    echo "\$ kubectl --kubeconfig $kubeconfig get banlieue -A"
    kubectl get banlieue -A
    echo
    echo "\$ kubectl --kubeconfig $kubeconfig get virtualmachine,libvirtmachine,vspheremachine -A"
    kubectl get virtualmachine,libvirtmachine,vspheremachine -A
    echo
    echo "\$ virsh -c '$lab_virsh_uri' list --all"
    lab_virsh list --all
    echo "\$ virsh -c '$lab_virsh_uri' net-dhcp-leases $nat_network"
    lab_virsh net-dhcp-leases "$nat_network" || true
    echo "serial console log of $domain: $libvirt_lab/state/log/qemu/$domain-serial.log"
    echo "  (on the host it is /var/log/libvirt/qemu/$domain-serial.log; the lab keeps libvirt's state under $libvirt_lab/state)"
  fi
}

down() {
  # banlieue first removes what it made on the host: the control plane's etcd does not outlive
  # down, so a domain left defined would belong to a LibvirtMachine no later up knows (its next
  # VM would meet DomainNameConflict). Then the node: its pods stop before the API server.
  if [[ -s "$kubeconfig" ]] && running "$lab/labcluster.pid" && running "$node_dir/kubelet.pid"; then
    assets="$(hack/envtest-assets.sh | tail -1)"
    kubectl delete virtualmachines --all --all-namespaces --wait --timeout=3m >/dev/null 2>&1 ||
      echo "lab: VirtualMachines not all deleted within 3 minutes; their domains may stay on the host" >&2
  fi
  stop_nat_network
  hack/node.sh down
  for name in labsource labcluster; do stop "$name"; done
  # The roles of a lab from before the real node ran as local processes.
  for name in provider-libvirt controller; do stop "$name"; done
  hack/libvirt-lab.sh stop "$libvirt_lab"
  rm -f "$kubeconfig"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: hack/lab.sh up|status|down" >&2; exit 2 ;;
esac
