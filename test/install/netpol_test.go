package install

import (
	"fmt"
	"slices"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/console"
	"banlieue.io/banlieue/internal/testenv"
)

// providerTestNS is a namespace Providers run in, outside the install's own.
const providerTestNS = "tenant-a"

// TestNetworkPolicies renders both installs with the console on (config/console and the
// provider policy applied in a Provider's namespace; the chart with console.enabled and that
// namespace in networkPolicy.providerNamespaces) and checks, for each: every banlieue pod
// template is isolated both ways by the policies that select it; the ingress ports they allow
// are exactly the ports the binary serves with the container's arguments (read with the
// binary's own flags, the kubelet's health port aside); no policy selects a pod that is not
// banlieue's; the controller may reach providers' console port (console.ProviderPort). The
// provider, build and import Job pods, which the code makes, are checked against the same
// files in internal/operator, internal/imagebuilder and internal/provider/libvirt/image.
func TestNetworkPolicies(t *testing.T) {
	helm := helmBinary(t)
	kustomized, errOut, err := runKubectl(kubectlBinary(t), "kustomize", testenv.RepoRoot()+"/config/console")
	if err != nil {
		t.Fatalf("kubectl kustomize config/console: %v\n%s", err, errOut)
	}
	renderings := map[string][]runtime.Object{}
	kust := typed(t, parseObjects(t, []byte(kustomized)))
	for _, p := range testenv.NetworkPolicyFiles(t, providerTestNS, "config/networkpolicy/provider/provider.yaml") {
		kust = append(kust, &p)
	}
	renderings["config/console + config/networkpolicy/provider"] = kust
	renderings["chart"] = typed(t, parseObjects(t, renderChart(t, helm, "--set", "console.enabled=true",
		"--set", "networkPolicy.providerNamespaces={"+providerTestNS+"}")))
	for name, objs := range renderings {
		t.Run(name, func(t *testing.T) {
			var policies []networkingv1.NetworkPolicy
			var deployments []*appsv1.Deployment
			for _, o := range objs {
				switch o := o.(type) {
				case *networkingv1.NetworkPolicy:
					policies = append(policies, *o)
					if o.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "banlieue" {
						t.Errorf("NetworkPolicy %s/%s selects pods that are not banlieue's: %v", o.Namespace, o.Name, o.Spec.PodSelector)
					}
				case *appsv1.Deployment:
					deployments = append(deployments, o)
				}
			}
			if len(deployments) != 3 {
				t.Fatalf("%d Deployments rendered, want the 3 roles", len(deployments))
			}
			var providerPolicyNamespaces []string
			for _, p := range policies {
				if p.Name == "banlieue-provider" {
					providerPolicyNamespaces = append(providerPolicyNamespaces, p.Namespace)
				}
			}
			slices.Sort(providerPolicyNamespaces)
			if want := []string{systemNS, providerTestNS}; !slices.Equal(providerPolicyNamespaces, want) {
				t.Errorf("banlieue-provider in %v, want %v", providerPolicyNamespaces, want)
			}
			for _, d := range deployments {
				checkServedPorts(t, d)
				problems, access := testenv.NetworkPolicyProblems(policies, d.Namespace, d.Spec.Template, "health")
				for _, p := range problems {
					t.Errorf("Deployment %s: %s", d.Name, p)
				}
				t.Logf("Deployment %s: policies %v, ingress %v, egress %v", d.Name, access.Policies, access.IngressPorts, access.EgressPorts)
				if d.Name == "banlieue-controller" && !slices.Contains(access.EgressPorts, fmt.Sprintf("TCP/%d", console.ProviderPort)) {
					t.Errorf("the controller may not reach providers' console port %d: egress %v", console.ProviderPort, access.EgressPorts)
				}
			}
		})
	}
}

// checkServedPorts: the container's metrics, health and console ports are the ports the binary
// serves with its arguments (app.Options' flags and --console-port), so a policy held to the
// containerPorts is held to the code.
func checkServedPorts(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	var o app.Options
	fs := pflag.NewFlagSet(d.Name, pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	o.AddFlags(fs, "x", "", 1)
	consolePort := fs.Int("console-port", 0, "")
	if err := fs.Parse(c.Args[1:]); err != nil {
		t.Fatalf("Deployment %s: parsing %v: %v", d.Name, c.Args, err)
	}
	want := map[string]int32{"metrics": int32(o.MetricsPort), "health": int32(o.HealthPort)}
	if *consolePort != 0 {
		want["console"] = int32(*consolePort)
	}
	got := map[string]int32{}
	for _, p := range c.Ports {
		got[p.Name] = p.ContainerPort
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Deployment %s: containerPorts %v, the binary serves %v with args %v", d.Name, got, want, c.Args)
	}
}

// typed converts the rendered NetworkPolicies and Deployments; other kinds are dropped.
func typed(t *testing.T, objs []*unstructured.Unstructured) []runtime.Object {
	t.Helper()
	var out []runtime.Object
	for _, u := range objs {
		var o runtime.Object
		switch u.GetKind() {
		case "NetworkPolicy":
			o = &networkingv1.NetworkPolicy{}
		case "Deployment":
			o = &appsv1.Deployment{}
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, o); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		out = append(out, o)
	}
	return out
}

// TestChartNetworkPolicyValues: the chart's networkPolicy values reach every rule they name:
// narrowed API server, libvirt, source and export registry CIDRs and ports replace the defaults
// in each policy (none still allows everywhere), the scrapers' peers are the ones given, and
// enabled=false renders no policy at all.
func TestChartNetworkPolicyValues(t *testing.T) {
	helm := helmBinary(t)
	objs := typed(t, parseObjects(t, renderChart(t, helm, "--set", "console.enabled=true",
		"--set", "networkPolicy.apiServer.cidrs={192.0.2.10/32}", "--set", "networkPolicy.apiServer.ports={6443}",
		"--set", "networkPolicy.libvirtHosts.cidrs={198.51.100.0/24}", "--set", "networkPolicy.buildSources.cidrs={203.0.113.0/24}",
		"--set", "networkPolicy.exportRegistries.cidrs={233.252.0.0/24}", "--set", "networkPolicy.exportRegistries.ports={5443}",
		"--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring")))
	want := map[string]string{"TCP/6443": "192.0.2.10/32", "TCP/16514": "198.51.100.0/24", "TCP/80": "203.0.113.0/24", "TCP/443": "203.0.113.0/24",
		"TCP/9443": "192.0.2.10/32", "TCP/5443": "233.252.0.0/24"}
	n := 0
	for _, o := range objs {
		p, ok := o.(*networkingv1.NetworkPolicy)
		if !ok {
			continue
		}
		n++
		var peers [][]networkingv1.NetworkPolicyPeer
		var ports [][]networkingv1.NetworkPolicyPort
		for _, r := range p.Spec.Ingress {
			peers, ports = append(peers, r.From), append(ports, r.Ports)
		}
		for _, r := range p.Spec.Egress {
			peers, ports = append(peers, r.To), append(ports, r.Ports)
		}
		for i := range peers {
			for _, peer := range peers[i] {
				if peer.IPBlock == nil {
					if peer.NamespaceSelector != nil && len(peer.NamespaceSelector.MatchLabels) == 0 && peer.PodSelector == nil {
						t.Errorf("%s/%s: a rule from any pod remains: %v", p.Namespace, p.Name, peers[i])
					}
					continue
				}
				for _, key := range portKeysOf(ports[i]) {
					if peer.IPBlock.CIDR != want[key] {
						t.Errorf("%s/%s: %s to %s, want %s", p.Namespace, p.Name, key, peer.IPBlock.CIDR, want[key])
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no NetworkPolicy rendered")
	}
	for _, o := range typed(t, parseObjects(t, renderChart(t, helm, "--set", "networkPolicy.enabled=false", "--set", "console.enabled=true"))) {
		if p, ok := o.(*networkingv1.NetworkPolicy); ok {
			t.Errorf("networkPolicy.enabled=false renders %s/%s", p.Namespace, p.Name)
		}
	}
}

func portKeysOf(ports []networkingv1.NetworkPolicyPort) []string {
	var out []string
	for _, p := range ports {
		out = append(out, fmt.Sprintf("%s/%s", *p.Protocol, p.Port.String()))
	}
	return out
}
