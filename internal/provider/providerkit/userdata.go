package providerkit

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/userdata"
)

// UserDataRef is what a machine of any kind says of its user-data: the Secret's name and the
// salted hash of the content it must hold.
type UserDataRef struct {
	// Machine is the machine (a LibvirtMachine, a VSphereMachine); Kind names it in messages.
	Machine client.Object
	Kind    string
	Secret  *banlieuev1.LocalObjectReference
	Hash    string
}

// MachineUserData is the user-data of a machine, nil when it names no Secret. reader must be
// uncached: a provider may get Secrets by name and never list or watch them.
//
// The Secret is used only when it is banlieue's copy for this very machine: controlled by it
// (its UID, not just its name) and matching its spec.userDataHash. Whoever can write a machine
// could otherwise point userDataSecretRef at any Secret the provider may read (its Provider's
// credentials among them) and have it written into a guest. A missing Secret, or one whose
// content is not yet the hash's, is what a pass sees while the controller is still writing it:
// the error says so and the machine is retried.
func MachineUserData(ctx context.Context, reader client.Reader, ref UserDataRef) ([]byte, error) {
	if ref.Secret == nil {
		return nil, nil
	}
	m := ref.Machine
	// The operator's Role grants this name only (internal/operator/userdata.go): any other is
	// not banlieue's copy, and reading it is not tried.
	if want := userdata.SecretName(m.GetName()); ref.Secret.Name != want {
		return nil, fmt.Errorf("spec.userDataSecretRef: the name must be %q, banlieue-controller's user-data Secret of this machine, not %q", want, ref.Secret.Name)
	}
	var s corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: m.GetNamespace(), Name: ref.Secret.Name}, &s); apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("spec.userDataSecretRef: Secret %s/%s not found (banlieue-controller writes it after the machine)", m.GetNamespace(), ref.Secret.Name)
	} else if err != nil {
		return nil, fmt.Errorf("spec.userDataSecretRef: reading Secret %s/%s: %w", m.GetNamespace(), ref.Secret.Name, err)
	}
	if err := CheckUserDataSecret(&s, ref); err != nil {
		return nil, err
	}
	return s.Data[userdata.KeyUserData], nil
}

// CheckUserDataSecret refuses a Secret that is not banlieue's user-data copy for ref's machine,
// or does not hold the content ref.Hash names. Its messages never quote the Secret's content.
func CheckUserDataSecret(s *corev1.Secret, ref UserDataRef) error {
	m := ref.Machine
	if s.Labels[banlieuev1.LabelUserData] != userdata.LabelValueMachine || !metav1.IsControlledBy(s, m) {
		return fmt.Errorf("spec.userDataSecretRef: Secret %s/%s is not this machine's user-data (it needs the label %s=%s and a controller reference to %s %s, uid %s); it is not used",
			s.Namespace, s.Name, banlieuev1.LabelUserData, userdata.LabelValueMachine, ref.Kind, m.GetName(), m.GetUID())
	}
	if !userdata.Matches(s.Data[userdata.KeySalt], s.Data[userdata.KeyUserData], ref.Hash) {
		return fmt.Errorf("spec.userDataSecretRef: Secret %s/%s does not match spec.userDataHash yet (banlieue-controller updates it after the machine)", s.Namespace, s.Name)
	}
	return nil
}
