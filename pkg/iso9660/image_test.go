package iso9660

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func seedVolume() Volume {
	return Volume{Label: "CIDATA", Files: []File{
		{Name: "user-data", Data: []byte("#cloud-config\npackages: [htop]\n")},
		{Name: "meta-data", Data: []byte("instance-id: 0f8fad5b-d9cb-469f-a165-70867728950e\nlocal-hostname: ns-vm\n")},
	}}
}

func TestLayoutMatchesSpec(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 3*SectorSize+1)
	v := Volume{Label: "CIDATA", Files: []File{
		{Name: "user-data", Data: big},
		{Name: "meta-data", Data: []byte("instance-id: i\n")},
		{Name: "empty", Data: nil},
	}}
	img, p := build(t, v)
	if p.pathTableLBA != [numTrees][2]uint32{{19, 20}, {21, 22}} {
		t.Errorf("path tables at %v, want L/M 19/20 and 21/22", p.pathTableLBA)
	}
	if p.rootLBA != [numTrees]uint32{23, 24} {
		t.Errorf("roots at %v, want 23 and 24", p.rootLBA)
	}
	// Files follow in name order: empty (one sector despite no data),
	// meta-data, then user-data over four sectors.
	want := map[string]uint32{"empty": 25, "meta-data": 26, "user-data": 27}
	if !maps.Equal(p.jolietExtent, want) {
		t.Errorf("extents %v, want %v", p.jolietExtent, want)
	}
	if want := (27 + 4) * SectorSize; len(img) != want {
		t.Errorf("image is %d bytes, want %d", len(img), want)
	}
	if !bytes.Equal(p.joliet["user-data"], big) {
		t.Error("user-data content differs")
	}
	if len(p.joliet["empty"]) != 0 || len(p.primary["EMPTY.;1"]) != 0 {
		t.Error("empty file is not empty")
	}
}

func TestBothTreesCarryTheSameFiles(t *testing.T) {
	_, p := build(t, seedVolume())
	if p.label != "CIDATA" {
		t.Errorf("label %q", p.label)
	}
	want := map[string]string{"META_DATA.;1": "meta-data", "USER_DATA.;1": "user-data"}
	if len(p.primary) != len(want) || len(p.joliet) != len(want) {
		t.Fatalf("primary %v, joliet %v", slices.Collect(maps.Keys(p.primary)), slices.Collect(maps.Keys(p.joliet)))
	}
	for primary, joliet := range want {
		if !bytes.Equal(p.primary[primary], p.joliet[joliet]) || p.joliet[joliet] == nil {
			t.Errorf("%s and %s differ or are missing", primary, joliet)
		}
	}
}

func TestPrimaryRecordOrder(t *testing.T) {
	// ECMA-119 9.3: an empty extension sorts before "1", so the version
	// suffix must play no part in the order.
	img, _ := build(t, Volume{Files: []File{{Name: "a.1"}, {Name: "a"}, {Name: "b"}}})
	var got []string
	root := img[23*SectorSize:]
	for off := 68; root[off] != 0; off += int(root[off]) {
		got = append(got, string(root[off+33:off+33+int(root[off+32])]))
	}
	if want := []string{"A.;1", "A.1;1", "B.;1"}; !slices.Equal(got, want) {
		t.Errorf("primary records %q, want %q", got, want)
	}
}

func TestDeterministic(t *testing.T) {
	v := seedVolume()
	v.Files = append(v.Files, File{Name: "network-config", Data: []byte("version: 2\n")}, File{Name: "vendor-data"})
	first, _ := build(t, v)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		rng.Shuffle(len(v.Files), func(i, j int) { v.Files[i], v.Files[j] = v.Files[j], v.Files[i] })
		again, _ := build(t, v)
		if !bytes.Equal(first, again) {
			t.Fatal("same files in another order gave different bytes")
		}
	}
}

// TestGolden pins the exact bytes of a seed; the content itself is checked
// by the reader above and by the external tools.
func TestGolden(t *testing.T) {
	img, _ := build(t, seedVolume())
	sum := sha256.Sum256(img)
	const want = "37b229af1ab00e5bfef3790d784732eec76e8334407ca2d0ee1bc096b44b9eee"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Errorf("SHA-256 %s, want %s", got, want)
	}
}

func TestTime(t *testing.T) {
	stamp := time.Date(2024, time.February, 29, 13, 14, 15, 160_000_000, time.FixedZone("x", 3600))
	v := seedVolume()
	v.Time = stamp
	img, _ := build(t, v)
	if got := string(img[16*SectorSize+813 : 16*SectorSize+829]); got != "2024022912141516" {
		t.Errorf("creation date %q, want it in UTC", got)
	}
	rec := img[23*SectorSize+18 : 23*SectorSize+25]
	if !bytes.Equal(rec, []byte{124, 2, 29, 12, 14, 15, 0}) {
		t.Errorf("recording date %v", rec)
	}
	v.Time = time.Date(1899, time.December, 31, 0, 0, 0, 0, time.UTC)
	if _, err := Build(v); err == nil || !strings.Contains(err.Error(), "1900-2155") {
		t.Errorf("year 1899: err = %v", err)
	}
}

func TestNoFiles(t *testing.T) {
	img, p := build(t, Volume{Label: "EMPTY"})
	if len(img) != 25*SectorSize || len(p.joliet) != 0 {
		t.Errorf("%d bytes, files %v", len(img), p.joliet)
	}
}

func TestLargeRootDirectory(t *testing.T) {
	// 40 names of 60 characters need several sectors per Joliet directory
	// and must not let a record cross a sector boundary.
	var v Volume
	for i := range 40 {
		v.Files = append(v.Files, File{Name: strings.Repeat("n", 26) + string(rune('A'+i%26)) + string(rune('a'+i/26)), Data: []byte{byte(i)}})
	}
	_, p := build(t, v)
	if len(p.joliet) != 40 || len(p.primary) != 40 {
		t.Fatalf("read %d/%d files", len(p.joliet), len(p.primary))
	}
	for _, f := range v.Files {
		if !bytes.Equal(p.joliet[f.Name], f.Data) {
			t.Errorf("%s content differs", f.Name)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	long := strings.Repeat("a", 65)
	tests := []struct {
		name  string
		vol   Volume
		error string
	}{
		{"label too long", Volume{Label: strings.Repeat("A", 33)}, "longer than 32"},
		{"label lower case", Volume{Label: "cidata"}, "only A-Z"},
		{"slash", Volume{Files: []File{{Name: "a/b"}}}, "path separator"},
		{"backslash", Volume{Files: []File{{Name: `a\b`}}}, "path separator"},
		{"empty name", Volume{Files: []File{{Name: ""}}}, "empty file name"},
		{"dot", Volume{Files: []File{{Name: "."}}}, "reserved"},
		{"dotdot", Volume{Files: []File{{Name: ".."}}}, "reserved"},
		{"control", Volume{Files: []File{{Name: "a\nb"}}}, "control character"},
		{"joliet forbidden", Volume{Files: []File{{Name: "a:b"}}}, "Joliet forbids"},
		{"outside BMP", Volume{Files: []File{{Name: "😀"}}}, "UCS-2"},
		{"bad utf-8", Volume{Files: []File{{Name: "\xff"}}}, "UTF-8"},
		{"joliet too long", Volume{Files: []File{{Name: long}}}, "Joliet allows 64"},
		{"primary too long", Volume{Files: []File{{Name: strings.Repeat("a", 31)}}}, "longer than 30"},
		{"duplicate", Volume{Files: []File{{Name: "x"}, {Name: "x"}}}, "duplicate"},
		{"case collision", Volume{Files: []File{{Name: "meta-data"}, {Name: "META-DATA"}}}, `both map to ISO 9660 name "META_DATA."`},
		{"mapping collision", Volume{Files: []File{{Name: "a-b"}, {Name: "a_b"}}}, "both map"},
		{"trailing dot collision", Volume{Files: []File{{Name: "a"}, {Name: "a."}}}, "both map"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.vol)
			if err == nil || !strings.Contains(err.Error(), tt.error) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.error)
			}
		})
	}
}
