package libvirt

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/userdata"
)

func TestCheckUserDataSecret(t *testing.T) {
	salt, content := []byte("0123456789abcdef"), []byte("#cloud-config\n")
	m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "web-01", Namespace: "team-a", UID: "uid-m"},
		Spec: infrav1.LibvirtMachineSpec{UserDataHash: userdata.Hash(salt, content)}}
	own := func() *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: userdata.SecretName("web-01"), Namespace: "team-a", Labels: userdata.Labels("web-01"),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "LibvirtMachine", Name: "web-01", UID: "uid-m", Controller: ptr.To(true)}}},
			Data: map[string][]byte{userdata.KeyUserData: content, userdata.KeySalt: salt},
		}
	}
	for _, tt := range []struct {
		name   string
		mutate func(*corev1.Secret)
		want   string // "" for accepted, else a substring of the refusal
	}{
		{"banlieue's copy for this machine", func(*corev1.Secret) {}, ""},
		{"no owner reference", func(s *corev1.Secret) { s.OwnerReferences = nil }, "is not this machine's user-data"},
		{"owned, not controlled", func(s *corev1.Secret) { s.OwnerReferences[0].Controller = nil }, "is not this machine's user-data"},
		{"a predecessor of the same name", func(s *corev1.Secret) { s.OwnerReferences[0].UID = "uid-old" }, "is not this machine's user-data"},
		{"a user's opted-in Secret", func(s *corev1.Secret) { s.Labels[banlieuev1.LabelUserData] = "true" }, "is not this machine's user-data"},
		{"content edited behind the hash", func(s *corev1.Secret) { s.Data[userdata.KeyUserData] = []byte("#cloud-config\nusers: []\n") }, "does not match spec.userDataHash"},
		{"salt missing", func(s *corev1.Secret) { delete(s.Data, userdata.KeySalt) }, "does not match spec.userDataHash"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := own()
			tt.mutate(s)
			err := checkUserDataSecret(s, m)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			case err != nil && strings.Contains(err.Error(), "cloud-config"):
				t.Errorf("the refusal quotes the content: %v", err)
			}
		})
	}
}
