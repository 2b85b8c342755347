package vsphere

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/userdata"
)

// machineUserData is the user-data of m, nil when it names no Secret, read by name from an
// uncached reader (the provider may get Secrets by name only). As for libvirt, the Secret is used
// only when it is banlieue-controller's copy for this very machine (controlled by m's UID,
// labelled) and matches spec.userDataHash: whoever can write a VSphereMachine could otherwise
// point it at any Secret the provider may read, the vCenter credentials among them, and have it
// written into guestinfo. Messages never quote the Secret's content.
func machineUserData(ctx context.Context, reader client.Reader, m *infrav1.VSphereMachine) ([]byte, error) {
	ref := m.Spec.UserDataSecretRef
	if ref == nil {
		return nil, nil
	}
	if want := userdata.SecretName(m.Name); ref.Name != want {
		return nil, fmt.Errorf("spec.userDataSecretRef: the name must be %q, banlieue-controller's user-data Secret of this machine, not %q", want, ref.Name)
	}
	var s corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, &s); apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("spec.userDataSecretRef: Secret %s/%s not found (banlieue-controller writes it after the machine)", m.Namespace, ref.Name)
	} else if err != nil {
		return nil, fmt.Errorf("spec.userDataSecretRef: reading Secret %s/%s: %w", m.Namespace, ref.Name, err)
	}
	if s.Labels[banlieuev1.LabelUserData] != userdata.LabelValueMachine || !metav1.IsControlledBy(&s, m) {
		return nil, fmt.Errorf("spec.userDataSecretRef: Secret %s/%s is not this machine's user-data (it needs the label %s=%s and a controller reference to VSphereMachine %s, uid %s); it is not used",
			s.Namespace, s.Name, banlieuev1.LabelUserData, userdata.LabelValueMachine, m.Name, m.UID)
	}
	if !userdata.Matches(s.Data[userdata.KeySalt], s.Data[userdata.KeyUserData], m.Spec.UserDataHash) {
		return nil, fmt.Errorf("spec.userDataSecretRef: Secret %s/%s does not match spec.userDataHash yet (banlieue-controller updates it after the machine)", s.Namespace, s.Name)
	}
	return s.Data[userdata.KeyUserData], nil
}
