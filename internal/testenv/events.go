package testenv

import (
	"context"
	"slices"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EventsAbout lists the events.k8s.io Events in ns about the object named regarding.
func EventsAbout(ctx context.Context, t testing.TB, c client.Client, ns, regarding string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{"regarding.name": regarding}); err != nil {
		t.Fatalf("listing the events about %s/%s: %v", ns, regarding, err)
	}
	return list.Items
}

// EventKeys are evs as sorted type/reason strings, an event in a series once per occurrence (a
// repeat shows as series.count 2), so a test compares what was announced, and how often.
func EventKeys(evs []eventsv1.Event) []string {
	var keys []string
	for _, e := range evs {
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
