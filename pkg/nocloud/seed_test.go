package nocloud

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const testUUID = "0f8fad5b-d9cb-469f-a165-70867728950e"

func write(t testing.TB, s Seed) []byte {
	t.Helper()
	im, err := s.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var buf bytes.Buffer
	if n, err := im.WriteTo(&buf); err != nil || n != im.Size() || int64(buf.Len()) != n {
		t.Fatalf("WriteTo wrote %d of %d bytes: %v", n, im.Size(), err)
	}
	return buf.Bytes()
}

func TestMetaData(t *testing.T) {
	got := Seed{InstanceID: testUUID, Hostname: "default-web-0"}.MetaData()
	want := "instance-id: " + testUUID + "\nlocal-hostname: default-web-0\n"
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestGolden pins the bytes; TestSeedReadBack checks what they contain.
func TestGolden(t *testing.T) {
	img := write(t, Seed{InstanceID: testUUID, Hostname: "default-web-0", UserData: []byte("#cloud-config\n")})
	if len(img) != 27*2048 {
		t.Errorf("seed is %d bytes, want 27 sectors", len(img))
	}
	sum := sha256.Sum256(img)
	const want = "4b49b6b9910d15352c00a80b000c8aa316f8af838d2b5c1209a66cdb65662b90"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Errorf("SHA-256 %s, want %s", got, want)
	}
}

func TestSeedReadBack(t *testing.T) {
	userData := []byte("#cloud-config\nwrite_files:\n  - path: /etc/motd\n    content: \"héllo\\n\"\n")
	netcfg := []byte("version: 2\nethernets: {}\n")
	tests := []struct {
		name  string
		seed  Seed
		files map[string][]byte
	}{
		{"meta-data only", Seed{InstanceID: testUUID, Hostname: "h"}, nil},
		{"empty user-data", Seed{InstanceID: testUUID, Hostname: "h", UserData: []byte{}}, map[string][]byte{"user-data": {}}},
		{"all", Seed{InstanceID: testUUID, Hostname: "ns-vm.1", UserData: userData, NetworkConfig: netcfg},
			map[string][]byte{"user-data": userData, "network-config": netcfg}},
		{"largest", Seed{InstanceID: testUUID, Hostname: "h", UserData: bytes.Repeat([]byte{'u'}, MaxPayloadSize)},
			map[string][]byte{"user-data": bytes.Repeat([]byte{'u'}, MaxPayloadSize)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "seed.iso")
			if err := os.WriteFile(path, write(t, tt.seed), 0o644); err != nil {
				t.Fatal(err)
			}
			want := map[string][]byte{"meta-data": tt.seed.MetaData()}
			for k, v := range tt.files {
				want[k] = v
			}
			checkSeed(t, path, want)
		})
	}
}

// checkSeed reads the seed at path with isoinfo (Joliet), xorriso, 7z and
// blkid, and compares the files with want.
func checkSeed(t *testing.T, path string, want map[string][]byte) {
	t.Run("isoinfo", func(t *testing.T) {
		listing := string(run(t, "isoinfo", "-J", "-f", "-i", path))
		var names []string
		for name, data := range want {
			names = append(names, "/"+name)
			if got := run(t, "isoinfo", "-J", "-i", path, "-x", "/"+name); !bytes.Equal(got, data) {
				t.Errorf("%s: isoinfo extracted %d bytes that differ from the %d written", name, len(got), len(data))
			}
		}
		if got := strings.Fields(listing); len(got) != len(names) {
			t.Errorf("isoinfo lists %q, want %q", got, names)
		}
	})
	t.Run("xorriso", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "x")
		run(t, "xorriso", "-osirrox", "on", "-indev", path, "-extract", "/", dir)
		compareDir(t, dir, want)
	})
	t.Run("7z", func(t *testing.T) {
		dir := t.TempDir()
		run(t, "7z", "x", "-y", "-o"+dir, path)
		compareDir(t, dir, want)
	})
	t.Run("blkid", func(t *testing.T) {
		out := "\n" + string(run(t, "blkid", "-p", "-o", "export", path))
		if !strings.Contains(out, "\nLABEL=CIDATA\n") || !strings.Contains(out, "\nTYPE=iso9660\n") {
			t.Errorf("blkid: %s", out)
		}
	})
}

func compareDir(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Errorf("extracted %d files, want %d", len(entries), len(want))
	}
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: extracted %d bytes (err %v) that differ from the %d written", name, len(got), err, len(data))
		}
	}
}

func TestIdentifiersAccepted(t *testing.T) {
	for _, v := range []string{testUUID, "12345678-1234-1234-1234-123456789abc", "1e300000-0000-0000-0000-000000000000",
		"default-web-0", "2024-01-31-vm", "ns.sub_x", "yes-no", "x"} {
		if err := checkIdentifier("id", v); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
}

func TestDeterministic(t *testing.T) {
	s := Seed{InstanceID: testUUID, Hostname: "h", UserData: []byte("a"), NetworkConfig: []byte("b")}
	if !bytes.Equal(write(t, s), write(t, s)) {
		t.Error("equal seeds gave different bytes")
	}
}

func TestSeedErrors(t *testing.T) {
	big := make([]byte, MaxPayloadSize+1)
	tests := []struct {
		name string
		seed Seed
		want string
	}{
		{"no instance-id", Seed{Hostname: "h"}, "instance-id is empty"},
		{"no hostname", Seed{InstanceID: testUUID}, "hostname is empty"},
		{"newline", Seed{InstanceID: testUUID, Hostname: "h\nuser-data: x"}, `hostname "h\nuser-data: x" has '\n'`},
		{"control", Seed{InstanceID: "a\x00b", Hostname: "h"}, `has '\x00'`},
		{"yaml syntax", Seed{InstanceID: testUUID, Hostname: "#comment"}, "starting with a letter or digit"},
		{"colon", Seed{InstanceID: "a: b", Hostname: "h"}, "has ':'"},
		{"non-ASCII", Seed{InstanceID: testUUID, Hostname: "hé"}, "has 'é'"},
		{"yaml null", Seed{InstanceID: "null", Hostname: "h"}, "boolean, null, number or date"},
		{"yaml bool", Seed{InstanceID: testUUID, Hostname: "Yes"}, "boolean, null, number or date"},
		{"yaml int", Seed{InstanceID: "1_000", Hostname: "h"}, "boolean, null, number or date"},
		{"yaml hex", Seed{InstanceID: "0x1F", Hostname: "h"}, "boolean, null, number or date"},
		{"yaml float", Seed{InstanceID: "1e3", Hostname: "h"}, "boolean, null, number or date"},
		{"yaml date", Seed{InstanceID: testUUID, Hostname: "2024-01-31"}, "boolean, null, number or date"},
		{"too long", Seed{InstanceID: testUUID, Hostname: strings.Repeat("h", 254)}, "more than 253"},
		{"user-data too big", Seed{InstanceID: testUUID, Hostname: "h", UserData: big}, "user-data is 1048577 bytes, more than the 1048576-byte maximum"},
		{"network-config too big", Seed{InstanceID: testUUID, Hostname: "h", NetworkConfig: big}, "network-config is 1048577 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.seed.Build()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// requireTool returns the path of an external reader. Outside CI a missing
// tool skips the test; CI installs them all, so there it fails.
func requireTool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required in CI: %v", name, err)
		}
		t.Skipf("%s not installed: %v", name, err)
	}
	return path
}

func run(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(requireTool(t, name), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr.Bytes())
	}
	return out
}
