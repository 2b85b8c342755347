package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"banlieue.io/banlieue/pkg/nocloud"
)

const seedUUID = "0f8fad5b-d9cb-469f-a165-70867728950e"

func runSeed(t *testing.T, args ...string) error {
	t.Helper()
	cmd := newSeedCommand()
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return cmd.Execute()
}

func TestSeedBuild(t *testing.T) {
	dir := t.TempDir()
	userData := filepath.Join(dir, "user-data.yaml")
	netcfg := filepath.Join(dir, "net.yaml")
	if err := os.WriteFile(userData, []byte("#cloud-config\nhostname: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(netcfg, []byte("version: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "seed.iso")
	if err := runSeed(t, "build", "--instance-id", seedUUID, "--hostname", "default-vm",
		"--user-data", userData, "--network-config", netcfg, "-o", out); err != nil {
		t.Fatal(err)
	}

	// The command must produce exactly what the provider's code path does.
	im, err := nocloud.Seed{InstanceID: seedUUID, Hostname: "default-vm",
		UserData: []byte("#cloud-config\nhostname: x\n"), NetworkConfig: []byte("version: 2\n")}.Build()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if _, err := im.WriteTo(&want); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Error("seed build output differs from nocloud.Seed.Build")
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("output mode %v, %v; want 0600", st.Mode(), err)
	}
}

func TestSeedBuildErrors(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, nocloud.MaxPayloadSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "seed.iso")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no hostname", []string{"build", "--instance-id", seedUUID, "-o", out}, `"hostname" not set`},
		{"no output", []string{"build", "--instance-id", seedUUID, "--hostname", "h"}, `"output" not set`},
		{"bad hostname", []string{"build", "--instance-id", seedUUID, "--hostname", "a b", "-o", out}, `hostname "a b" has ' '`},
		{"missing file", []string{"build", "--instance-id", seedUUID, "--hostname", "h", "--user-data", filepath.Join(dir, "nope"), "-o", out}, "no such file"},
		{"too big", []string{"build", "--instance-id", seedUUID, "--hostname", "h", "--network-config", big, "-o", out}, "larger than the 1048576-byte"},
		{"bad output dir", []string{"build", "--instance-id", seedUUID, "--hostname", "h", "-o", filepath.Join(dir, "nope", "seed.iso")}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runSeed(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 { // only "big"
				t.Errorf("left files behind: %v", entries)
			}
		})
	}
}
