package iso9660

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// These tests read images back with readers that share no code with this
// package: genisoimage's isoinfo, libisofs' xorriso, util-linux's blkid and
// 7-Zip.

func TestExternalReaders(t *testing.T) {
	volumes := map[string]Volume{
		"seed": seedVolume(),
		"odd sizes": {Label: "CIDATA", Files: []File{
			{Name: "empty"},
			{Name: "one-sector", Data: bytes.Repeat([]byte{0xa5}, SectorSize)},
			{Name: "three.sectors.bin", Data: bytes.Repeat([]byte("0123456789"), 500)},
		}},
		"unicode": {Label: "A_LABEL_OF_THIRTY_TWO_CHARACTERS", Files: []File{
			{Name: "café au lait", Data: []byte("crème\n")},
			{Name: "Ünïcødé-名前.yaml", Data: []byte("x: 1\n")},
		}},
	}
	for name, v := range volumes {
		t.Run(name, func(t *testing.T) {
			img, _ := build(t, v)
			checkWithTools(t, writeTemp(t, img), v)
		})
	}
}

// checkWithTools verifies the image at path against v with every external
// reader, each in a subtest so that a missing tool skips only itself.
func checkWithTools(t *testing.T, path string, v Volume) {
	t.Run("isoinfo", func(t *testing.T) {
		info := string(run(t, "isoinfo", "-d", "-i", path))
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"Volume id: " + v.Label + "\n",
			"Logical block size is: 2048\n",
			fmt.Sprintf("Volume size is: %d\n", st.Size()/SectorSize),
			"Joliet with UCS level 3 found",
			"NO Rock Ridge present",
		} {
			if !strings.Contains(info, want) {
				t.Errorf("isoinfo -d lacks %q:\n%s", want, info)
			}
		}
		for _, f := range v.Files {
			base, ext, err := primaryName(f.Name)
			if err != nil {
				t.Fatal(err)
			}
			if got := run(t, "isoinfo", "-i", path, "-x", "/"+string(primaryIdentifier(base, ext))); !bytes.Equal(got, f.Data) {
				t.Errorf("primary %s: isoinfo extracted %d bytes, want %d", f.Name, len(got), len(f.Data))
			}
			// isoinfo prints Joliet names in its own charset, so only
			// ASCII names can be looked up verbatim.
			if !isASCII(f.Name) {
				continue
			}
			if got := run(t, "isoinfo", "-J", "-i", path, "-x", "/"+f.Name); !bytes.Equal(got, f.Data) {
				t.Errorf("Joliet %s: isoinfo extracted %d bytes, want %d", f.Name, len(got), len(f.Data))
			}
		}
	})
	t.Run("xorriso", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "x")
		run(t, "xorriso", "-in_charset", "UTF-8", "-local_charset", "UTF-8",
			"-osirrox", "on", "-indev", path, "-extract", "/", dir)
		compareDir(t, dir, v.Files)
	})
	t.Run("7z", func(t *testing.T) {
		dir := t.TempDir()
		run(t, "7z", "x", "-y", "-o"+dir, path)
		compareDir(t, dir, v.Files)
	})
	t.Run("blkid", func(t *testing.T) {
		out := string(run(t, "blkid", "-p", "-o", "export", path))
		for _, want := range []string{"\nLABEL=" + v.Label + "\n", "\nTYPE=iso9660\n"} {
			if !strings.Contains("\n"+out, want) {
				t.Errorf("blkid lacks %q:\n%s", strings.TrimSpace(want), out)
			}
		}
	})
}

// compareDir checks that dir holds exactly files, byte for byte.
func compareDir(t *testing.T, dir string, files []File) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(files) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("extracted %q, want %d files", names, len(files))
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Errorf("%s: %v", f.Name, err)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s: extracted %d bytes that differ from the %d written", f.Name, len(got), len(f.Data))
		}
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
