package main

import (
	"bytes"
	"testing"
	"time"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// The plugin's spec writes, byte for byte: each touches one field and nothing else.
func TestPluginPatches(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 2, 3, 456, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		name string
		got  func() ([]byte, error)
		want string
	}{
		{"start", func() ([]byte, error) { return powerPatch(banlieuev1.PoweredOn) }, `{"spec":{"desiredPowerState":"PoweredOn"}}`},
		{"stop", func() ([]byte, error) { return powerPatch(banlieuev1.PoweredOff) }, `{"spec":{"desiredPowerState":"PoweredOff"}}`},
		{"restart", func() ([]byte, error) { return restartPatch(now) }, `{"spec":{"nextRestartTime":"2026-12-02T00:02:03Z"}}`},
		{"cordon", func() ([]byte, error) { return cordonPatch(true), nil }, `{"spec":{"unschedulable":true}}`},
		{"uncordon", func() ([]byte, error) { return cordonPatch(false), nil }, `{"spec":{"drain":null,"unschedulable":null}}`},
		{"drain", func() ([]byte, error) { return drainPatch(3), nil }, `{"spec":{"drain":{"maxConcurrent":3},"unschedulable":true}}`},
	} {
		got, err := c.got()
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %s, %v; want %s", c.name, got, err, c.want)
		}
	}
}

func TestIsPlugin(t *testing.T) {
	for argv0, want := range map[string]bool{
		"/usr/local/bin/kubectl-banlieue": true, "kubectl-banlieue.exe": true, "banlieue": false, "/bin/kubectl-banlieue-x": false,
	} {
		if isPlugin(argv0) != want {
			t.Errorf("isPlugin(%q) = %v", argv0, !want)
		}
	}
}

// The plugin has the seven verbs the guide lists.
func TestPluginCommands(t *testing.T) {
	var names []string
	for _, c := range newPluginCommand().Commands() {
		names = append(names, c.Name())
	}
	want := []string{"addresses", "console", "cordon", "drain", "migrate", "restart", "start", "stop", "uncordon"}
	if len(names) != len(want) {
		t.Fatalf("plugin commands %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("plugin commands %v, want %v", names, want)
		}
	}
}

func TestPrintAddresses(t *testing.T) {
	var b bytes.Buffer
	if err := printAddresses(&b, []banlieuev1.MachineAddress{{Type: banlieuev1.MachineInternalIP, Address: "10.0.0.5"}}); err != nil {
		t.Fatal(err)
	}
	if want := "TYPE        ADDRESS\nInternalIP  10.0.0.5\n"; b.String() != want {
		t.Fatalf("%q, want %q", b.String(), want)
	}
}
