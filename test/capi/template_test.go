//go:build capi

package capi

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// TestMachineDeploymentClonesLibvirtMachineTemplate holds the template half of the contract
// without a host: Cluster API's MachineSet clones a LibvirtMachineTemplate into one
// LibvirtMachine per Machine (the template's spec unchanged, passing banlieue's admission),
// each controlled by its Machine, and deletes them when scaled down. No banlieue role runs, so no
// domain name, providerID or provisioned is ever written, and the Machines wait for them.
func TestMachineDeploymentClonesLibvirtMachineTemplate(t *testing.T) {
	ctx, s := newSuite(t)
	ns := "capi-" + testenv.RunID()
	s.env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	w := newWorkload(ns, "lab-host", "pool-a", "tiny.raw")
	// This template names its Provider, the other shape a template has: cloned as it is (the
	// lab cases use one without, placed in each Machine's failure domain).
	w.template.Spec.Template.Spec.ProviderRef = &infrav1.ProviderReference{Name: "lab-host"}
	w.create(ctx, t, s)

	s.scale(ctx, t, w.md, 2)
	var lms infrav1.LibvirtMachineList
	// The MachineSet creates each LibvirtMachine, owned by itself; the Machine then takes it over.
	controller := func(lm *infrav1.LibvirtMachine) int {
		return slices.IndexFunc(lm.OwnerReferences, func(o metav1.OwnerReference) bool {
			return o.APIVersion == "cluster.x-k8s.io/v1beta2" && o.Kind == "Machine" && o.Controller != nil && *o.Controller
		})
	}
	testenv.Eventually(t, 60*time.Second, "2 LibvirtMachines cloned from the template, each controlled by its Machine", func() error {
		if err := s.env.Client.List(ctx, &lms, client.InNamespace(ns)); err != nil {
			return err
		}
		var owners []string
		for i := range lms.Items {
			owners = append(owners, fmt.Sprintf("%s: %+v", lms.Items[i].Name, lms.Items[i].OwnerReferences))
			if controller(&lms.Items[i]) < 0 {
				return fmt.Errorf("owners %s", strings.Join(owners, "; "))
			}
		}
		return testenv.Unmet(len(lms.Items) == 2, fmt.Sprintf("%d LibvirtMachines", len(lms.Items)))
	})
	for _, lm := range lms.Items {
		if !reflect.DeepEqual(lm.Spec.Disks, w.template.Spec.Template.Spec.Disks) || lm.Spec.Pool != "pool-a" ||
			lm.Spec.BootSource != w.template.Spec.Template.Spec.BootSource || lm.Spec.ProviderRef == nil || lm.Spec.ProviderRef.Name != "lab-host" {
			t.Errorf("LibvirtMachine %s spec %+v, want the template's %+v", lm.Name, lm.Spec, w.template.Spec.Template.Spec)
		}
		if lm.Spec.DomainName != "" || lm.Spec.ProviderID != "" {
			t.Errorf("LibvirtMachine %s: domainName %q providerID %q written with no provider running", lm.Name, lm.Spec.DomainName, lm.Spec.ProviderID)
		}
		if got := lm.Labels["cluster.x-k8s.io/cluster-name"]; got != "edge" {
			t.Errorf("LibvirtMachine %s cluster-name label %q", lm.Name, got)
		}
		m := capiObject("Machine", ns, lm.OwnerReferences[controller(&lm)].Name)
		testenv.Eventually(t, 30*time.Second, "Machine "+m.GetName()+" naming "+lm.Name+" and waiting for its infrastructure", func() error {
			got, err := s.get(ctx, m)
			if err != nil {
				return err
			}
			ref, _, _ := unstructured.NestedString(got.Object, "spec", "infrastructureRef", "name")
			provisioned, _, _ := unstructured.NestedBool(got.Object, "status", "initialization", "infrastructureProvisioned")
			status, reason := condition(got, "InfrastructureReady")
			return testenv.Unmet(ref == lm.Name && !provisioned && status == "False",
				fmt.Sprintf("infrastructureRef %q provisioned %v InfrastructureReady %s/%s", ref, provisioned, status, reason))
		})
	}

	s.scale(ctx, t, w.md, 0)
	testenv.Eventually(t, 60*time.Second, "Machines and LibvirtMachines gone at replicas 0", func() error {
		machines := &unstructured.UnstructuredList{}
		machines.SetAPIVersion("cluster.x-k8s.io/v1beta2")
		machines.SetKind("MachineList")
		if err := s.env.Client.List(ctx, machines, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := s.env.Client.List(ctx, &lms, client.InNamespace(ns)); err != nil {
			return err
		}
		var names []string
		for _, m := range machines.Items {
			names = append(names, m.GetName())
		}
		return testenv.Unmet(len(machines.Items) == 0 && len(lms.Items) == 0,
			fmt.Sprintf("Machines [%s], %d LibvirtMachines", strings.Join(names, " "), len(lms.Items)))
	})
}
