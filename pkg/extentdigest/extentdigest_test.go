package extentdigest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// spec is the digest exactly as the package comment and ADR-0134 define it, written out from
// the whole content with no streaming: the Hasher must agree with it however it is fed.
func spec(content []byte) string {
	var b bytes.Buffer
	b.WriteString("banlieue extent digest v1\n")
	_ = binary.Write(&b, binary.BigEndian, uint64(4096))
	_ = binary.Write(&b, binary.BigEndian, uint64(len(content)))
	for off := 0; off < len(content); off += 4096 {
		blk := content[off:min(off+4096, len(content))]
		if bytes.Count(blk, []byte{0}) == len(blk) {
			continue
		}
		_ = binary.Write(&b, binary.BigEndian, uint64(off))
		b.Write(blk)
	}
	sum := sha256.Sum256(b.Bytes())
	return "extents-sha256:" + hex.EncodeToString(sum[:])
}

// piece is one call fed to the Hasher: n zero bytes through Zeros when hole, else data.
type piece struct {
	data []byte
	hole int64
}

func feed(t *testing.T, size int64, pieces ...piece) string {
	t.Helper()
	x := New(size)
	for _, p := range pieces {
		if p.data == nil {
			x.Zeros(p.hole)
			continue
		}
		_, _ = x.Write(p.data)
	}
	s, err := x.Sum()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func data(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i%251) + 1 // never zero
	}
	return b
}

func hole(n int64) piece      { return piece{hole: n} }
func bytesOf(b []byte) piece  { return piece{data: b} }
func zeros(n int) piece       { return piece{data: make([]byte, n)} }
func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
func zeroBytes(n int) []byte  { return make([]byte, n) }
func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 1
	return c
}

func TestSameContentSameDigestWhateverTheLayout(t *testing.T) {
	d := data(3*4096+100, 7)
	content := cat(d[:5000], zeroBytes(3*4096), d[5000:], zeroBytes(10000))
	want := spec(content)
	size := int64(len(content))
	for _, tc := range []struct {
		name   string
		pieces []piece
	}{
		{"all as data in one write", []piece{bytesOf(content)}},
		{"zeros as a hole", []piece{bytesOf(d[:5000]), hole(3 * 4096), bytesOf(d[5000:]), hole(10000)}},
		{"zeros written as data, by the filesystem's choice", []piece{bytesOf(d[:5000]), zeros(3 * 4096), bytesOf(d[5000:]), zeros(10000)}},
		{"holes split and unaligned", []piece{bytesOf(d[:4000]), bytesOf(d[4000:5000]), hole(1), hole(4095), zeros(4096), hole(4096),
			bytesOf(d[5000:5001]), bytesOf(d[5001:]), zeros(3), hole(9997)}},
		{"a hole, then data, inside one block", []piece{bytesOf(d[:5000]), hole(3*4096 - 7), zeros(7), bytesOf(d[5000:]), hole(10000)}},
		{"byte by byte", func() []piece {
			var ps []piece
			for _, c := range content {
				ps = append(ps, bytesOf([]byte{c}))
			}
			return ps
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := feed(t, size, tc.pieces...); got != want {
				t.Errorf("digest %s, want %s (the spec's)", got, want)
			}
		})
	}
}

func TestDifferentContentDifferentDigest(t *testing.T) {
	d := data(8192, 3)
	base := cat(d, zeroBytes(8192), d)
	withData := bytes.Clone(base)
	withData[8192+4096+9] = 1 // data where base has a hole
	for _, tc := range []struct {
		name  string
		other []byte
	}{
		{"a bit flipped inside an extent", flip(base, 100)},
		{"a bit flipped in the last byte", flip(base, len(base)-1)},
		{"data where the other has a hole", withData},
		{"the same extents at another offset", cat(zeroBytes(4096), d, zeroBytes(4096), d)},
		{"a longer trailing hole (another virtual size)", cat(base, zeroBytes(4096))},
		{"one zero byte longer, not a whole block", cat(base, zeroBytes(1))},
		{"a block of data swapped with its neighbour", cat(d[4096:], d[:4096], zeroBytes(8192), d)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := feed(t, int64(len(base)), bytesOf(base)), feed(t, int64(len(tc.other)), bytesOf(tc.other))
			if a == b {
				t.Errorf("same digest %s for different contents", a)
			}
			if b != spec(tc.other) {
				t.Errorf("digest %s, want the spec's %s", b, spec(tc.other))
			}
		})
	}
}

func TestEdgeSizes(t *testing.T) {
	for _, size := range []int{0, 1, 4095, 4096, 4097, 3*4096 + 1} {
		for _, fill := range []string{"zero", "data"} {
			c := zeroBytes(size)
			if fill == "data" {
				c = data(size, 1)
			}
			if got, want := feed(t, int64(size), bytesOf(c)), spec(c); got != want {
				t.Errorf("size %d %s: %s, want %s", size, fill, got, want)
			}
			if fill == "zero" {
				if got, want := feed(t, int64(size), hole(int64(size))), spec(c); got != want {
					t.Errorf("size %d as one hole: %s, want %s", size, got, want)
				}
			}
		}
	}
}

func TestSumRefusesAContentOfAnotherSize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pieces []piece
	}{
		{"short", []piece{bytesOf(data(4000, 1))}},
		{"long by data", []piece{bytesOf(data(4097, 1))}},
		{"long by a hole", []piece{bytesOf(data(4000, 1)), hole(97)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := New(4096)
			for _, p := range tc.pieces {
				if p.data == nil {
					x.Zeros(p.hole)
				} else {
					_, _ = x.Write(p.data)
				}
			}
			if s, err := x.Sum(); err == nil {
				t.Errorf("Sum = %s, want an error", s)
			}
		})
	}
}

func TestParse(t *testing.T) {
	good := "extents-sha256:" + strings.Repeat("ab", 32)
	for in, want := range map[string]string{
		good:                  good,
		strings.ToUpper(good): good,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "sha256:" + strings.Repeat("ab", 32), "extents-sha256:" + strings.Repeat("ab", 31),
		"extents-sha256:" + strings.Repeat("zz", 32), "extents-sha256"} {
		if got, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %q, want an error", bad, got)
		}
	}
}

// FuzzAnyFeedingMatchesTheSpec cuts a content at fuzzer-chosen points and feeds each piece as
// data or, when it is all zeros, as a hole: the digest must always be the spec's.
func FuzzAnyFeedingMatchesTheSpec(f *testing.F) {
	f.Add([]byte("abc"), uint64(1), uint16(8000))
	f.Add([]byte{0, 0, 1}, uint64(42), uint16(4097))
	f.Fuzz(func(t *testing.T, pattern []byte, seed uint64, size uint16) {
		content := make([]byte, size)
		if len(pattern) > 0 {
			r := rand.New(rand.NewPCG(seed, 0))
			for i := 0; i < len(content); {
				// runs of zeros and of the pattern, so whole zero blocks occur
				n := min(r.IntN(6000), len(content)-i)
				if r.IntN(2) == 0 {
					for j := range n {
						content[i+j] = pattern[(i+j)%len(pattern)]
					}
				}
				i += n
			}
		}
		r := rand.New(rand.NewPCG(seed, 1))
		x := New(int64(len(content)))
		for rest := content; len(rest) > 0; {
			n := 1 + r.IntN(min(len(rest), 9000))
			p := rest[:n]
			rest = rest[n:]
			if bytes.Count(p, []byte{0}) == n && r.IntN(2) == 0 {
				x.Zeros(int64(n))
				continue
			}
			_, _ = x.Write(p)
		}
		got, err := x.Sum()
		if err != nil {
			t.Fatal(err)
		}
		if want := spec(content); got != want {
			t.Fatalf("digest %s, want the spec's %s", got, want)
		}
	})
}

// BenchmarkWrite is the cost per byte of data, in upload-sized (262 120-byte, unaligned) writes.
func BenchmarkWrite(b *testing.B) {
	p := data(262120, 5)
	b.SetBytes(int64(len(p)))
	x := New(math.MaxInt64) // never reached: every write is hashed
	for b.Loop() {
		_, _ = x.Write(p)
	}
}
