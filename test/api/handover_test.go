package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testProviderHandover: a LibvirtMachine's providerRef moves only in a live migration's
// handover (docs/adr/0154-live-migration-peer-to-peer-over-tls.md): the update that removes a
// spec.migration the provider reported Succeeded, to exactly its targetProvider. Every other
// way of moving it is refused naming spec.providerRef, so no Provider inherits another's record.
func testProviderHandover(ctx context.Context, t *testing.T, c client.Client) {
	target := map[string]any{"name": "q", "namespace": "fleet"}
	// machine is a machine on Provider p with a move to fleet/q requested and the provider's
	// report at phase (none when "").
	machine := func(t *testing.T, name, phase, reportName string) *unstructured.Unstructured {
		t.Helper()
		obj := parse(validLibvirtMachine)
		obj.SetName(name)
		set(obj, "spec.migration", map[string]any{"migrationName": "mv", "targetProvider": target})
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating the machine: %v", err)
		}
		if phase != "" {
			set(obj, "status", map[string]any{"migration": map[string]any{"migrationName": reportName, "phase": phase}})
			if err := c.Status().Update(ctx, obj); err != nil {
				t.Fatalf("writing the provider's report: %v", err)
			}
		}
		return obj
	}
	handOver := func(obj *unstructured.Unstructured, ref map[string]any) {
		unstructured.RemoveNestedField(obj.Object, "spec", "migration")
		set(obj, "spec.providerRef", ref)
		set(obj, "spec.failureDomain", "q")
	}

	t.Run("the handover is admitted", func(t *testing.T) {
		obj := machine(t, "handover-ok", "Succeeded", "mv")
		handOver(obj, map[string]any{"name": "q", "namespace": "fleet"})
		if err := c.Update(ctx, obj); err != nil {
			t.Fatalf("the handover of a Succeeded move must be admitted: %v", err)
		}
		// After it, providerRef is as immutable as ever, back to the source included.
		set(obj, "spec.providerRef", map[string]any{"name": "p"})
		if err := c.Update(ctx, obj); err == nil || !strings.Contains(err.Error(), "providerRef is immutable") {
			t.Fatalf("moving providerRef back without a migration must be refused, got %v", err)
		}
	})

	for i, tc := range []struct {
		name, phase, reportName string
		mutate                  func(*unstructured.Unstructured)
	}{
		{"before the provider reports", "", "", func(o *unstructured.Unstructured) { handOver(o, target) }},
		{"while the move runs", "Migrating", "mv", func(o *unstructured.Unstructured) { handOver(o, target) }},
		{"after a failed move", "Failed", "mv", func(o *unstructured.Unstructured) { handOver(o, target) }},
		{"on another migration's report", "Succeeded", "other", func(o *unstructured.Unstructured) { handOver(o, target) }},
		{"to another Provider than the target", "Succeeded", "mv", func(o *unstructured.Unstructured) {
			handOver(o, map[string]any{"name": "r", "namespace": "fleet"})
		}},
		{"to the target's name in another namespace", "Succeeded", "mv", func(o *unstructured.Unstructured) {
			handOver(o, map[string]any{"name": "q"})
		}},
		{"keeping the request", "Succeeded", "mv", func(o *unstructured.Unstructured) {
			set(o, "spec.providerRef", target)
		}},
	} {
		t.Run("refused "+tc.name, func(t *testing.T) {
			obj := machine(t, fmt.Sprintf("handover-refused-%d", i), tc.phase, tc.reportName)
			tc.mutate(obj)
			err := c.Update(ctx, obj)
			if err == nil {
				t.Fatal("admitted a providerRef change outside a handover")
			}
			for _, want := range []string{"spec.providerRef", "providerRef is immutable"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not contain %q:\n%v", want, err)
				}
			}
		})
	}
}
