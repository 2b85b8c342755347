#!/usr/bin/env bash
# The lab's real node: one kubelet with containerd 2 and kube-proxy joined to a given API server,
# plus the kube-controller-manager and kube-scheduler the envtest-style control plane lacks
# (without them a Deployment gets no pods and no pod gets bound). Run as root on Debian 12.
# kube-proxy makes the kubernetes Service's ClusterIP lead to the API server's advertised
# address, which must be one pods reach (hack/labcluster advertises the bridge's, 10.244.0.1).
#
#   hack/node.sh up [KUBECONFIG]   start what is not running; waits for the Node to be Ready
#   hack/node.sh status            what runs, and the Node
#   hack/node.sh import TARBALL    import an image tarball into the node's containerd (k8s.io)
#   hack/node.sh down              stop exactly what `up` started and undo what it set up
#
# KUBECONFIG defaults to the lab's (/var/tmp/banlieue-lab-cluster/kubeconfig, hack/lab.sh up);
# an administrator kubeconfig of any API server on this machine works (a test's envtest one too).
# Binaries: hack/node-assets.sh (Go module proxy, cached under ~/.cache/banlieue/node); runc and
# the CNI plugins: Debian packages. Nothing is pulled from a registry: images are imported.
#
# This machine runs cgroup v1; kubelets >= 1.35 refuse it unless failCgroupV1: false, set below.
#
# Env: BANLIEUE_NODE_DIR (default /var/tmp/banlieue-node): configs, logs, PID files, containerd
#      and kubelet state. BANLIEUE_NODE_NAME (default banlieue-node).
set -euo pipefail
# shellcheck source=lib/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/toolchain.sh"
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH:/usr/sbin:/sbin

# The node's daemons must not inherit the caller's descriptors: started under `flock` (the test
# lock), containerd and the kubelet would hold the lock for as long as they live, as
# hack/libvirt-lab.sh's daemons would. 255 is bash's own script fd.
for fd in "/proc/$$/fd/"*; do
  fd=${fd##*/}
  if [[ "$fd" -gt 2 && "$fd" -ne 255 ]]; then eval "exec $fd>&-" 2>/dev/null || true; fi
done

dir="${BANLIEUE_NODE_DIR:-/var/tmp/banlieue-node}"
node_name="${BANLIEUE_NODE_NAME:-banlieue-node}"
# The pods' bridge; its address is also the node IP (the kubelet refuses a loopback node IP, and
# this address never leaves the machine).
bridge=banlieue-node0
pod_subnet=10.244.0.0/24
node_ip=10.244.0.1
sandbox_image=registry.k8s.io/pause:3.10
sock="$dir/containerd/containerd.sock"
components=(containerd kube-controller-manager kube-scheduler kubelet kube-proxy)

phase_start=0
phase() { phase_start=$SECONDS; printf '==> %s\n' "$*"; }
done_phase() { printf '    done in %ss\n' "$((SECONDS - phase_start))"; }
running() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
log() { echo "node: $*" >&2; }

kubectl() { "$kubectl_bin" --kubeconfig "$dir/kubeconfig" "$@"; }
ctr() { "$assets/ctr" --address "$sock" -n k8s.io "$@"; }

# start NAME CMD...: runs CMD in the background once, logging to $dir/NAME.log.
start() {
  local name=$1; shift
  if running "$dir/$name.pid"; then
    echo "    $name already running (pid $(cat "$dir/$name.pid"))"
    return
  fi
  "$@" >"$dir/$name.log" 2>&1 &
  echo $! >"$dir/$name.pid"
  echo "    $name started (pid $!, log $dir/$name.log)"
}

stop() {
  local name=$1
  if running "$dir/$name.pid"; then
    kill "$(cat "$dir/$name.pid")" 2>/dev/null || true
    for _ in $(seq 100); do running "$dir/$name.pid" || break; sleep 0.2; done
    running "$dir/$name.pid" && kill -9 "$(cat "$dir/$name.pid")" 2>/dev/null
    echo "stopped $name"
  fi
  rm -f "$dir/$name.pid"
}

binaries() {
  assets="$(hack/node-assets.sh | tail -1)"
  kubectl_bin="$(hack/envtest-assets.sh | tail -1)/kubectl"
}

install_debian_packages() {
  local packages=(runc containernetworking-plugins ca-certificates iproute2 iptables) missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "    installing: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# pause_image builds the sandbox image once per pause program (cached beside the binaries).
pause_image() {
  local tar="$assets/pause-image.tar" src=hack/nodepause/main.go
  if [[ ! -s "$tar" || "$src" -nt "$tar" ]]; then
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$assets/pause" ./hack/nodepause
    go run ./hack/image --binary "$assets/pause" --path /pause --user 65535:65535 \
      --tag "$sandbox_image" --out "$tar"
  fi
  echo "$tar"
}

write_configs() {
  mkdir -p "$dir/containerd" "$dir/cni/net.d" "$dir/cni/ipam" "$dir/kubelet" "$dir/pod-logs"
  cat >"$dir/containerd/config.toml" <<TOML
version = 3
root = "$dir/containerd/root"
state = "$dir/containerd/state"

[grpc]
  address = "$sock"

[ttrpc]
  address = "$sock.ttrpc"

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "$sandbox_image"

[plugins."io.containerd.cri.v1.runtime"]
  # This sandbox forbids a negative oom_score_adj; the CRI's -998 for sandboxes makes runc fail
  # with "can't get final child's PID from pipe: EOF". Restricting keeps it at ours (0).
  restrict_oom_score_adj = true
  # Network namespaces pinned under our state directory, so down unmounts them with the rest.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$dir/cni/net.d"
TOML
  cat >"$dir/cni/net.d/10-banlieue-node.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "banlieue-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$pod_subnet", "gateway": "$node_ip"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$dir/cni/ipam"
      }
    }
  ]
}
JSON
  cat >"$dir/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 on this kernel: kubelets >= 1.35 refuse to start on it unless told not to.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$sock
# Ports of our own, so a node never collides with another kubelet's defaults.
port: 10350
healthzPort: 10358
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
podLogsDir: $dir/pod-logs
failSwapOn: false
# A lab node on a shared developer machine: no reservations, no disk-pressure eviction or image
# GC of the imported images (nothing could pull them back).
enforceNodeAllocatable: []
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# This sandbox forbids a negative oom_score_adj for the kubelet itself too.
oomScoreAdj: 0
clusterDomain: cluster.local
# The API server's kubelet client certificate (kubectl logs, exec) is signed by the cluster CA
# (hack/labcluster); anonymous requests stay refused, and webhook authorization asks the API
# server about every caller.
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $dir/ca.crt
authorization:
  mode: Webhook
YAML
  mkdir -p "$dir/kube-proxy"
  cat >"$dir/kube-proxy/config.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $dir/kubeconfig
hostnameOverride: $node_name
bindAddress: $node_ip
mode: iptables
clusterCIDR: $pod_subnet
# This sandbox forbids a negative oom_score_adj (kube-proxy asks for -999 by default).
oomScoreAdj: 0
# Leave the host's conntrack sysctls as they are: a lab node is no reason to retune the machine.
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
# No NodePort on 127.0.0.1: it would need route_localnet on every interface.
iptables:
  localhostNodePorts: false
nodePortAddresses: [primary]
# Ports of our own, beside the kubelet's, on loopback.
healthzBindAddress: 127.0.0.1:10356
metricsBindAddress: 127.0.0.1:10349
YAML
}

# ensure_bridge creates the pods' bridge with the node IP; a marker says down may delete it.
ensure_bridge() {
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    touch "$dir/bridge-created"
  fi
  # Not `ip addr show | grep -q`: under pipefail, grep leaving at the first match can fail the
  # pipeline with ip's SIGPIPE, and a second `up` then added the address again ("Address already
  # assigned").
  [[ "$(ip -o -4 addr show dev "$bridge")" == *" $node_ip/"* ]] || ip addr add "$node_ip/24" dev "$bridge"
  ip link set "$bridge" up
}

up() {
  local source_kubeconfig="${1:-/var/tmp/banlieue-lab-cluster/kubeconfig}"
  [[ -s "$source_kubeconfig" ]] || { log "no kubeconfig at $source_kubeconfig (run hack/lab.sh up, or pass one)"; exit 1; }
  mkdir -p "$dir"
  local total=$SECONDS

  phase "Debian packages: runc, CNI plugins"
  install_debian_packages
  done_phase

  phase "node binaries (Go module proxy, cached under ~/.cache/banlieue/node; ~5 min the first time)"
  binaries
  local pause_tar
  pause_tar="$(pause_image)"
  echo "    $assets"
  done_phase

  phase "configuration under $dir"
  cp "$source_kubeconfig" "$dir/kubeconfig"
  chmod 600 "$dir/kubeconfig"
  # The cluster CA, inline or as a file, for the controller-manager's kube-root-ca.crt ConfigMaps.
  local ca_data ca_file
  ca_data="$(kubectl config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
  ca_file="$(kubectl config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority}')"
  if [[ -n "$ca_data" ]]; then base64 -d <<<"$ca_data" >"$dir/ca.crt"
  elif [[ -n "$ca_file" ]]; then cp "$ca_file" "$dir/ca.crt"
  else log "$source_kubeconfig names no certificate authority"; exit 1; fi
  write_configs
  ensure_bridge
  done_phase

  phase "containerd"
  PATH="$assets:$PATH" start containerd "$assets/containerd" --config "$dir/containerd/config.toml"
  for _ in $(seq 100); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
  ctr version >/dev/null 2>&1 || { tail -20 "$dir/containerd.log"; log "containerd did not answer"; exit 1; }
  ctr images import --local "$pause_tar" >/dev/null
  done_phase

  phase "kube-controller-manager and kube-scheduler"
  # --root-ca-file: the controller publishes it as the kube-root-ca.crt ConfigMap every pod's
  # service account volume needs. No serving port: nothing here scrapes them.
  start kube-controller-manager "$assets/kube-controller-manager" --kubeconfig "$dir/kubeconfig" \
    --leader-elect=false --secure-port=0 --root-ca-file "$dir/ca.crt" \
    --cluster-name banlieue-lab --controllers '*'
  start kube-scheduler "$assets/kube-scheduler" --kubeconfig "$dir/kubeconfig" \
    --leader-elect=false --secure-port=0
  done_phase

  phase "kubelet $node_name ($node_ip)"
  start kubelet "$assets/kubelet" --config "$dir/kubelet/config.yaml" --kubeconfig "$dir/kubeconfig" \
    --root-dir "$dir/kubelet/root" --cert-dir "$dir/kubelet/pki" \
    --volume-plugin-dir "$dir/kubelet/volume-plugins" \
    --hostname-override "$node_name" --node-ip "$node_ip"
  local ready=""
  for _ in $(seq 120); do
    ready="$(kubectl get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)"
    [[ "$ready" == True ]] && break
    running "$dir/kubelet.pid" || break
    sleep 1
  done
  [[ "$ready" == True ]] || { tail -20 "$dir/kubelet.log"; log "node $node_name not Ready; see $dir/*.log"; exit 1; }
  done_phase

  phase "kube-proxy (iptables): the kubernetes Service's ClusterIP to the API server"
  start kube-proxy "$assets/kube-proxy" --config "$dir/kube-proxy/config.yaml"
  # The ClusterIP leads somewhere once kube-proxy has written the Service's rules.
  local cluster_ip
  cluster_ip="$(kubectl -n default get service kubernetes -o jsonpath='{.spec.clusterIP}')"
  for _ in $(seq 60); do
    iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q -- "-d $cluster_ip/32" && break
    running "$dir/kube-proxy.pid" || break
    sleep 0.5
  done
  iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q -- "-d $cluster_ip/32" ||
    { tail -20 "$dir/kube-proxy.log"; log "kube-proxy wrote no rule for $cluster_ip; see $dir/kube-proxy.log"; exit 1; }
  done_phase
  echo "node $node_name Ready in $((SECONDS - total))s (kubeconfig $dir/kubeconfig)"
}

import() {
  local tar=${1:?usage: hack/node.sh import TARBALL}
  running "$dir/containerd.pid" || { log "containerd is not running (hack/node.sh up)"; exit 1; }
  assets="$(hack/node-assets.sh | tail -1)"
  ctr images import --local "$tar"
}

status() {
  local name
  for name in "${components[@]}"; do
    if running "$dir/$name.pid"; then echo "$name: running (pid $(cat "$dir/$name.pid"), log $dir/$name.log)"
    else echo "$name: stopped"; fi
  done
  if running "$dir/kubelet.pid" && [[ -s "$dir/kubeconfig" ]]; then
    binaries
    echo
    echo "\$ kubectl --kubeconfig $dir/kubeconfig get node $node_name -o wide"
    kubectl get node "$node_name" -o wide
  fi
}

# remove_kubelet_chains removes the iptables chains the kubelet itself creates (KUBE-FIREWALL,
# which drops non-local traffic to 127.0.0.0/8, and its canaries), in both address families;
# kube-proxy --cleanup leaves them. Only KUBE-* chains: libvirt's and the machine's stay.
remove_kubelet_chains() {
  local cmd table chain rule
  for cmd in iptables ip6tables; do
    command -v "$cmd" >/dev/null || continue
    for table in filter nat mangle; do
      for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        "$cmd" -t "$table" -S "$chain" >/dev/null 2>&1 || continue
        # Every jump into the chain, from any chain, then the chain itself.
        "$cmd" -t "$table" -S 2>/dev/null | grep -- "-j $chain\b" | sed 's/^-A /-D /' | while read -r rule; do
          eval "\"$cmd\" -t \"$table\" $rule" 2>/dev/null || true
        done || true
        "$cmd" -t "$table" -F "$chain" 2>/dev/null || true
        "$cmd" -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
}

# remove_cgroups removes the kubelet's kubepods hierarchy, deepest first, in every v1 hierarchy.
remove_cgroups() {
  local h
  for h in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice; do
    [[ -d "$h" ]] || continue
    find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

down() {
  local name
  # The binaries (kube-proxy's cleanup, ctr) only for a node that left state behind: on a fresh
  # machine there is nothing to stop, and down (hack/lab.sh down, .ci/run's cleanup) must not
  # build the node first.
  if [[ -s "$dir/kube-proxy/config.yaml" ]] || running "$dir/containerd.pid"; then
    assets="$(hack/node-assets.sh | tail -1)"
  fi
  stop kube-proxy
  # kube-proxy's own cleanup removes exactly its KUBE-* chains and rules (never libvirt's).
  if [[ -s "$dir/kube-proxy/config.yaml" ]]; then
    "$assets/kube-proxy" --cleanup --config "$dir/kube-proxy/config.yaml" >"$dir/kube-proxy-cleanup.log" 2>&1 || true
    # Cleaned up: a later down (the next CI's cleanup) has nothing to clean and, on a machine
    # whose caches are gone, no node to build first.
    rm -f "$dir/kube-proxy/config.yaml"
  fi
  stop kubelet
  remove_kubelet_chains
  if running "$dir/containerd.pid"; then
    # The pods' containers outlive the kubelet; end them through containerd, then drop them.
    local ids
    ids="$(ctr tasks ls -q 2>/dev/null || true)"
    for name in $ids; do ctr tasks kill -s SIGKILL "$name" >/dev/null 2>&1 || true; done
    for name in $ids; do
      # containerd's CRI may delete an exited task itself; stop as soon as it is gone.
      for _ in $(seq 25); do
        ctr tasks delete "$name" >/dev/null 2>&1 && break
        ctr tasks ls -q 2>/dev/null | grep -qx "$name" || break
        sleep 0.2
      done
    done
    for name in $(ctr containers ls -q 2>/dev/null); do ctr containers delete "$name" >/dev/null 2>&1 || true; done
    # `ctr sandboxes ls` has no --quiet: the first column of its table, header skipped.
    for name in $(ctr sandboxes ls 2>/dev/null | awk 'NR > 1 { print $1 }'); do
      ctr sandboxes rm -f "$name" >/dev/null 2>&1 || true
    done
  fi
  stop containerd
  # Shims left behind are ours only if they serve our containerd's socket.
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $sock" || true); do
    kill "$pid" 2>/dev/null && echo "stopped shim $pid"
  done
  for name in kube-scheduler kube-controller-manager; do stop "$name"; done
  # The kubelet bind-mounts its root and the volumes; containerd pins network namespaces and
  # rootfs mounts: everything mounted under our directory, deepest first.
  # (Nothing mounted is no failure: a second down must succeed too.)
  { findmnt -rn -o TARGET | grep -F "$dir/" || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  remove_cgroups
  if [[ -e "$dir/bridge-created" ]]; then
    ip link delete "$bridge" 2>/dev/null || true
    rm -f "$dir/bridge-created"
  fi
  rm -rf "$dir/cni/ipam"
  if [[ -s "$dir/kubeconfig" ]]; then
    kubectl_bin="$(hack/envtest-assets.sh | tail -1)/kubectl"
    kubectl delete node "$node_name" --ignore-not-found --request-timeout=10s >/dev/null 2>&1 || true
    rm -f "$dir/kubeconfig"
  fi
}

case "${1:-}" in
  up) shift; up "$@" ;;
  down) down ;;
  status) status ;;
  import) shift; import "$@" ;;
  *) echo "usage: hack/node.sh up [KUBECONFIG]|status|import TARBALL|down" >&2; exit 2 ;;
esac
