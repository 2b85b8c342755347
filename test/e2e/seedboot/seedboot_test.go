// Package seedboot boots a real Linux kernel under QEMU with a seed built by
// pkg/nocloud attached as its cdrom, and checks that the kernel mounts it as
// Joliet and reads back every file byte for byte.
//
// The guest comes from hack/test-guest.sh (Debian packages, cached). The test
// is skipped without qemu-system-x86_64 or when the guest cannot be built,
// and in -short mode; with CI set, a missing prerequisite fails instead.
package seedboot

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"banlieue.io/banlieue/pkg/nocloud"

	"banlieue.io/banlieue/internal/testenv"
)

// bootTimeout bounds one TCG boot; a boot takes about 9 s on one core.
const bootTimeout = 90 * time.Second

func TestLinuxReadsSeed(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	qemu := prerequisite(t, func() (string, error) { return exec.LookPath("qemu-system-x86_64") })
	guest := prerequisite(t, buildGuest)

	// Content a careless writer would corrupt: CRLF, a missing final
	// newline, UTF-8, bytes that are not UTF-8, and more than a sector.
	userData := []byte("#cloud-config\r\nwrite_files:\n  - content: \"h\u00e9llo \u4e16\u754c\"\n")
	userData = append(userData, 0x00, 0xff, 0xfe, '\t')
	userData = append(userData, bytes.Repeat([]byte("# padding past one sector\n"), 100)...)
	userData = append(userData, "no final newline"...)
	netcfg, err := nocloud.NetworkConfigV2([]nocloud.NIC{{Name: "eth0", MAC: "52:54:00:12:34:56",
		Static: &nocloud.StaticIP{Address: "192.0.2.10", Prefix: 24, Gateway: "192.0.2.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	seed := nocloud.Seed{InstanceID: "0f8fad5b-d9cb-469f-a165-70867728950e", Hostname: "default-seedboot",
		UserData: userData, NetworkConfig: netcfg}
	im, err := seed.Build()
	if err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(t.TempDir(), "seed.iso")
	var buf bytes.Buffer
	if _, err := im.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(iso, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), bootTimeout)
	defer cancel()
	// The default pc machine puts -cdrom on the PIIX IDE controller, which
	// the guest's ata_piix module drives.
	cmd := exec.CommandContext(ctx, qemu,
		"-machine", "pc,accel=tcg", "-m", "256", "-nographic", "-no-reboot", "-net", "none",
		"-kernel", filepath.Join(guest, "vmlinuz"), "-initrd", filepath.Join(guest, "initrd.img"),
		"-append", "console=ttyS0 panic=-1 quiet", "-cdrom", iso)
	start := time.Now()
	console, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("guest did not power off within %s; console:\n%s", bootTimeout, console)
	}
	if err != nil {
		t.Fatalf("qemu: %v; console:\n%s", err, console)
	}
	t.Logf("guest booted, read the seed and powered off in %s", time.Since(start).Round(time.Millisecond))

	got, err := parseConsole(console)
	if err != nil {
		t.Fatalf("%v; console:\n%s", err, console)
	}
	if !strings.Contains(got.mount, " iso9660 ") {
		t.Errorf("cdrom mount %q is not iso9660", got.mount)
	}
	if !strings.Contains(got.dmesg, "Joliet Level 3") {
		t.Errorf("kernel did not report Joliet: %q", got.dmesg)
	}
	want := map[string][]byte{"meta-data": seed.MetaData(), "user-data": userData, "network-config": netcfg}
	// Long, lower-case, hyphenated names prove the kernel read the Joliet
	// tree; the primary tree would show meta_data. and friends.
	if names := slices.Sorted(maps.Keys(want)); !slices.Equal(got.names, names) {
		t.Errorf("guest sees %q, want %q", got.names, names)
	}
	for name, data := range want {
		if !bytes.Equal(got.files[name], data) {
			t.Errorf("%s: guest read %q, want %q", name, got.files[name], data)
		}
	}
}

// prerequisite returns what get finds, or skips the test (fails it in CI).
func prerequisite(t *testing.T, get func() (string, error)) string {
	t.Helper()
	v, err := get()
	if err != nil {
		testenv.MissingPrerequisite(t, err.Error())
	}
	return v
}

// buildGuest runs hack/test-guest.sh, which prints the guest directory.
func buildGuest() (string, error) {
	script, err := filepath.Abs(filepath.Join("..", "..", "..", "hack", "test-guest.sh"))
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the test guest: %w\n%s", err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
}

// guestReport is what the guest printed between its markers.
type guestReport struct {
	mount, dmesg string
	names        []string
	files        map[string][]byte
}

// parseConsole extracts the report hack/test-guest.sh's init prints. File
// contents travel in base64, so the serial line discipline cannot alter them.
func parseConsole(console []byte) (*guestReport, error) {
	r := &guestReport{files: map[string][]byte{}}
	var inSeed, ended bool
	var file string
	var size int
	var b64 strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(console))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if !inSeed {
			inSeed = strings.HasSuffix(line, "BANLIEUE-SEED-BEGIN")
			continue
		}
		key, rest, _ := strings.Cut(line, " ")
		switch key {
		case "BANLIEUE-SEED-ERROR":
			return nil, fmt.Errorf("guest: %s", rest)
		case "BANLIEUE-SEED-END":
			ended = true
		case "BANLIEUE-MOUNT":
			r.mount = rest
		case "BANLIEUE-DMESG":
			r.dmesg += rest + "\n"
		case "BANLIEUE-NAME":
			r.names = append(r.names, rest)
		case "BANLIEUE-FILE":
			name, n, _ := strings.Cut(rest, " ")
			var err error
			if size, err = strconv.Atoi(n); err != nil {
				return nil, fmt.Errorf("bad file header %q", line)
			}
			file = name
			b64.Reset()
		case "BANLIEUE-FILE-END":
			data, err := base64.StdEncoding.DecodeString(b64.String())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if len(data) != size {
				return nil, fmt.Errorf("%s: guest reported %d bytes, sent %d", file, size, len(data))
			}
			r.files[file] = data
			file = ""
		default:
			if file != "" {
				b64.WriteString(line)
			}
		}
		if ended {
			break
		}
	}
	if !ended {
		return nil, errors.New("no complete seed report on the console")
	}
	slices.Sort(r.names)
	return r, nil
}
