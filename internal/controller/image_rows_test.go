package controller

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestRetiredRowsPatch(t *testing.T) {
	rows := []banlieuev1.ProviderImageStatus{
		{ProviderName: "kvm-a", ProviderNamespace: "team-a"},
		{ProviderName: "kvm-b", ProviderNamespace: "team-a"},
		{ProviderName: "kvm-a", ProviderNamespace: "team-b"}, // same name, other namespace: gone
		{ProviderName: "legacy"},                             // no namespace: names no Provider, stays
		{ProviderName: "kvm-c", ProviderNamespace: "team-a"},
	}
	known := map[types.NamespacedName]bool{{Namespace: "team-a", Name: "kvm-a"}: true}
	got := retiredRows(rows, known)
	if want := []int{1, 2, 4}; !reflect.DeepEqual(got, want) {
		t.Fatalf("retiredRows = %v, want %v", got, want)
	}
	b, err := removeRowsPatch(rows, got)
	if err != nil {
		t.Fatal(err)
	}
	var ops []map[string]string
	if err := json.Unmarshal(b, &ops); err != nil {
		t.Fatal(err)
	}
	// From the last row back, each removal after the tests of its row's Provider.
	want := []map[string]string{
		{"op": "test", "path": "/status/perProvider/4/providerName", "value": "kvm-c"},
		{"op": "test", "path": "/status/perProvider/4/providerNamespace", "value": "team-a"},
		{"op": "remove", "path": "/status/perProvider/4"},
		{"op": "test", "path": "/status/perProvider/2/providerName", "value": "kvm-a"},
		{"op": "test", "path": "/status/perProvider/2/providerNamespace", "value": "team-b"},
		{"op": "remove", "path": "/status/perProvider/2"},
		{"op": "test", "path": "/status/perProvider/1/providerName", "value": "kvm-b"},
		{"op": "test", "path": "/status/perProvider/1/providerNamespace", "value": "team-a"},
		{"op": "remove", "path": "/status/perProvider/1"},
	}
	if !reflect.DeepEqual(ops, want) {
		t.Fatalf("patch = %s", b)
	}
}
