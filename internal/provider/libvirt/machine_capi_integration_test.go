package libvirt

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

// TestClusterAPIMachineAgainstLabHost: a LibvirtMachine owned by a Cluster API Machine, as
// Cluster API's controllers write both (Machine and Cluster are of Cluster API's own CRDs, from
// its Go module), is served as the v1beta2 InfraMachine contract asks (machine_capi.go).
func TestClusterAPIMachineAgainstLabHost(t *testing.T) {
	ctx, ps := startLabSuite(t, func(mgr ctrl.Manager, conns *hostconn.Connections) error {
		r := &MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns, Resync: time.Second}
		return r.SetupWithManager(mgr)
	})
	s := &capiSuite{machineSuite: &machineSuite{providerSuite: ps, pool: "capi-" + testenv.RunID(), bootName: "tiny.raw"}}
	s.env.InstallClusterAPICRDs(t, testenv.CAPIMachines, testenv.CAPIClusters)
	s.createPool(ctx, t)
	p := s.guideProvider("lab")
	p.Spec.Capabilities = s.capabilities()
	if err := s.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	s.createImage(ctx, t, s.pool, s.bootName)
	s.create(ctx, t, s.cluster("c1"))

	t.Run("bootstrap data in the seed, provisioned one-way, paused, deletion tears down", func(t *testing.T) { s.testLifecycle(ctx, t) })
	t.Run("what the Machine does not allow reaches no host", func(t *testing.T) { s.testRefusals(ctx, t) })
}

type capiSuite struct{ *machineSuite }

func capiObject(kind, name string, spec map[string]any) *unstructured.Unstructured {
	return testenv.CAPIObject(kind, testNamespace, name, spec)
}

func (s *capiSuite) cluster(name string) *unstructured.Unstructured {
	return capiObject("Cluster", name, map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "LibvirtCluster", "name": name},
	})
}

// capiMachine is a Machine of cluster c1 whose infrastructure is the LibvirtMachine name.
func capiMachine(name, dataSecret, failureDomain string) *unstructured.Unstructured {
	bootstrap := map[string]any{"configRef": map[string]any{"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": name}}
	if dataSecret != "" {
		bootstrap = map[string]any{"dataSecretName": dataSecret}
	}
	spec := map[string]any{
		"clusterName":       "c1",
		"bootstrap":         bootstrap,
		"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "LibvirtMachine", "name": name},
	}
	if failureDomain != "" {
		spec["failureDomain"] = failureDomain
	}
	return capiObject("Machine", name, spec)
}

// bootstrapSecret is a data Secret as a bootstrap provider writes it.
func bootstrapSecret(name, typ, content string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, Labels: map[string]string{capi.LabelClusterName: "c1"}},
		Type:       corev1.SecretType(typ),
		Data:       map[string][]byte{capi.KeyBootstrapData: []byte(content), capi.KeyBootstrapFormat: []byte(capi.FormatCloudConfig)},
	}
}

func (s *capiSuite) create(ctx context.Context, t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := s.env.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
}

// templateMachine is a LibvirtMachine as a MachineSet makes it from a LibvirtMachineTemplate:
// no domainName, the cluster label; then the Machine, which takes it over as controller (uid).
func (s *capiSuite) templateMachine(ctx context.Context, t *testing.T, name string, machine *unstructured.Unstructured) *infrav1.LibvirtMachine {
	t.Helper()
	m := s.machine(testNamespace, name)
	m.Spec.DomainName = ""
	m.Labels = map[string]string{capi.LabelClusterName: "c1"}
	s.create(ctx, t, m, machine)
	patch := client.MergeFrom(m.DeepCopy())
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: capi.Group + "/v1beta2", Kind: "Machine", Name: machine.GetName(),
		UID: machine.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	if err := s.env.Client.Patch(ctx, m, patch); err != nil {
		t.Fatal(err)
	}
	return m
}

func machineHas(m *infrav1.LibvirtMachine, typ string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, typ)
	return c != nil && c.Status == status && c.Reason == reason
}

func (s *capiSuite) testLifecycle(ctx context.Context, t *testing.T) {
	// Named per run: a run killed before its cleanup leaves its domain behind, which the next
	// run must not collide with (DomainNameConflict).
	name := "c1-md-0-" + testenv.RunID()
	data := "#cloud-config\nruncmd: [kubeadm join --token abcdef.0123456789abcdef]\n"
	s.create(ctx, t, bootstrapSecret(name+"-bootstrap", string(capi.SecretTypeBootstrap), data))
	m := s.templateMachine(ctx, t, name, capiMachine(name, name+"-bootstrap", "lab"))
	key := client.ObjectKeyFromObject(m)
	domain := testNamespace + "-" + name

	got := s.waitMachine(ctx, t, key, 90*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return machineReady(m) && machineHas(m, infrav1.ConditionPaused, metav1.ConditionFalse, infrav1.ReasonNotPaused)
	})
	dom, err := s.host.DomainLookupByName(ctx, domain)
	if err != nil {
		t.Fatalf("the domain is named after the LibvirtMachine: %v", err)
	}
	if got.Spec.DomainName != domain || got.Spec.ProviderID != "libvirt://lab/"+dom.UUID.String() ||
		!ptrTrue(got.Status.Initialization.Provisioned) || got.Status.FailureDomain != "lab" {
		t.Errorf("domainName %q providerID %q provisioned %v failureDomain %q", got.Spec.DomainName, got.Spec.ProviderID,
			got.Status.Initialization.Provisioned, got.Status.FailureDomain)
	}
	// The bootstrap data is in the seed, byte for byte, and nowhere in the LibvirtMachine.
	pool, err := s.host.StoragePoolLookupByName(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := s.host.StorageVolLookupByName(ctx, pool, domain+"-cidata.iso")
	if err != nil {
		t.Fatal(err)
	}
	if _, user := s.readSeed(ctx, t, seed); user != data {
		t.Errorf("seed user-data = %q, want the bootstrap data %q", user, data)
	}
	if raw, _ := json.Marshal(got); strings.Contains(string(raw), "abcdef.0123456789abcdef") {
		t.Errorf("the LibvirtMachine carries the bootstrap data: %s", raw)
	}

	// Powered off, it stays provisioned: the contract's signal is one-way.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.DesiredPowerState, got.Spec.PowerOffMode = banlieuev1.PoweredOff, banlieuev1.PowerOffHard
	if err := s.env.Client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	got = s.waitMachine(ctx, t, key, 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return m.Status.ObservedPowerState == banlieuev1.PoweredOff && m.Status.ObservedGeneration == m.Generation
	})
	if !ptrTrue(got.Status.Initialization.Provisioned) {
		t.Errorf("provisioned turned false with the domain off: %+v", got.Status.Initialization)
	}

	// Paused (the annotation): Paused True, and a spec change reaches no host.
	patch = client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{capi.AnnotationPaused: ""}
	got.Spec.DesiredPowerState = banlieuev1.PoweredOn
	if err := s.env.Client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	s.waitMachine(ctx, t, key, 30*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return machineHas(m, infrav1.ConditionPaused, metav1.ConditionTrue, infrav1.ReasonPaused)
	})
	time.Sleep(3 * time.Second) // three resyncs
	if st, _, err := s.host.DomainState(ctx, dom); err != nil || st != libvirt.DomainShutOff {
		t.Errorf("paused machine's domain state %d (%v), want still shut off", st, err)
	}
	// Unpaused, but its Cluster paused: still Paused, the Cluster named.
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(s.cluster("c1").GroupVersionKind())
	if err := s.env.Client.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "c1"}, cl); err != nil {
		t.Fatal(err)
	}
	setClusterPaused := func(paused bool) {
		t.Helper()
		if err := s.env.Client.Patch(ctx, cl, client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused))); err != nil {
			t.Fatal(err)
		}
	}
	setClusterPaused(true)
	if err := s.env.Client.Patch(ctx, got, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":null}}`))); err != nil {
		t.Fatal(err)
	}
	s.waitMachine(ctx, t, key, 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, infrav1.ConditionPaused)
		return len(m.Annotations) == 0 && c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "Cluster c1 has spec.paused")
	})
	setClusterPaused(false)
	got = s.waitMachine(ctx, t, key, 60*time.Second, func(m *infrav1.LibvirtMachine) bool {
		return machineReady(m) && machineHas(m, infrav1.ConditionPaused, metav1.ConditionFalse, infrav1.ReasonNotPaused)
	})

	// Deletion, as Cluster API deletes a Machine's infrastructure: the domain and every volume
	// of the machine go; the boot image stays.
	if err := s.env.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	s.waitGone(ctx, t, key)
	if _, err := s.host.DomainLookupByName(ctx, domain); !libvirt.IsNotFound(err) {
		t.Errorf("domain still defined after deletion: %v", err)
	}
	if names := strings.Join(labhost.VolumeNames(ctx, t, s.host, s.pool), ","); names != s.bootName {
		t.Errorf("after deletion the pool must hold only the boot image, got %s", names)
	}
}

// testRefusals: a Machine of another failure domain, without bootstrap data yet, naming a Secret
// that is not a bootstrap data Secret, or that is not the machine's owner (another UID): each is
// reported on Ready under its reason, and no domain or volume is made.
func (s *capiSuite) testRefusals(ctx context.Context, t *testing.T) {
	s.create(ctx, t, bootstrapSecret("opaque", string(corev1.SecretTypeOpaque), "#cloud-config\n"),
		bootstrapSecret("c1-good", string(capi.SecretTypeBootstrap), "#cloud-config\n"))
	cases := []struct {
		name, reason, message string
		machine               *unstructured.Unstructured
		forge                 bool
	}{
		{"c1-fd", infrav1.ReasonFailureDomainMismatch, `spec.failureDomain is "kvm-2"`, capiMachine("c1-fd", "c1-good", "kvm-2"), false},
		{"c1-wait", infrav1.ReasonWaitingForBootstrapData, "has no spec.bootstrap.dataSecretName yet", capiMachine("c1-wait", "", ""), false},
		{"c1-opaque", infrav1.ReasonBootstrapDataRefused, `has type "Opaque"`, capiMachine("c1-opaque", "opaque", ""), false},
		{"c1-forged", infrav1.ReasonOwnerMachineMismatch, "not the owner reference's", capiMachine("c1-forged", "c1-good", ""), true},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			m := s.templateMachine(ctx, t, tc.name, tc.machine)
			if tc.forge {
				patch := client.MergeFrom(m.DeepCopy())
				m.OwnerReferences[0].UID = "00000000-0000-0000-0000-000000000000"
				if err := s.env.Client.Patch(ctx, m, patch); err != nil {
					t.Fatal(err)
				}
			}
			s.waitMachine(ctx, t, client.ObjectKeyFromObject(m), 30*time.Second, func(m *infrav1.LibvirtMachine) bool {
				c := meta.FindStatusCondition(m.Status.Conditions, banlieuev1.ConditionReady)
				return c != nil && c.Reason == tc.reason && strings.Contains(c.Message, tc.message)
			})
			if _, err := s.host.DomainLookupByName(ctx, testNamespace+"-"+tc.name); !libvirt.IsNotFound(err) {
				t.Errorf("a refused machine has a domain: %v", err)
			}
			if err := s.env.Client.Delete(ctx, m); err != nil {
				t.Fatal(err)
			}
			s.waitGone(ctx, t, client.ObjectKeyFromObject(m))
		})
	}
	if names := strings.Join(labhost.VolumeNames(ctx, t, s.host, s.pool), ","); names != s.bootName {
		t.Errorf("refused machines left volumes: %s", names)
	}
}
