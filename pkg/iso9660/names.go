package iso9660

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

const (
	// maxJolietLen is the Joliet limit of 64 UCS-2 characters per name.
	maxJolietLen = 64
	// maxPrimaryLen bounds name plus extension (ECMA-119 7.5.1, 10.2).
	maxPrimaryLen = 30
	// jolietForbidden are the characters the Joliet specification excludes
	// besides control characters.
	jolietForbidden = `*/:;?\`
)

// isDChar reports whether c is a d-character (ECMA-119 7.4.1).
func isDChar(c byte) bool {
	return 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// checkName rejects names the Joliet tree cannot carry verbatim.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("iso9660: empty file name")
	case name == "." || name == "..":
		return fmt.Errorf("iso9660: file name %q is reserved", name)
	case strings.ContainsAny(name, `/\`):
		return fmt.Errorf("iso9660: file name %q contains a path separator; images are flat", name)
	case !utf8.ValidString(name):
		return fmt.Errorf("iso9660: file name %q is not valid UTF-8", name)
	}
	n := 0
	for _, r := range name {
		switch {
		case r < 0x20 || r == 0x7f:
			return fmt.Errorf("iso9660: file name %q contains control character %U", name, r)
		case strings.ContainsRune(jolietForbidden, r):
			return fmt.Errorf("iso9660: file name %q contains %q, which Joliet forbids", name, r)
		case r > 0xffff:
			return fmt.Errorf("iso9660: file name %q contains %U, outside the UCS-2 range Joliet can record", name, r)
		}
		n++
	}
	if n > maxJolietLen {
		return fmt.Errorf("iso9660: file name %q has %d characters; Joliet allows %d", name, n, maxJolietLen)
	}
	return nil
}

// jolietIdentifier encodes a checked name as UCS-2 big-endian.
func jolietIdentifier(name string) []byte {
	units := utf16.Encode([]rune(name))
	b := make([]byte, 0, 2*len(units))
	for _, u := range units {
		b = append(b, byte(u>>8), byte(u))
	}
	return b
}

// primaryName maps a checked name to the primary tree's file name and
// extension, without separators or version (see the package doc).
func primaryName(name string) (base, ext string, err error) {
	var b strings.Builder
	for _, r := range name {
		switch {
		case 'a' <= r && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		case r == '.' || r < utf8.RuneSelf && isDChar(byte(r)):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	mapped := b.String()
	if dot := strings.LastIndexByte(mapped, '.'); dot >= 0 {
		base, ext = strings.ReplaceAll(mapped[:dot], ".", "_"), mapped[dot+1:]
	} else {
		base = mapped
	}
	if len(base)+len(ext) > maxPrimaryLen {
		return "", "", fmt.Errorf("iso9660: file name %q maps to ISO 9660 name %q, longer than %d characters", name, base+"."+ext, maxPrimaryLen)
	}
	return base, ext, nil
}

// primaryIdentifier is the recorded file identifier: name, separator 1,
// extension, separator 2 and version 1 (ECMA-119 7.5.1).
func primaryIdentifier(base, ext string) []byte {
	return []byte(base + "." + ext + ";1")
}

// compareNames orders names as ECMA-119 9.3 orders file identifiers: by name,
// then by extension, the shorter of each padded with spaces. The split is at
// the last dot. Comparing runes gives code-point order, which is UCS-2 order
// for the Joliet tree and byte order for the primary one. Names equal under
// padding ("a", "a ") fall back to plain string order so that the order is
// total and the output deterministic.
func compareNames(a, b string) int {
	aBase, aExt := splitExt(a)
	bBase, bExt := splitExt(b)
	if c := comparePadded(aBase, bBase); c != 0 {
		return c
	}
	if c := comparePadded(aExt, bExt); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func splitExt(name string) (base, ext string) {
	if dot := strings.LastIndexByte(name, '.'); dot >= 0 {
		return name[:dot], name[dot+1:]
	}
	return name, ""
}

func comparePadded(a, b string) int {
	ar, br := []rune(a), []rune(b)
	for i := 0; i < max(len(ar), len(br)); i++ {
		x, y := rune(' '), rune(' ')
		if i < len(ar) {
			x = ar[i]
		}
		if i < len(br) {
			y = br[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
