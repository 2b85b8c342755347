// Package ssa writes banlieue's objects and statuses with server-side apply, each role under its
// own field manager, always forcing ownership (docs/architecture.md, "Field managers (server-side apply)").
package ssa

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ApplyStatus is the one way banlieue's roles write a status: status (a value of the kind's
// status type) holds every field manager owns and nothing else, and is applied whole. A field
// this manager owned and leaves out is removed by the API server; a field it never sets (another
// role's, on a status shared field by field such as VMImage's) stays the other's, since every
// status field is omitempty and an unset one is not sent.
func ApplyStatus(ctx context.Context, c client.Client, obj client.Object, status any, manager string, opts ...Option) error {
	u, err := skeleton(c.Scheme(), obj)
	if err != nil {
		return err
	}
	for _, o := range opts {
		o(obj, u)
	}
	content, err := toMap(status)
	if err != nil {
		return fmt.Errorf("converting status of %s: %w", obj.GetName(), err)
	}
	u.Object["status"] = content
	return c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(manager), client.ForceOwnership)
}

// Option changes an apply request.
type Option func(obj client.Object, request *unstructured.Unstructured)

// IfUnchanged makes the apply carry obj's resourceVersion, so it fails with a Conflict when obj
// changed since it was read: for a write decided from a read that must still hold.
func IfUnchanged(obj client.Object, request *unstructured.Unstructured) {
	request.SetResourceVersion(obj.GetResourceVersion())
}

// skeleton is an apply request naming obj and nothing else.
func skeleton(scheme *runtime.Scheme, obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetName(obj.GetName())
	u.SetNamespace(obj.GetNamespace())
	return u, nil
}

// Apply applies obj's identity, labels, annotations, owner references and spec under manager,
// then decodes the API server's answer back into obj. Status is never sent: it belongs to the
// status subresource and, for an infrastructure machine, to another manager.
func Apply(ctx context.Context, c client.Client, obj client.Object, manager string) error {
	u, err := skeleton(c.Scheme(), obj)
	if err != nil {
		return err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("converting %s: %w", obj.GetName(), err)
	}
	if spec, ok := content["spec"]; ok {
		u.Object["spec"] = spec
	}
	u.SetLabels(obj.GetLabels())
	u.SetAnnotations(obj.GetAnnotations())
	u.SetOwnerReferences(obj.GetOwnerReferences())
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(manager), client.ForceOwnership); err != nil {
		return err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("decoding applied %s: %w", obj.GetName(), err)
	}
	return nil
}

// toMap turns a typed value (or a pointer to one) into the map an apply request carries; going
// through JSON keeps the API's field names and omitempty rules.
func toMap(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(data, &m)
}
