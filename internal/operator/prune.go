package operator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// workloadKinds are the kinds a workload is made of, in cleanup order: the cluster-wide grant
// goes first so a half-deleted workload never keeps it.
var workloadKinds = []schema.GroupVersionKind{
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "", Version: "v1", Kind: "Service"},
	{Group: "", Version: "v1", Kind: "ServiceAccount"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
}

// objectKey identifies one workload object; kinds do not collide across the groups above.
type objectKey struct{ kind, namespace, name string }

// keepSet are the objects of the current workload, which pruning leaves alone.
func keepSet(w workload) map[objectKey]bool {
	keep := map[objectKey]bool{}
	for _, o := range w.objects() {
		keep[objectKey{deref(o.GetKind()), deref(o.GetNamespace()), deref(o.GetName())}] = true
	}
	return keep
}

// prune deletes the objects of p's earlier workloads, those a class change or rename left
// behind, and reports each pruned workload. What it deletes of the current workload (current)
// is a user-data grant whose namespace has no machine with user-data left (userDataObjects):
// routine, so not reported.
func (r *providerReconciler) prune(ctx context.Context, p *banlieuev1.Provider, keep map[objectKey]bool, current string) error {
	pruned, err := r.deleteWorkload(ctx, p, keep)
	delete(pruned, current)
	for _, instance := range slices.Sorted(maps.Keys(pruned)) {
		ctrl.LoggerFrom(ctx).Info("pruned workload", "instance", instance, "objects", pruned[instance])
		r.recorder.Eventf(p, nil, corev1.EventTypeWarning, banlieuev1.ReasonWorkloadPruned, "Prune", "%s", prunedNote(instance, pruned[instance]))
	}
	return err
}

// prunedNote is the event's note for a pruned workload: its instance and what kinds of objects
// went, counted, since an event note is at most 1024 characters and a workload's full object
// list ("Kind namespace/name", a dozen long names) is longer; the full list goes to the log.
func prunedNote(instance string, objects []string) string {
	count := map[string]int{}
	for _, o := range objects {
		kind, _, _ := strings.Cut(o, " ")
		count[kind]++
	}
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(count)) {
		if count[k] > 1 {
			k = fmt.Sprintf("%s ×%d", k, count[k])
		}
		kinds = append(kinds, k)
	}
	noun := "objects"
	if len(objects) == 1 {
		noun = "object"
	}
	return fmt.Sprintf("pruned workload %s: %d %s (%s)", instance, len(objects), noun, strings.Join(kinds, ", "))
}

// deleteWorkload deletes every object of p's workload (workloadOwner), in any namespace, except
// those in keep. The selector only narrows the list: capped labels can match another Provider's
// objects, which are left alone. It returns what it deleted ("Kind namespace/name"), grouped by
// workload instance. A 404 counts as deleted: the object is gone either way.
func (r *providerReconciler) deleteWorkload(ctx context.Context, p *banlieuev1.Provider, keep map[objectKey]bool) (map[string][]string, error) {
	deleted := map[string][]string{}
	selector := client.MatchingLabelsSelector{Selector: ownedSelector(p.Namespace, p.Name)}
	for _, gvk := range workloadKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.apiReader.List(ctx, list, selector); err != nil {
			return deleted, fmt.Errorf("listing %s of provider %s/%s: %w", gvk.Kind, p.Namespace, p.Name, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if owner, ok := workloadOwner(obj); !ok || owner != client.ObjectKeyFromObject(p) || keep[objectKey{gvk.Kind, obj.Namespace, obj.Name}] {
				continue
			}
			obj.SetGroupVersionKind(gvk)
			err := r.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
			if client.IgnoreNotFound(err) != nil {
				return deleted, fmt.Errorf("deleting %s %s/%s: %w", gvk.Kind, obj.Namespace, obj.Name, err)
			}
			instance := obj.Labels[banlieuev1.LabelInstance]
			deleted[instance] = append(deleted[instance], gvk.Kind+" "+client.ObjectKeyFromObject(obj).String())
		}
	}
	return deleted, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
