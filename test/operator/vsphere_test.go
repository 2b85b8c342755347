package operator

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/capi"
	"banlieue.io/banlieue/internal/naming"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/userdata"
)

// vsphereWait is how long the operator has to act on a vsphere Provider, generous for a loaded
// machine: it is one more workload beside the libvirt one.
const vsphereWait = time.Minute

// testVSphereWorkload: a Provider of a vsphere class gets one workload exactly as a libvirt one
// does, its account bound to the installed banlieue-provider-vsphere ClusterRole, and that
// account, impersonated, holds what the vsphere provider needs and nothing of libvirt's: its
// credentials and CA by name, its machines' user-data Secrets, the VSphereMachines and their
// status, and neither Secrets at large, LibvirtMachines nor import Jobs.
func testVSphereWorkload(ctx context.Context, t *testing.T, env *testenv.Env, admin client.Client) {
	installClusterRole(ctx, t, admin, "config/rbac/provider-vsphere/role.yaml")
	class := &banlieuev1.ProviderClass{}
	repoFile(t, "examples/10-providerclass-vsphere.yaml", class)
	var p banlieuev1.Provider
	example, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "20-vsphere.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(strings.Split(string(example), "\n---\n")[0]), &p); err != nil {
		t.Fatalf("examples/20's first document, the vCenter Provider: %v", err)
	}
	for _, obj := range []client.Object{class, &p,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vcenter-dc1-creds", Namespace: systemNs},
			StringData: map[string]string{"username": "banlieue@vsphere.local", "password": "not-a-password"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vcenter-dc1-ca", Namespace: systemNs}, Data: map[string]string{"ca.crt": "ca"}},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	name := naming.Unique("banlieue-provider-vsphere-"+p.Name, "vsphere", p.Namespace, p.Name)

	var dep appsv1.Deployment
	testenv.Eventually(t, vsphereWait, "the vsphere Provider's Deployment", func() error {
		return admin.Get(ctx, client.ObjectKey{Namespace: systemNs, Name: name}, &dep)
	})
	if args := dep.Spec.Template.Spec.Containers[0].Args; len(args) < 4 || args[0] != "provider" || args[1] != "vsphere" ||
		!slices.Contains(args, "--provider-name") || !slices.Contains(args, p.Name) {
		t.Errorf("Deployment args = %v, want `provider vsphere --provider-name %s …`", args, p.Name)
	}
	// The example's concurrency reaches the workload as its flags, which banlieue-operator-writes
	// admitted.
	args := dep.Spec.Template.Spec.Containers[0].Args
	cc := class.Spec.Concurrency
	for flag, n := range map[string]int32{"--workers": cc.Workers, "--vcenter-clones": cc.VCenterClones, "--vcenter-power-operations": cc.VCenterPowerOperations} {
		if i := slices.Index(args, flag); n == 0 || i < 0 || i+1 == len(args) || args[i+1] != strconv.Itoa(int(n)) {
			t.Errorf("Deployment args = %v, want %s %d from examples/10", args, flag, n)
		}
	}
	testenv.Eventually(t, vsphereWait, "the account bound to banlieue-provider-vsphere", func() error {
		var crb rbacv1.ClusterRoleBinding
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, &crb); err != nil {
			return err
		}
		return testenv.Unmet(crb.RoleRef.Name == "banlieue-provider-vsphere", "roleRef "+crb.RoleRef.Name)
	})

	// A machine of the vCenter with user-data, and its Secret as the controller writes it.
	m := &infrav1.VSphereMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "db-01", Namespace: systemNs},
		Spec: infrav1.VSphereMachineSpec{
			ProviderRef: &infrav1.ProviderReference{Name: p.Name}, VMName: systemNs + "-db-01",
			Template: "/dc1/vm/templates/ubuntu-24.04", CPUs: 1, MemoryMiB: 512,
			Disks:             []infrav1.VSphereDisk{{Name: "os", SizeGiB: 10, Datastore: "vsanDatastore"}},
			UserDataSecretRef: &banlieuev1.LocalObjectReference{Name: userdata.SecretName("db-01")},
			UserDataHash:      userdata.Hash([]byte("salt"), []byte("#cloud-config\n")),
		},
	}
	if err := admin.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: userdata.SecretName("db-01"), Namespace: systemNs}}); err != nil {
		t.Fatal(err)
	}

	sa := as(t, env.Config, systemNs, name)
	get := func(obj client.Object, ns, n string) error {
		return sa.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, obj)
	}
	testenv.Eventually(t, vsphereWait, "the account gets its machine's user-data Secret", func() error {
		return get(&corev1.Secret{}, systemNs, userdata.SecretName("db-01"))
	})
	// A VSphereMachine a Cluster API Machine controls: the bootstrap data Secret the Machine
	// names is granted by name, as for a LibvirtMachine, and the account reads that Machine.
	env.InstallClusterAPICRDs(t, testenv.CAPIMachines)
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: "vs-c1-boot",
		Labels: map[string]string{capi.LabelClusterName: "c1"}}, Type: capi.SecretTypeBootstrap,
		Data: map[string][]byte{capi.KeyBootstrapData: []byte("#cloud-config\n")}}); err != nil {
		t.Fatal(err)
	}
	owner := testenv.CAPIObject("Machine", systemNs, "vs-capi", map[string]any{
		"clusterName":       "c1",
		"bootstrap":         map[string]any{"dataSecretName": "vs-c1-boot"},
		"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "VSphereMachine", "name": "vs-capi"},
	})
	if err := admin.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	capiMachine := &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: "vs-capi", Namespace: systemNs,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: capi.Group + "/v1beta2", Kind: "Machine", Name: "vs-capi",
			UID: owner.GetUID(), Controller: ptr.To(true)}}}, Spec: *m.Spec.DeepCopy()}
	capiMachine.Spec.VMName, capiMachine.Spec.UserDataSecretRef, capiMachine.Spec.UserDataHash = "", nil, ""
	if err := admin.Create(ctx, capiMachine); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, vsphereWait, "the account gets its Cluster API machine's bootstrap data Secret", func() error {
		return get(&corev1.Secret{}, systemNs, "vs-c1-boot")
	})
	ownerRead := &unstructured.Unstructured{}
	ownerRead.SetGroupVersionKind(owner.GroupVersionKind())
	testenv.Allowed(t, "vsphere provider gets its machine's Machine", get(ownerRead, systemNs, "vs-capi"))
	if err := admin.Delete(ctx, capiMachine); err != nil {
		t.Fatal(err)
	}
	testenv.Allowed(t, "vsphere provider reads its credentials Secret", get(&corev1.Secret{}, systemNs, "vcenter-dc1-creds"))
	testenv.Allowed(t, "vsphere provider reads its CA ConfigMap", get(&corev1.ConfigMap{}, systemNs, "vcenter-dc1-ca"))
	testenv.Allowed(t, "vsphere provider lists VSphereMachines", sa.List(ctx, &infrav1.VSphereMachineList{}))
	cur := &infrav1.VSphereMachine{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.ObservedPowerState = banlieuev1.PoweredOff
	testenv.Allowed(t, "vsphere provider writes a VSphereMachine's status", sa.Status().Update(ctx, cur.DeepCopy(), client.DryRunAll))
	if err := admin.Get(ctx, client.ObjectKeyFromObject(&p), &p); err != nil {
		t.Fatal(err)
	}
	testenv.Allowed(t, "vsphere provider writes its Provider's status", sa.Status().Patch(ctx, p.DeepCopy(), client.Merge, client.DryRunAll))
	testenv.Forbidden(t, "vsphere provider reads another Secret", get(&corev1.Secret{}, systemNs, "someone-elses"))
	testenv.Forbidden(t, "vsphere provider reads the libvirt Provider's credentials", get(&corev1.Secret{}, systemNs, "libvirt-edge-creds"))
	testenv.Forbidden(t, "vsphere provider lists Secrets", sa.List(ctx, &corev1.SecretList{}, client.InNamespace(systemNs)))
	testenv.Forbidden(t, "vsphere provider lists LibvirtMachines", sa.List(ctx, &infrav1.LibvirtMachineList{}))
	fresh := m.DeepCopy()
	fresh.Name, fresh.ResourceVersion, fresh.UID = "db-02", "", ""
	testenv.Forbidden(t, "vsphere provider creates a VSphereMachine", sa.Create(ctx, fresh, client.DryRunAll))
	testenv.Forbidden(t, "vsphere provider deletes a VSphereMachine", sa.Delete(ctx, cur.DeepCopy(), client.DryRunAll))

	// Deleting the Provider takes its workload, and so its grants, away again.
	if err := admin.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, &p); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, vsphereWait, "the vsphere workload deleted with its Provider", func() error {
		return gone(ctx, admin, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: systemNs, Name: name}})
	})
}
