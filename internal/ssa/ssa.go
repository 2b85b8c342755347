// Package ssa writes banlieue's objects and statuses with server-side apply, each role under its
// own field manager, always forcing ownership (docs/architecture.md, "Field managers (server-side apply)").
package ssa

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ApplyStatus applies status as the whole status of obj under manager. The whole status is
// always sent: a field this manager owned and leaves out would be removed by the API server.
func ApplyStatus(ctx context.Context, c client.Client, obj client.Object, status any, manager string) error {
	u, err := skeleton(c.Scheme(), obj)
	if err != nil {
		return err
	}
	content, err := toMap(status)
	if err != nil {
		return fmt.Errorf("converting status of %s: %w", obj.GetName(), err)
	}
	u.Object["status"] = content
	return c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(manager), client.ForceOwnership)
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

// ApplyStatusConditions applies conditions as the only status field manager owns on obj. It is
// for objects whose status is shared between managers field by field (VMImage: the provider
// owns perProvider, the imagebuilder buildArtifact), where sending a whole status object would
// claim the others' fields.
func ApplyStatusConditions(ctx context.Context, c client.Client, obj client.Object,
	conditions []metav1.Condition, manager string) error {
	u, err := skeleton(c.Scheme(), obj)
	if err != nil {
		return err
	}
	items := make([]any, 0, len(conditions))
	for i := range conditions {
		item, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conditions[i])
		if err != nil {
			return fmt.Errorf("converting conditions of %s: %w", obj.GetName(), err)
		}
		items = append(items, item)
	}
	u.Object["status"] = map[string]any{"conditions": items}
	return c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(manager), client.ForceOwnership)
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
