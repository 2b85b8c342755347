package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestAppliedMachines(t *testing.T) {
	const manager = banlieuev1.FieldManagerController
	vm := types.NamespacedName{Namespace: "team", Name: "vm"}
	machine := func(uid, fields string, entries ...metav1.ManagedFieldsEntry) *infrav1.LibvirtMachine {
		m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "vm", UID: types.UID(uid)}}
		if fields != "" {
			m.ManagedFields = append(m.ManagedFields, metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
				FieldsV1: metav1.NewFieldsV1(fields)})
		}
		m.ManagedFields = append(m.ManagedFields, entries...)
		return m
	}
	desired := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "vm"}, Spec: infrav1.LibvirtMachineSpec{VCPUs: 2}}
	config, err := configDigest(desired)
	if err != nil {
		t.Fatal(err)
	}
	desired.Spec.VCPUs = 4
	changed, err := configDigest(desired)
	if err != nil {
		t.Fatal(err)
	}
	provider := metav1.ManagedFieldsEntry{Manager: banlieuev1.FieldManagerProviderLibvirt, Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:providerID":{}}}`)}
	const owned = `{"f:spec":{"f:vcpus":{}}}`

	a := newAppliedMachines()
	a.record(vm, machine("u1", owned), config, manager)
	for _, tc := range []struct {
		name     string
		existing *infrav1.LibvirtMachine
		config   [32]byte
		want     bool
	}{
		{"as applied", machine("u1", owned), config, true},
		{"as applied, another manager's fields added since", machine("u1", owned, provider), config, true},
		{"the configuration changed", machine("u1", owned), changed, false},
		{"a field taken over by another writer", machine("u1", `{"f:spec":{}}`), config, false},
		{"no fields of the controller's", machine("u1", ""), config, false},
		{"another machine of the same name", machine("u2", owned), config, false},
	} {
		if got := a.unchanged(vm, tc.existing, tc.config, manager); got != tc.want {
			t.Errorf("%s: unchanged = %t, want %t", tc.name, got, tc.want)
		}
	}
	if a.unchanged(vm, nil, config, manager) {
		t.Error("no machine yet: unchanged = true")
	}
	a.forget(vm)
	if a.unchanged(vm, machine("u1", owned), config, manager) {
		t.Error("after forget: unchanged = true")
	}
	a.record(vm, machine("u1", ""), config, manager)
	if a.unchanged(vm, machine("u1", owned), config, manager) {
		t.Error("an answer without the controller's fields was recorded")
	}
}
