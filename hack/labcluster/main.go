// Command labcluster runs a real kube-apiserver and etcd (the envtest binaries built by
// hack/envtest-assets.sh) with banlieue's CRDs installed, writes an administrator kubeconfig and
// keeps them running until it is signalled. hack/lab.sh uses it as the lab's control plane.
//
// Unlike envtest's defaults it is a control plane real pods can use (hack/node.sh adds the node,
// ADR-0124): the ServiceAccount admission plugin is on, so every pod gets its token volume; the
// server listens on every address and advertises --advertise-address (the node's bridge, which
// pods reach), so the kubernetes Service's endpoint is one kube-proxy can forward to; and its
// serving certificate names that address and the Service's ClusterIP.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// serviceIPRange is envtest's --service-cluster-ip-range; the kubernetes Service gets its first
// address, kubernetesServiceIP.
const (
	serviceIPRange      = "10.0.0.0/24"
	kubernetesServiceIP = "10.0.0.1"
)

func main() {
	kubeconfig := flag.String("write-kubeconfig", "", "where to write the administrator kubeconfig (required)")
	crds := flag.String("crds", "config/crd/bases", "directory of CRD manifests to install (empty: none, as for a helm install)")
	// hack/node.sh's bridge address, the node IP: the one host address every pod reaches.
	advertise := flag.String("advertise-address", "10.244.0.1", "the address the kubernetes Service forwards to (reachable from pods)")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "labcluster: --write-kubeconfig is required")
		os.Exit(2)
	}
	ip := net.ParseIP(*advertise)
	if ip == nil || ip.IsLoopback() {
		fmt.Fprintf(os.Stderr, "labcluster: --advertise-address %q is no address a pod can reach\n", *advertise)
		os.Exit(2)
	}
	if err := run(*kubeconfig, *crds, ip); err != nil {
		fmt.Fprintln(os.Stderr, "labcluster:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, crds string, advertise net.IP) error {
	certDir, err := os.MkdirTemp("", "banlieue-labcluster-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(certDir) }()
	ca, err := servingCerts(certDir, []net.IP{net.IPv4(127, 0, 0, 1), advertise, net.ParseIP(kubernetesServiceIP)})
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	apiServer := &envtest.APIServer{CertDir: certDir}
	// Clients on this machine keep using loopback (the kubeconfig); envtest uses the CA we set
	// because it mints none when the certificate directory already holds one.
	apiServer.Address = "127.0.0.1"
	apiServer.Port = strconv.Itoa(port)
	apiServer.CA = ca
	args := apiServer.Configure()
	args.Set("bind-address", "0.0.0.0")
	args.Set("advertise-address", advertise.String())
	args.Set("service-cluster-ip-range", serviceIPRange)
	// kubectl logs and exec: the API server reaches the kubelet at the Node's InternalIP (its name
	// resolves nowhere) with a client certificate the kubelet trusts.
	args.Set("kubelet-client-certificate", filepath.Join(certDir, "kubelet-client.crt"))
	args.Set("kubelet-client-key", filepath.Join(certDir, "kubelet-client.key"))
	args.Set("kubelet-preferred-address-types", "InternalIP")
	// envtest disables the ServiceAccount admission plugin (no controller creates the default
	// ServiceAccount there); here kube-controller-manager does, and pods need their token volume.
	args.Disable("disable-admission-plugins")
	// As internal/testenv: a stop under running informers would otherwise outlast envtest's
	// 20 s StopTimeout.
	args.Set("shutdown-watch-termination-grace-period", "2s")

	env := &envtest.Environment{ControlPlane: envtest.ControlPlane{APIServer: apiServer}}
	if crds != "" {
		env.CRDDirectoryPaths = []string{crds}
		env.ErrorIfCRDPathMissing = true
	}
	if _, err := env.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	defer func() { _ = env.Stop() }()

	admin, err := env.AddUser(envtest.User{Name: "lab-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	data, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return err
	}
	fmt.Println("ready")

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	return nil
}

// freePort returns a TCP port free on every address, for the API server's secure port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
