package vsphere

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

const (
	admSystemNs = "banlieue-system"
	admBuildNs  = "banlieue-imagebuild"
	accountA    = "banlieue-provider-vsphere-vc-a"
	accountB    = "banlieue-provider-vsphere-vc-b"
	unknownAcct = "banlieue-provider-vsphere-stranger"
)

// TestVSphereProviderAccounts installs the shipped banlieue-provider-vsphere ClusterRole, bound
// to two provider accounts as the operator binds it, and config/admission/provider-writes.yaml,
// and acts as each account against the API server: RBAC gives the account the VSphereMachines
// and their status and nothing of libvirt's; the policy narrows that to the machines of its own
// Provider (docs/guides/vsphere-provider.md, "What the operator creates for it").
func TestVSphereProviderAccounts(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range []string{admBuildNs, admSystemNs} {
		env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	testenv.InstallAdmission(ctx, t, env.Client, "provider-writes.yaml")
	env.Create(ctx, t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-accounts", Namespace: admBuildNs},
		Data: map[string]string{
			admSystemNs + "." + accountA + ".provider": admSystemNs + "/vc-a",
			admSystemNs + "." + accountB + ".provider": admSystemNs + "/vc-b",
		}})
	role, _ := testenv.GeneratedRoles(t, "config/rbac/provider-vsphere/role.yaml")
	var subjects []rbacv1.Subject
	for _, a := range []string{accountA, accountB, unknownAcct} {
		subjects = append(subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: a, Namespace: admSystemNs})
	}
	env.Create(ctx, t, role, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "vsphere-providers"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}, Subjects: subjects})
	env.Create(ctx, t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vcenter-creds", Namespace: admSystemNs}})

	machine := func(name, provider string) *infrav1.VSphereMachine {
		return &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: admSystemNs},
			Spec: infrav1.VSphereMachineSpec{ProviderRef: &infrav1.ProviderReference{Name: provider}, VMName: admSystemNs + "-" + name,
				Template: "/dc1/vm/templates/ubuntu-24.04", CPUs: 1, MemoryMiB: 512,
				Disks: []infrav1.VSphereDisk{{Name: "os", SizeGiB: 10, Datastore: "vsanDatastore"}}}}
	}
	vmA, vmB := machine("vm-a", "vc-a"), machine("vm-b", "vc-b")
	env.Create(ctx, t, vmA, vmB)
	lm := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "kvm", Namespace: admSystemNs},
		Spec: infrav1.LibvirtMachineSpec{ProviderRef: &infrav1.ProviderReference{Name: "vc-a"}, Pool: "default", DomainName: "kvm",
			BootSource: infrav1.BootSource{Kind: infrav1.BootBackingVolume, Volume: "img.raw"}, VCPUs: 1, MemoryMiB: 128,
			Firmware: banlieuev1.FirmwareBIOS, Disks: []infrav1.LibvirtDisk{{Name: "os", SizeGiB: 1}}}}
	env.Create(ctx, t, lm)

	as := func(name string) client.Client {
		c, err := client.New(testenv.Impersonating(env.Config, testenv.ServiceAccountUser(admSystemNs, name)), client.Options{Scheme: env.Client.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	asA, asUnknown := as(accountA), as(unknownAcct)
	merge := func(patch string) client.Patch { return client.RawPatch("application/merge-patch+json", []byte(patch)) }
	annotate := merge(`{"metadata":{"annotations":{"banlieue.io/probe":"x"}}}`)
	status := merge(`{"status":{"observedPowerState":"PoweredOn","vmRef":"vm-42"}}`)

	testenv.Eventually(t, 30*time.Second, "the writes policy in force", func() error {
		return refusedWith(asA.Patch(ctx, vmB.DeepCopy(), annotate), "only the VSphereMachines whose providerRef is its own Provider")
	})
	testenv.Allowed(t, "A lists VSphereMachines", asA.List(ctx, &infrav1.VSphereMachineList{}))
	testenv.Allowed(t, "A annotates its own VSphereMachine", asA.Patch(ctx, vmA.DeepCopy(), annotate))
	testenv.Allowed(t, "A writes its own VSphereMachine's status", asA.Status().Patch(ctx, vmA.DeepCopy(), status))
	for _, w := range []struct {
		what, want string
		err        error
	}{
		{"A writes B's VSphereMachine's status", "only the VSphereMachines whose providerRef is its own Provider",
			asA.Status().Patch(ctx, vmB.DeepCopy(), status)},
		{"an account the operator does not know annotates a VSphereMachine", "serves no Provider the operator knows",
			asUnknown.Patch(ctx, vmA.DeepCopy(), annotate)},
	} {
		if err := refusedWith(w.err, w.want); err != nil {
			t.Errorf("%s: %v", w.what, err)
		}
	}
	// What RBAC alone refuses: nothing of libvirt's, no Secret, no machine created or deleted.
	testenv.Forbidden(t, "A lists LibvirtMachines", asA.List(ctx, &infrav1.LibvirtMachineList{}))
	testenv.Forbidden(t, "A annotates a LibvirtMachine naming its Provider", asA.Patch(ctx, lm.DeepCopy(), annotate))
	testenv.Forbidden(t, "A reads a Secret", asA.Get(ctx, client.ObjectKey{Namespace: admSystemNs, Name: "vcenter-creds"}, &corev1.Secret{}))
	testenv.Forbidden(t, "A lists Secrets", asA.List(ctx, &corev1.SecretList{}, client.InNamespace(admSystemNs)))
	fresh := machine("vm-new", "vc-a")
	testenv.Forbidden(t, "A creates a VSphereMachine", asA.Create(ctx, fresh, client.DryRunAll))
	testenv.Forbidden(t, "A deletes its own VSphereMachine", asA.Delete(ctx, vmA.DeepCopy(), client.DryRunAll))
	// The provider never reads the controller's side (test/boundaries forbids the type here).
	vms := &metav1.PartialObjectMetadataList{}
	vms.SetGroupVersionKind(banlieuev1.GroupVersion.WithKind("VirtualMachineList"))
	testenv.Forbidden(t, "A lists VirtualMachines", asA.List(ctx, vms))
}

// refusedWith is nil when err is the admission policy's Forbidden naming reason.
func refusedWith(err error, reason string) error {
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), reason) {
		return fmt.Errorf("want Forbidden with %q, got %v", reason, err)
	}
	return nil
}
