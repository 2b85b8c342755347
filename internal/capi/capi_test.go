package capi

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestOwnerMachineAndManaged(t *testing.T) {
	machine := metav1.OwnerReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine", Name: "m", UID: "u", Controller: ptr.To(true)}
	notController := machine
	notController.Controller = nil
	otherGroup := machine
	otherGroup.APIVersion = "example.com/v1"
	machineSet := metav1.OwnerReference{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachineSet", Name: "ms", UID: "s"}
	vm := metav1.OwnerReference{APIVersion: "banlieue.io/v1alpha1", Kind: "VirtualMachine", Name: "vm", UID: "v", Controller: ptr.To(true)}
	for _, tc := range []struct {
		name          string
		refs          []metav1.OwnerReference
		owner, manage bool
	}{
		{"a Machine as controller", []metav1.OwnerReference{machine}, true, true},
		{"an older API version of the group", []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Machine", Name: "m", Controller: ptr.To(true)}}, true, true},
		{"a Machine, not as controller", []metav1.OwnerReference{notController}, false, true},
		{"a MachineSet before the Machine takes over", []metav1.OwnerReference{machineSet}, false, true},
		{"a Machine kind of another group", []metav1.OwnerReference{otherGroup}, false, false},
		{"banlieue's VirtualMachine", []metav1.OwnerReference{vm}, false, false},
		{"no owner", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &metav1.ObjectMeta{OwnerReferences: tc.refs}
			if got := OwnerMachine(o) != nil; got != tc.owner {
				t.Errorf("OwnerMachine: %v, want %v", got, tc.owner)
			}
			if got := Managed(o); got != tc.manage {
				t.Errorf("Managed: %v, want %v", got, tc.manage)
			}
		})
	}
}

func TestPaused(t *testing.T) {
	if Paused(&metav1.ObjectMeta{}) || !Paused(&metav1.ObjectMeta{Annotations: map[string]string{AnnotationPaused: ""}}) {
		t.Error("the annotation pauses with any value, its absence does not")
	}
}

func TestCheckBootstrapSecret(t *testing.T) {
	good := func() *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", Labels: map[string]string{LabelClusterName: "c1"}},
			Type:       SecretTypeBootstrap,
			Data:       map[string][]byte{KeyBootstrapData: []byte("#cloud-config\ntoken: hunter2\n"), KeyBootstrapFormat: []byte("cloud-config")},
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Secret)
		want   string
	}{
		{"a bootstrap provider's Secret", func(*corev1.Secret) {}, ""},
		{"no format key (cloud-config assumed)", func(s *corev1.Secret) { delete(s.Data, KeyBootstrapFormat) }, ""},
		{"an Opaque Secret (a Provider's credentials)", func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }, `has type "Opaque"`},
		{"another cluster's", func(s *corev1.Secret) { s.Labels[LabelClusterName] = "c2" }, `cluster.x-k8s.io/cluster-name="c2", not the Machine's cluster "c1"`},
		{"no cluster label", func(s *corev1.Secret) { s.Labels = nil }, `cluster.x-k8s.io/cluster-name="", not`},
		{"ignition", func(s *corev1.Secret) { s.Data[KeyBootstrapFormat] = []byte("ignition") }, `format "ignition"`},
		{"no value", func(s *corev1.Secret) { delete(s.Data, KeyBootstrapData) }, `no key "value"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good()
			tc.mutate(s)
			err := CheckBootstrapSecret(s, "c1")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "hunter2"):
				t.Errorf("the refusal quotes the content: %v", err)
			}
		})
	}
}
