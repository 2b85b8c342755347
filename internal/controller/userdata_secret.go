package controller

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/userdata"
)

// machineUserData is a machine's rendered user-data on its way into the per-machine Secret
// (internal/userdata): the machine carries Name and Hash, the Secret the content and Salt.
type machineUserData struct {
	Name, Hash string
	Content    []byte
	Salt       []byte
	// existing is the Secret as read before the machine was applied, nil when absent or not
	// banlieue's: a Secret that already holds Content for the machine is not written again.
	existing *corev1.Secret
}

// prepareUserData decides the per-machine Secret of the machine named machine in ns. The name
// may be taken only by banlieue's own Secret for this machine name (a previous machine of that
// name, whose owner reference the apply moves): anything else is a user's Secret, never
// overwritten, and a refusal. The salt of an existing Secret of ours is kept, so the same
// content keeps the same hash and the machine's spec does not change on every pass.
func prepareUserData(ctx context.Context, reader client.Reader, kind string, ns, machine, content string) (*machineUserData, *refusal, error) {
	ud := &machineUserData{Name: userdata.SecretName(machine), Content: []byte(content)}
	var existing corev1.Secret
	err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ud.Name}, &existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, nil, fmt.Errorf("reading user-data Secret %s/%s: %w", ns, ud.Name, err)
	case !ownUserDataSecret(&existing, kind, machine):
		return nil, &refusal{Reason: banlieuev1.ReasonUserDataConflict, Message: fmt.Sprintf(
			"spec.userData: the machine's user-data Secret %s/%s exists and is not banlieue's (no controller reference to %s %s); "+
				"it is left alone: rename or delete it", ns, ud.Name, kind, machine)}, nil
	default:
		ud.Salt, ud.existing = existing.Data[userdata.KeySalt], &existing
	}
	if len(ud.Salt) != userdata.SaltSize {
		ud.Salt = make([]byte, userdata.SaltSize)
		if _, err := rand.Read(ud.Salt); err != nil {
			return nil, nil, fmt.Errorf("drawing a user-data salt: %w", err)
		}
	}
	ud.Hash = userdata.Hash(ud.Salt, ud.Content)
	return ud, nil, nil
}

// ownUserDataSecret reports whether s is banlieue's user-data Secret for a machine of kind
// named machine: its labels say so and its controller is that machine (by name: a machine
// recreated under the same name takes its predecessor's Secret over).
func ownUserDataSecret(s *corev1.Secret, kind, machine string) bool {
	if s.Labels[banlieuev1.LabelUserData] != userdata.LabelValueMachine {
		return false
	}
	ref := metav1.GetControllerOf(s)
	return ref != nil && ref.Kind == kind && ref.Name == machine
}

// applyUserDataSecret writes ud into the per-machine Secret, controlled by machine so that
// garbage collection removes it with the machine. blockOwnerDeletion is left unset: nothing
// waits for a Secret, and setting it would need update on the machine's finalizers.
func applyUserDataSecret(ctx context.Context, c client.Client, machine client.Object, apiVersion, kind string, ud *machineUserData) error {
	if e := ud.existing; e != nil && metav1.IsControlledBy(e, machine) && bytes.Equal(e.Data[userdata.KeyUserData], ud.Content) &&
		bytes.Equal(e.Data[userdata.KeySalt], ud.Salt) {
		return nil
	}
	secret := corev1ac.Secret(ud.Name, machine.GetNamespace()).
		WithLabels(userdata.Labels(machine.GetName())).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(apiVersion).
			WithKind(kind).
			WithName(machine.GetName()).
			WithUID(machine.GetUID()).
			WithController(true)).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{userdata.KeyUserData: ud.Content, userdata.KeySalt: ud.Salt})
	if err := c.Apply(ctx, secret, client.FieldOwner(banlieuev1.FieldManagerController), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying user-data Secret %s/%s: %w", machine.GetNamespace(), ud.Name, err)
	}
	return nil
}

// deleteUserDataSecret removes the per-machine Secret of a machine whose VM no longer has
// user-data, when it is banlieue's; a missing one is already gone.
func deleteUserDataSecret(ctx context.Context, c client.Client, reader client.Reader, kind, ns, machine string) error {
	name := userdata.SecretName(machine)
	var s corev1.Secret
	err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading user-data Secret %s/%s: %w", ns, name, err)
	}
	if !ownUserDataSecret(&s, kind, machine) {
		return nil
	}
	// The precondition keeps a Secret that changed hands since the read.
	if err := c.Delete(ctx, &s, client.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting user-data Secret %s/%s: %w", ns, name, err)
	}
	return nil
}
