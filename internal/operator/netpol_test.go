package operator

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"banlieue.io/banlieue/internal/console"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/pkg/libvirt"
)

// TestProviderNetworkPolicy: the provider pod the operator makes is isolated both ways by the
// install's banlieue-provider policy, in banlieue-system (a class with that workloadNamespace)
// and in a Provider's own namespace (config/networkpolicy/provider); the ports it lets in are
// the pod's own (metrics, console), and it may reach libvirtd's TLS port.
func TestProviderNetworkPolicy(t *testing.T) {
	for ns, files := range map[string][]string{
		"banlieue-system": {"config/networkpolicy/system.yaml"},
		"tenant-a":        {"config/networkpolicy/provider/provider.yaml"},
	} {
		t.Run(ns, func(t *testing.T) {
			policies := testenv.NetworkPolicyFiles(t, ns, files...)
			d := decode[appsv1.Deployment](t, deployment(guideProvider(), libvirtClass(), ns, Options{BuildNamespace: DefaultBuildNamespace}.withDefaults()))
			problems, access := testenv.NetworkPolicyProblems(policies, ns, d.Spec.Template, "health")
			for _, p := range problems {
				t.Error(p)
			}
			if !slices.Equal(access.Policies, []string{"banlieue-provider"}) && !slices.Equal(access.Policies, []string{"banlieue-default-deny", "banlieue-provider"}) {
				t.Errorf("selected by %v, want banlieue-provider (and banlieue-default-deny in banlieue-system)", access.Policies)
			}
			if want := []string{"TCP/" + fmt.Sprint(metricsPort), "TCP/" + fmt.Sprint(console.ProviderPort)}; !slices.Equal(access.IngressPorts, want) {
				t.Errorf("ingress %v, want %v", access.IngressPorts, want)
			}
			if !slices.Contains(access.EgressPorts, fmt.Sprintf("TCP/%d", libvirt.DefaultPort)) {
				t.Errorf("egress %v lacks libvirtd's TLS port %d", access.EgressPorts, libvirt.DefaultPort)
			}
		})
	}
}
