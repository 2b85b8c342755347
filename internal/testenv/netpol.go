package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// NetworkPolicyFiles reads the NetworkPolicies of the given files (relative to the repository),
// multi-document YAML. A policy without a namespace gets ns.
func NetworkPolicyFiles(t *testing.T, ns string, files ...string) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(RepoRoot(), f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range splitYAML(t, data) {
			var p networkingv1.NetworkPolicy
			if err := yaml.UnmarshalStrict(doc, &p); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if p.Kind != "NetworkPolicy" {
				continue
			}
			if p.Namespace == "" {
				p.Namespace = ns
			}
			out = append(out, p)
		}
	}
	return out
}

func splitYAML(t *testing.T, data []byte) [][]byte {
	t.Helper()
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("reading YAML: %v", err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}

// CheckJobPod fails t unless the Job pod template pod of namespace ns is isolated both ways by
// policies, selected by exactly the policies named (in the files' order), let in on no port and
// out on exactly egress ("TCP/443", any order): a Job serves nothing, and reaches only what its
// work needs.
func CheckJobPod(t *testing.T, policies []networkingv1.NetworkPolicy, ns string, pod corev1.PodTemplateSpec, selectedBy, egress []string) {
	t.Helper()
	problems, access := NetworkPolicyProblems(policies, ns, pod)
	for _, p := range problems {
		t.Error(p)
	}
	if !slices.Equal(access.Policies, selectedBy) {
		t.Errorf("selected by %v, want %v", access.Policies, selectedBy)
	}
	if len(access.IngressPorts) != 0 {
		t.Errorf("ingress allowed on %v", access.IngressPorts)
	}
	want := slices.Sorted(slices.Values(egress))
	if !slices.Equal(access.EgressPorts, want) {
		t.Errorf("egress %v, want %v", access.EgressPorts, want)
	}
}

// NetworkAccess is what the policies selecting one pod allow it.
type NetworkAccess struct {
	// Policies are the names of the policies that select the pod.
	Policies []string
	// IngressPorts and EgressPorts are the TCP and UDP ports the pod's rules name, as
	// "TCP/8080"; a rule without ports (every port) is "*".
	IngressPorts, EgressPorts []string
}

// NetworkPolicyProblems checks a pod of namespace ns against policies, the way a CNI selects
// them: at least one policy selects it, and together they isolate it for ingress and egress;
// every ingress port they allow is one of the pod's containerPorts (numbers, or names the pod
// defines), and every containerPort but the kubelet's (skip, e.g. "health": the pod's own node
// is always allowed in) is allowed by some ingress rule, and a skipped one by none. It returns the problems and what the
// selecting policies allow.
func NetworkPolicyProblems(policies []networkingv1.NetworkPolicy, ns string, pod corev1.PodTemplateSpec, skip ...string) ([]string, NetworkAccess) {
	var problems []string
	var access NetworkAccess
	isolatedIn, isolatedOut := false, false
	declared := map[string]string{} // "TCP/8080" -> port name
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			declared[fmt.Sprintf("%s/%d", proto, p.ContainerPort)] = p.Name
		}
	}
	byName := map[string]string{}
	for k, name := range declared {
		byName[name] = k
	}
	for _, p := range policies {
		if p.Namespace != ns {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			problems = append(problems, fmt.Sprintf("policy %s: %v", p.Name, err))
			continue
		}
		if !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		access.Policies = append(access.Policies, p.Name)
		for _, t := range p.Spec.PolicyTypes {
			isolatedIn = isolatedIn || t == networkingv1.PolicyTypeIngress
			isolatedOut = isolatedOut || t == networkingv1.PolicyTypeEgress
		}
		for _, r := range p.Spec.Ingress {
			for _, port := range portKeys(r.Ports) {
				if k, ok := byName[port]; ok {
					port = k
				}
				access.IngressPorts = append(access.IngressPorts, port)
				name, ok := declared[port]
				switch {
				case !ok:
					problems = append(problems, fmt.Sprintf("policy %s allows ingress on %s, which the pod does not serve", p.Name, port))
				case slices.Contains(skip, name):
					problems = append(problems, fmt.Sprintf("policy %s allows ingress on %s (%s), which only the pod's node needs", p.Name, port, name))
				}
			}
		}
		for _, r := range p.Spec.Egress {
			access.EgressPorts = append(access.EgressPorts, portKeys(r.Ports)...)
		}
	}
	if len(access.Policies) == 0 {
		return append(problems, "no NetworkPolicy selects the pod"), access
	}
	if !isolatedIn || !isolatedOut {
		problems = append(problems, fmt.Sprintf("the policies %v do not isolate it both ways (ingress %v, egress %v)", access.Policies, isolatedIn, isolatedOut))
	}
	for k, name := range declared {
		if !slices.Contains(skip, name) && !slices.Contains(access.IngressPorts, k) {
			problems = append(problems, fmt.Sprintf("the pod serves %s (%s), which no ingress rule allows", k, name))
		}
	}
	slices.Sort(access.IngressPorts)
	access.IngressPorts = slices.Compact(access.IngressPorts)
	slices.Sort(access.EgressPorts)
	access.EgressPorts = slices.Compact(access.EgressPorts)
	slices.Sort(problems)
	return problems, access
}

func portKeys(ports []networkingv1.NetworkPolicyPort) []string {
	if len(ports) == 0 {
		return []string{"*"}
	}
	var out []string
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		switch {
		case p.Port == nil:
			out = append(out, string(proto)+"/*")
		case p.Port.StrVal != "":
			out = append(out, p.Port.StrVal)
		default:
			out = append(out, fmt.Sprintf("%s/%d", proto, p.Port.IntVal))
		}
	}
	return out
}
