package controller

import (
	"testing"
	"time"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
)

func TestConvergedRequeue(t *testing.T) {
	rule := banlieuev1.AntiAffinityRule{TopologyKey: "name", Mode: "preferred",
		LabelSelector: banlieuev1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	cases := []struct {
		name string
		spec banlieuev1.VirtualMachineSpec
		want time.Duration
	}{
		{"nothing unwatched", banlieuev1.VirtualMachineSpec{}, app.RequeueLong},
		{"a placement without anti-affinity", banlieuev1.VirtualMachineSpec{Placement: &banlieuev1.Placement{
			ProviderSelector: &banlieuev1.LabelSelector{MatchLabels: map[string]string{"site": "edge"}}}}, app.RequeueLong},
		{"user-data from a Secret", banlieuev1.VirtualMachineSpec{UserData: &banlieuev1.UserDataSource{
			SecretRef: &banlieuev1.KeySelector{Name: "seed"}}}, app.RequeueDefault},
		{"user-data from a ConfigMap", banlieuev1.VirtualMachineSpec{UserData: &banlieuev1.UserDataSource{
			ConfigMapRef: &banlieuev1.KeySelector{Name: "seed"}}}, app.RequeueDefault},
		{"anti-affinity", banlieuev1.VirtualMachineSpec{Placement: &banlieuev1.Placement{
			AntiAffinity: []banlieuev1.AntiAffinityRule{rule}}}, app.RequeueDefault},
	}
	for _, tc := range cases {
		if got := convergedRequeue(&banlieuev1.VirtualMachine{Spec: tc.spec}); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
