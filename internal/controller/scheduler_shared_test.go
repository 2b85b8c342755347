package controller

import (
	"strings"
	"testing"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// sharedProvider is testProvider in the system namespace with allowedNamespaces a.
func sharedProvider(name string, a *banlieuev1.AllowedNamespaces, mut ...func(*banlieuev1.Provider)) banlieuev1.Provider {
	return testProvider(name, append([]func(*banlieuev1.Provider){func(p *banlieuev1.Provider) {
		p.Namespace = testNS
		p.Spec.AllowedNamespaces = a
	}}, mut...)...)
}

// tenantVM is testVM in namespace ns.
func tenantVM(ns string, mut ...func(*banlieuev1.VirtualMachine)) *banlieuev1.VirtualMachine {
	return testVM("web-01", append([]func(*banlieuev1.VirtualMachine){func(vm *banlieuev1.VirtualMachine) { vm.Namespace = ns }}, mut...)...)
}

func rowIn(ns, provider string) banlieuev1.ProviderImageStatus {
	r := readyRow(provider)
	r.ProviderNamespace = ns
	return r
}

var (
	fromSame     = &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSame}
	fromAll      = &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromAll}
	fromSelector = &banlieuev1.AllowedNamespaces{From: banlieuev1.NamespacesFromSelector,
		Selector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{"banlieue.io/lab": "allowed"}}}
	allowedLabels = map[string]string{"banlieue.io/lab": "allowed"}
)

func TestScheduleSharedProviders(t *testing.T) {
	tests := []struct {
		name      string
		vm        *banlieuev1.VirtualMachine
		nsLabels  map[string]string
		image     *banlieuev1.VMImage
		providers []banlieuev1.Provider
		wantNS    string // namespace of the chosen Provider
		wantName  string
		wantErr   string
		wantMsg   []string
		notMsg    []string
	}{
		{
			name: "Same (unset) refuses another namespace", vm: tenantVM("team-a"),
			image: testImage(readyRow("lab")), providers: []banlieuev1.Provider{sharedProvider("lab", nil)},
			wantErr: banlieuev1.ReasonNamespaceNotAllowed,
			wantMsg: []string{"Provider banlieue-system/lab refuses namespace team-a", "allowedNamespaces.from is Same"},
		},
		{
			name: "Same (explicit) refuses another namespace", vm: tenantVM("team-a"),
			image: testImage(readyRow("lab")), providers: []banlieuev1.Provider{sharedProvider("lab", fromSame)},
			wantErr: banlieuev1.ReasonNamespaceNotAllowed, wantMsg: []string{"only namespace banlieue-system may use it"},
		},
		{
			name: "Same admits its own namespace", vm: testVM("web-01"),
			image: testImage(readyRow("lab")), providers: []banlieuev1.Provider{sharedProvider("lab", fromSame)},
			wantNS: testNS, wantName: "lab",
		},
		{
			name: "All admits any namespace", vm: tenantVM("team-b"),
			image: testImage(readyRow("lab")), providers: []banlieuev1.Provider{sharedProvider("lab", fromAll)},
			wantNS: testNS, wantName: "lab",
		},
		{
			name: "Selector admits a namespace whose labels match", vm: tenantVM("team-a"), nsLabels: allowedLabels,
			image: testImage(readyRow("lab")), providers: []banlieuev1.Provider{sharedProvider("lab", fromSelector)},
			wantNS: testNS, wantName: "lab",
		},
		{
			name: "Selector refuses a namespace whose labels do not match, naming the rule", vm: tenantVM("team-b"),
			nsLabels: map[string]string{"banlieue.io/lab": "no"},
			image:    testImage(readyRow("lab")), providers: []banlieuev1.Provider{sharedProvider("lab", fromSelector)},
			wantErr: banlieuev1.ReasonNamespaceNotAllowed,
			wantMsg: []string{"Provider banlieue-system/lab refuses namespace team-b", `selector "banlieue.io/lab=allowed" does not match the labels of namespace team-b`},
		},
		{
			name: "providerSelector still filters: a shared Provider it excludes is no refusal", vm: tenantVM("team-b", func(vm *banlieuev1.VirtualMachine) {
				vm.Spec.Placement = &banlieuev1.Placement{ProviderSelector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{"site": "core"}}}
			}),
			image: testImage(readyRow("lab")), providers: []banlieuev1.Provider{sharedProvider("lab", fromSelector)},
			wantErr: banlieuev1.ReasonNoProviderMatched, wantMsg: []string{"0 Provider(s) in the namespace"},
		},
		{
			name: "providerSelector picks the shared Provider it selects", vm: tenantVM("team-a", func(vm *banlieuev1.VirtualMachine) {
				vm.Spec.Placement = &banlieuev1.Placement{ProviderSelector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{"site": "core"}}}
			}),
			image: testImage(readyRow("edge"), readyRow("core")),
			providers: []banlieuev1.Provider{sharedProvider("edge", fromAll),
				sharedProvider("core", fromAll, func(p *banlieuev1.Provider) { p.Labels["site"] = "core" })},
			wantNS: testNS, wantName: "core",
		},
		{
			name: "a refused Provider is skipped for an admitting one", vm: tenantVM("team-a"), nsLabels: allowedLabels,
			image:     testImage(readyRow("a"), readyRow("b")),
			providers: []banlieuev1.Provider{sharedProvider("a", fromSame), sharedProvider("b", fromSelector)},
			wantNS:    testNS, wantName: "b",
		},
		{
			name: "the team's own Provider comes before a shared one", vm: tenantVM("team-a"),
			image: testImage(readyRow("a"), rowIn("team-a", "z")),
			providers: []banlieuev1.Provider{sharedProvider("a", fromAll),
				testProvider("z", func(p *banlieuev1.Provider) { p.Namespace = "team-a" })},
			wantNS: "team-a", wantName: "z",
		},
		{
			name: "same name in two namespaces: the image row decides, by namespace", vm: tenantVM("team-a"),
			image: testImage(readyRow("lab")),
			providers: []banlieuev1.Provider{sharedProvider("lab", fromAll),
				testProvider("lab", func(p *banlieuev1.Provider) { p.Namespace = "team-a" })},
			wantNS: testNS, wantName: "lab",
		},
		{
			name: "a shared Provider's rejections name it by namespace", vm: tenantVM("team-a"),
			image: testImage(), providers: []banlieuev1.Provider{sharedProvider("lab", fromAll)},
			wantErr: banlieuev1.ReasonImageNotReady, wantMsg: []string{"provider banlieue-system/lab: VMImage ubuntu-2404 has no status row"},
		},
		{
			name: "a Provider of another namespace that is not shared is never a candidate", vm: tenantVM("team-a"),
			image:     testImage(readyRow("lab")),
			providers: candidateProviders("team-a", []banlieuev1.Provider{sharedProvider("lab", nil), sharedProvider("private", fromSame)}),
			wantErr:   banlieuev1.ReasonNoProviderMatched, notMsg: []string{"lab", "private"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := schedule(scheduleInput{VM: tt.vm, Class: testClass(), Image: tt.image, Providers: tt.providers, NamespaceLabels: tt.nsLabels})
			if tt.wantErr != "" {
				se, ok := err.(*scheduleError)
				if !ok || se.Reason != tt.wantErr {
					t.Fatalf("err = %v, want reason %s", err, tt.wantErr)
				}
				for _, m := range tt.wantMsg {
					if !strings.Contains(se.Message, m) {
						t.Errorf("message %q lacks %q", se.Message, m)
					}
				}
				for _, m := range tt.notMsg {
					if strings.Contains(se.Message, m) {
						t.Errorf("message %q names %q", se.Message, m)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Provider.Namespace != tt.wantNS || d.Provider.Name != tt.wantName {
				t.Fatalf("chose %s/%s, want %s/%s", d.Provider.Namespace, d.Provider.Name, tt.wantNS, tt.wantName)
			}
			if p := d.placement(); p.ProviderNamespace != tt.wantNS || p.ProviderName != tt.wantName {
				t.Errorf("placement = %+v, want provider %s/%s", p, tt.wantNS, tt.wantName)
			}
		})
	}
}

func TestCandidateProviders(t *testing.T) {
	all := []banlieuev1.Provider{
		sharedProvider("private", nil), sharedProvider("same", fromSame), sharedProvider("sel", fromSelector),
		sharedProvider("all", fromAll), testProvider("own", func(p *banlieuev1.Provider) { p.Namespace = "team-a" }),
	}
	var got []string
	for _, p := range candidateProviders("team-a", all) {
		got = append(got, p.Namespace+"/"+p.Name)
	}
	if want := "banlieue-system/sel banlieue-system/all team-a/own"; strings.Join(got, " ") != want {
		t.Errorf("candidates = %v, want %s", got, want)
	}
}
