package controller

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// refusal is user-data the VM may not have, with the reason its conditions carry.
type refusal struct {
	Reason, Message string
}

func (r *refusal) Error() string { return r.Message }

// readUserData reads the raw user-data of vm, "" when it has none. Every error names the field
// and the object, since the VM surfaces it for the user to fix: a *refusal with its own reason,
// anything else as InfraBuildFailed. reader must be uncached: the controller may only get
// Secrets and ConfigMaps, never list or watch them.
func readUserData(ctx context.Context, reader client.Reader, vm *banlieuev1.VirtualMachine) (string, error) {
	src := vm.Spec.UserData
	if src == nil {
		return "", nil
	}
	if (src.SecretRef == nil) == (src.ConfigMapRef == nil) {
		return "", errors.New("invalid spec.userData: set exactly one of secretRef and configMapRef")
	}
	if src.SecretRef != nil {
		return readSecretKey(ctx, reader, vm.Namespace, *src.SecretRef)
	}
	return readConfigMapKey(ctx, reader, vm.Namespace, *src.ConfigMapRef)
}

func readSecretKey(ctx context.Context, reader client.Reader, ns string, sel banlieuev1.KeySelector) (string, error) {
	key := keyOrDefault(sel)
	var s corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: sel.Name}, &s); err != nil {
		return "", sourceError(err, "Secret", ns, sel.Name)
	}
	// Whoever may create a VM could otherwise have any Secret of the namespace copied into a
	// guest they log into, without the right to read it: the Secret's owner opts in. A
	// ConfigMap needs no opt-in, since that same user may read it (namespace edit and view).
	if s.Labels[banlieuev1.LabelUserData] != "true" {
		return "", &refusal{Reason: banlieuev1.ReasonUserDataNotOptedIn, Message: fmt.Sprintf(
			"spec.userData.secretRef: Secret %s/%s does not carry the label %s: \"true\", so it is not copied into the guest; label it to opt in",
			ns, sel.Name, banlieuev1.LabelUserData)}
	}
	v, ok := s.Data[key]
	if !ok {
		return "", fmt.Errorf("spec.userData.secretRef: key %q not found in Secret %s/%s", key, ns, sel.Name)
	}
	if !utf8.Valid(v) {
		return "", fmt.Errorf("spec.userData.secretRef: key %q of Secret %s/%s is not valid UTF-8", key, ns, sel.Name)
	}
	return string(v), nil
}

func readConfigMapKey(ctx context.Context, reader client.Reader, ns string, sel banlieuev1.KeySelector) (string, error) {
	key := keyOrDefault(sel)
	var cm corev1.ConfigMap
	if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: sel.Name}, &cm); err != nil {
		return "", sourceError(err, "ConfigMap", ns, sel.Name)
	}
	if v, ok := cm.Data[key]; ok {
		return v, nil
	}
	if v, ok := cm.BinaryData[key]; ok {
		if !utf8.Valid(v) {
			return "", fmt.Errorf("spec.userData.configMapRef: key %q of ConfigMap %s/%s is not valid UTF-8", key, ns, sel.Name)
		}
		return string(v), nil
	}
	return "", fmt.Errorf("spec.userData.configMapRef: key %q not found in ConfigMap %s/%s", key, ns, sel.Name)
}

func keyOrDefault(sel banlieuev1.KeySelector) string {
	if sel.Key == "" {
		return banlieuev1.DefaultUserDataKey
	}
	return sel.Key
}

func sourceError(err error, kind, ns, name string) error {
	field := "secretRef"
	if kind == "ConfigMap" {
		field = "configMapRef"
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("spec.userData.%s: %s %s/%s not found", field, kind, ns, name)
	}
	return fmt.Errorf("spec.userData.%s: reading %s %s/%s: %w", field, kind, ns, name, err)
}
