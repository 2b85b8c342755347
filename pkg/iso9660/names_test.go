package iso9660

import (
	"slices"
	"testing"
)

func TestPrimaryName(t *testing.T) {
	tests := []struct{ name, want string }{
		{"meta-data", "META_DATA.;1"},
		{"user-data", "USER_DATA.;1"},
		{"network-config", "NETWORK_CONFIG.;1"},
		{"README.txt", "README.TXT;1"},
		{"a.tar.gz", "A_TAR.GZ;1"},
		{".hidden", ".HIDDEN;1"},
		{"trailing.", "TRAILING.;1"},
		{"café", "CAF_.;1"},
		{"x y+z", "X_Y_Z.;1"},
		{"Mixed_Case09", "MIXED_CASE09.;1"},
		{"abcdefghijklmnopqrstuvwxyz0123", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123.;1"},
	}
	for _, tt := range tests {
		base, ext, err := primaryName(tt.name)
		if err != nil {
			t.Errorf("%q: %v", tt.name, err)
			continue
		}
		if got := string(primaryIdentifier(base, ext)); got != tt.want {
			t.Errorf("%q maps to %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestJolietIdentifier(t *testing.T) {
	got := jolietIdentifier("mé-ta")
	want := []byte{0, 'm', 0, 0xe9, 0, '-', 0, 't', 0, 'a'}
	if !slices.Equal(got, want) {
		t.Errorf("got % x, want % x", got, want)
	}
}

func TestCompareNames(t *testing.T) {
	// ECMA-119 9.3: name first, padded with spaces, then the extension.
	names := []string{"b", "a.z", "a", "a b", "ab", "a.b", "a "}
	slices.SortFunc(names, compareNames)
	want := []string{"a", "a ", "a.b", "a.z", "a b", "ab", "b"}
	if !slices.Equal(names, want) {
		t.Errorf("sorted %q, want %q", names, want)
	}
}
