package libvirt

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

// machineUserData is the user-data of m, nil when it names no Secret. reader must be uncached:
// the provider may get Secrets by name and never list or watch them, so no informer holds them.
//
// The Secret is used only when it is banlieue's copy for this very machine: controlled by m
// (its UID, not just its name) and matching m's spec.userDataHash. Whoever can write a
// LibvirtMachine could otherwise point userDataSecretRef at any Secret the provider may read
// (its Provider's credentials among them) and have it written into a guest's seed. A missing
// Secret, or one whose content is not yet the hash's, is what a pass sees while the controller
// is still writing it: the error says so and the machine is retried.
func machineUserData(ctx context.Context, reader client.Reader, m *infrav1.LibvirtMachine) ([]byte, error) {
	ref := m.Spec.UserDataSecretRef
	if ref == nil {
		return nil, nil
	}
	// The operator's Role grants this name only (internal/operator/userdata.go): any other is
	// not banlieue's copy, and reading it is not tried.
	if want := userdata.SecretName(m.Name); ref.Name != want {
		return nil, fmt.Errorf("spec.userDataSecretRef: the name must be %q, banlieue-controller's user-data Secret of this machine, not %q", want, ref.Name)
	}
	var s corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, &s); apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("spec.userDataSecretRef: Secret %s/%s not found (banlieue-controller writes it after the machine)", m.Namespace, ref.Name)
	} else if err != nil {
		return nil, fmt.Errorf("spec.userDataSecretRef: reading Secret %s/%s: %w", m.Namespace, ref.Name, err)
	}
	if err := checkUserDataSecret(&s, m); err != nil {
		return nil, err
	}
	return s.Data[userdata.KeyUserData], nil
}

// checkUserDataSecret refuses a Secret that is not banlieue's user-data copy for m, or does not
// hold the content m's spec.userDataHash names. Its messages never quote the Secret's content.
func checkUserDataSecret(s *corev1.Secret, m *infrav1.LibvirtMachine) error {
	if s.Labels[banlieuev1.LabelUserData] != userdata.LabelValueMachine || !metav1.IsControlledBy(s, m) {
		return fmt.Errorf("spec.userDataSecretRef: Secret %s/%s is not this machine's user-data (it needs the label %s=%s and a controller reference to LibvirtMachine %s, uid %s); it is not used",
			s.Namespace, s.Name, banlieuev1.LabelUserData, userdata.LabelValueMachine, m.Name, m.UID)
	}
	if !userdata.Matches(s.Data[userdata.KeySalt], s.Data[userdata.KeyUserData], m.Spec.UserDataHash) {
		return fmt.Errorf("spec.userDataSecretRef: Secret %s/%s does not match spec.userDataHash yet (banlieue-controller updates it after the machine)", s.Namespace, s.Name)
	}
	return nil
}
