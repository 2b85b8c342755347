package image

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"banlieue.io/banlieue/internal/imagebuilder/checksum"
)

const digestA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestDefaultVolumeName(t *testing.T) {
	for _, tc := range []struct {
		o    ImportOptions
		want string
		err  string
	}{
		{ImportOptions{VMImage: "guest", Source: "/a/guest.raw"}, "guest.raw", ""},
		{ImportOptions{VMImage: "foo.raw", Source: "/a/foo.raw"}, "foo.raw.raw", ""},
		{ImportOptions{VMImage: "win", Source: "/artifacts/win.ISO"}, "win.iso", ""},
		{ImportOptions{VMImage: "x", VolumeName: "golden.qcow2"}, "golden.qcow2", ""},
		{ImportOptions{VMImage: strings.Repeat("a", 197)}, "", "invalid --vmimage: volume name"},
		{ImportOptions{VMImage: "x", VolumeName: strings.Repeat("a", 201)}, "", "invalid --volume-name: volume name"},
		{ImportOptions{VMImage: "x", VolumeName: "../etc"}, "", `invalid --volume-name: "../etc" is not a volume name`},
	} {
		got, err := tc.o.volumeName()
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%+v: error %v, want prefix %q", tc.o, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q, %v; want %q", tc.o, got, err, tc.want)
		}
	}
}

func TestImportJobNameCollisionFree(t *testing.T) {
	type in struct{ image, ns, provider, pool string }
	long := strings.Repeat("i", 70)
	inputs := []in{
		{"ubuntu", "ns", "host", "nvme_pool"},
		{"ubuntu", "ns", "host", "nvme-pool"},
		{"ubuntu", "ns", "host", "nvme pool"},
		{"ubuntu", "ns", "host", "NVME-POOL"},
		{"ubuntu.24", "ns", "host", "default"},
		{"ubuntu-24", "ns", "host", "default"},
		{"a-b", "ns", "c", "default"},
		{"a", "ns", "b-c", "default"},
		{"ubuntu", "ns2", "host", "default"},
		{"ubuntu", "ns", "host", "default"},
		{long, "ns", "host", "default"},
		{long, "ns", "host", "default2"},
		{long + "x", "ns", "host", "default"},
		{"ubuntu", "ns", "host", strings.Repeat("p", 300)},
		{"ubuntu", "ns", "host", "???"},
	}
	seen := map[string]in{}
	for _, i := range inputs {
		name := ImportJobName(i.image, i.ns, i.provider, i.pool)
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("%+v: %q is no DNS-1123 label (Job names are label values on their pods): %v", i, name, errs)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("%+v and %+v share Job %s", i, other, name)
		}
		seen[name] = i
		if ImportJobName(i.image, i.ns, i.provider, i.pool) != name {
			t.Errorf("%+v: name not deterministic", i)
		}
	}
	if got := ImportJobName("ubuntu-2404", "docs", "docs-host", "lab"); got != "import-ubuntu-2404-docs-host-lab-"+hashOf(10, "ubuntu-2404", "docs", "docs-host", "lab") {
		t.Errorf("readable prefix then the hash: %q", got)
	}
}

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("v", 70)
	for _, tc := range []struct {
		in, want string
	}{
		{"ubuntu-2404", "ubuntu-2404"},
		{"nvme_pool", "nvme_pool"},
		{"ubuntu.24", "ubuntu.24"},
		{"nvme pool", "nvme-pool-" + hashOf(10, "nvme pool")},
		{long, strings.Repeat("v", 52) + "-" + hashOf(10, long)},
		{"-édge-", "dge-" + hashOf(10, "-édge-")},
		{"???", hashOf(10, "???")},
	} {
		got := labelValue(tc.in)
		if got != tc.want {
			t.Errorf("labelValue(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("labelValue(%q) = %q: %v", tc.in, got, errs)
		}
	}
	if labelValue("nvme pool") == labelValue("nvme-pool") || labelValue(long) == labelValue(long+"w") {
		t.Error("label values collide")
	}
}

func TestImportIdentity(t *testing.T) {
	base := importIdentity("img", "ns", "p", "pool", "sha256:aa")
	for _, other := range []string{
		importIdentity("img2", "ns", "p", "pool", "sha256:aa"),
		importIdentity("img", "ns2", "p", "pool", "sha256:aa"),
		importIdentity("img", "ns", "p2", "pool", "sha256:aa"),
		importIdentity("img", "ns", "p", "pool2", "sha256:aa"),
		importIdentity("img", "ns", "p", "pool", "sha256:ab"),
		importIdentity("img", "nsp", "", "pool", "sha256:aa"),
	} {
		if other == base {
			t.Errorf("identity %s shared", base)
		}
	}
	if len(base) != 64 {
		t.Errorf("identity %q", base)
	}
}

func TestMarkerFormat(t *testing.T) {
	d := checksumDigest(t, "sha256:"+digestA)
	inProgress, done := markerContent(importing, d), markerContent(complete, d)
	if len(inProgress) != markerSize || len(done) != markerSize {
		t.Fatalf("markers must share one size to be rewritten in place: %d, %d, want %d", len(inProgress), len(done), markerSize)
	}
	for _, tc := range []struct {
		content string
		state   markerState
		ok      bool
	}{
		{string(inProgress), importing, true},
		{string(done), complete, true},
		// Written by earlier versions after the upload: complete.
		{"sha256:" + digestA + "\n", complete, true},
		{"sha512:" + strings.Repeat("ab", 64) + "\n", complete, true},
		// Not banlieue's: sha256sum's format, upper case, bare hex, garbage, empty.
		{digestA + "  disk.raw\n", 0, false},
		{"SHA256:" + strings.ToUpper(digestA), 0, false},
		{digestA, 0, false},
		{"importing", 0, false},
		{"", 0, false},
	} {
		state, got, ok := parseMarker(tc.content)
		if ok != tc.ok || ok && state != tc.state {
			t.Errorf("parseMarker(%q) = %v, %v, %v", tc.content, state, got, ok)
		}
	}
	if _, got, _ := parseMarker(string(inProgress)); got != d {
		t.Errorf("in-progress marker records %v", got)
	}
}

func checksumDigest(t *testing.T, s string) checksum.Digest {
	t.Helper()
	d, err := checksum.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
