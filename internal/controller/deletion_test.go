package controller

import (
	"errors"
	"testing"
)

func TestDeletionProgress(t *testing.T) {
	forbidden := errors.New("forbidden")
	tests := []struct {
		name    string
		results []kindPresence
		done    bool
		waiting string
	}{
		{"no kinds", nil, true, ""},
		{"all absent", []kindPresence{{kind: "LibvirtMachine"}, {kind: "VSphereMachine"}}, true, ""},
		{"terminating", []kindPresence{{kind: "LibvirtMachine", presence: terminating}}, false,
			"deletion waits: LibvirtMachine ns/vm is being torn down by its provider"},
		{"present (delete just sent)", []kindPresence{{kind: "LibvirtMachine", presence: present}}, false,
			"deletion waits: LibvirtMachine ns/vm is being torn down by its provider"},
		{"unknown blocks even when the rest is absent", []kindPresence{{kind: "LibvirtMachine"}, {kind: "VSphereMachine", presence: unknown, err: forbidden}}, false,
			"deletion waits: VSphereMachine ns/vm could not be looked up: forbidden"},
		{"both reported", []kindPresence{{kind: "LibvirtMachine", presence: terminating}, {kind: "VSphereMachine", presence: unknown, err: forbidden}}, false,
			"deletion waits: LibvirtMachine ns/vm is being torn down by its provider; VSphereMachine ns/vm could not be looked up: forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, waiting := deletionProgress("ns", "vm", tt.results)
			if done != tt.done || waiting != tt.waiting {
				t.Errorf("got (%v, %q), want (%v, %q)", done, waiting, tt.done, tt.waiting)
			}
		})
	}
}
