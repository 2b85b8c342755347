package libvirt

import (
	"context"
	"slices"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// eventKeys lists the events.k8s.io Events about the object ns/name as sorted type/reason
// strings, an event in a series once per occurrence (a repeat shows as series.count 2).
func eventKeys(ctx context.Context, t *testing.T, c client.Client, ns, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{"regarding.name": name}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range list.Items {
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		for range n {
			keys = append(keys, e.Type+"/"+e.Reason)
		}
	}
	slices.Sort(keys)
	return keys
}
