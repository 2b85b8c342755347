package image

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	"banlieue.io/banlieue/pkg/extentdigest"
)

// The digest of what an upload is observed sending is the digest of the file it came from:
// data as sent, holes as that many zeros, in order, including holes longer than the zero
// buffer and data the uploader overwrites as soon as Data returns.
func TestUploadDigest(t *testing.T) {
	data := make([]byte, 3*262120+17)
	_, _ = rand.Read(data)
	type step struct {
		data []byte
		hole int64
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"data only", []step{{data: data}}},
		{"hole only", []step{{hole: 5<<20 + 3}}},
		{"data, long hole, data", []step{{data: data[:1000]}, {hole: 3*checksum.ChunkSize + 1}, {data: data[1000:]}}},
		{"many packets, short holes", []step{{data: data[:262120]}, {hole: 1}, {data: data[262120:524240]}, {hole: 4096}, {data: data[524240:]}}},
		{"nothing", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var file bytes.Buffer
			for _, s := range tc.steps {
				if s.data != nil {
					file.Write(s.data)
				} else {
					file.Write(make([]byte, s.hole))
				}
			}
			sha := sha256.Sum256(file.Bytes())
			sha5 := sha512.Sum512(file.Bytes())
			observe := func(d *uploadDigest) sentDigests {
				packet := make([]byte, 262120) // the uploader's one reused buffer
				for _, s := range tc.steps {
					if s.data == nil {
						d.Hole(s.hole)
						continue
					}
					for rest := s.data; len(rest) > 0; {
						n := copy(packet, rest)
						d.Data(packet[:n])
						_, _ = rand.Read(packet) // the next read overwrites it
						rest = rest[n:]
					}
				}
				return d.sums()
			}
			for _, given := range []checksum.Digest{{}, {Alg: "sha256", Hex: hex.EncodeToString(sha[:])}, {Alg: "sha512", Hex: hex.EncodeToString(sha5[:])}} {
				sent := observe(newUploadDigest(given, "", int64(file.Len())))
				gotSHA, gotOther := sent.sha, sent.other
				if want := "sha256:" + hex.EncodeToString(sha[:]); gotSHA.String() != want {
					t.Errorf("--checksum %q: sha256 = %s, want %s", given, gotSHA, want)
				}
				switch {
				case given.Alg == "sha512" && gotOther != given:
					t.Errorf("sha512 = %s, want %s", gotOther, given)
				case given.Alg != "sha512" && !gotOther.IsZero():
					t.Errorf("--checksum %q: a second digest %s was computed", given, gotOther)
				}
				if sent.extent != "" {
					t.Errorf("--checksum %q: an extent digest %s was computed without --extent-digest", given, sent.extent)
				}
			}
			// With --extent-digest only that digest is computed, and it is the file's.
			x := extentdigest.New(int64(file.Len()))
			_, _ = x.Write(file.Bytes())
			want, _ := x.Sum()
			sent := observe(newUploadDigest(checksum.Digest{Alg: "sha256", Hex: hex.EncodeToString(sha[:])}, want, int64(file.Len())))
			if sent.extent != want || sent.extentErr != nil || !sent.sha.IsZero() || !sent.other.IsZero() {
				t.Errorf("with --extent-digest: sent %+v, want only the extent digest %s", sent, want)
			}
		})
	}
}

func TestUploadMismatch(t *testing.T) {
	sha := func(c string) checksum.Digest { return checksum.Digest{Alg: "sha256", Hex: strings.Repeat(c, 64)} }
	sha5 := func(c string) checksum.Digest { return checksum.Digest{Alg: "sha512", Hex: strings.Repeat(c, 128)} }
	ext := func(c string) string { return "extents-sha256:" + strings.Repeat(c, 64) }
	const path = "/artifacts/disk.raw"
	for _, tc := range []struct {
		name                           string
		digest, given, sent, sentOther checksum.Digest
		extent                         string
		sentExtent                     sentDigests
		want                           string // "" for no mismatch
	}{
		{name: "job with an extent digest: it matches", digest: sha("a"), given: sha("a"), extent: ext("1"), sentExtent: sentDigests{extent: ext("1")}},
		{name: "job with an extent digest: it does not", digest: sha("a"), given: sha("a"), extent: ext("1"), sentExtent: sentDigests{extent: ext("2")},
			want: "invalid --extent-digest: extent digest mismatch for " + path + ": expected " + ext("1") + ", computed " + ext("2") + " over the bytes uploaded"},
		{name: "job with an extent digest: the upload sent another size", digest: sha("a"), given: sha("a"), extent: ext("1"),
			sentExtent: sentDigests{extentErr: errors.New("extent digest: 5 bytes were fed for a content of 4 bytes")},
			want:       "invalid --extent-digest: extent digest mismatch for " + path + ": expected " + ext("1") + ", computed none (extent digest: 5 bytes"},
		{name: "job: the sha256 --checksum matches", digest: sha("a"), given: sha("a"), sent: sha("a")},
		{name: "job: the sha256 --checksum does not", digest: sha("a"), given: sha("a"), sent: sha("b"),
			want: "invalid --checksum: checksum mismatch for " + path + ": expected " + sha("a").String() + ", computed " + sha("b").String() + " over the bytes uploaded"},
		{name: "by hand: the upload is what was hashed before", digest: sha("a"), sent: sha("a")},
		{name: "by hand: the file changed after it was hashed", digest: sha("a"), sent: sha("c"),
			want: "invalid --source: " + path + " changed during the import: its sha256 was " + sha("a").String() + " before the upload and " + sha("c").String() + " over the bytes uploaded"},
		{name: "sha512 --checksum and sha256 both match", digest: sha("a"), given: sha5("e"), sent: sha("a"), sentOther: sha5("e")},
		{name: "sha512 --checksum does not match", digest: sha("a"), given: sha5("e"), sent: sha("c"), sentOther: sha5("f"),
			want: "invalid --checksum: checksum mismatch for " + path + ": expected " + sha5("e").String() + ", computed " + sha5("f").String() + " over the bytes uploaded"},
		{name: "sha512 matches but the marker's sha256 does not", digest: sha("a"), given: sha5("e"), sent: sha("c"), sentOther: sha5("e"),
			want: "invalid --source: " + path + " changed during the import"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := tc.sentExtent
			if tc.extent == "" {
				sent = sentDigests{sha: tc.sent, other: tc.sentOther}
			}
			err := uploadMismatch(path, tc.digest, tc.given, tc.extent, sent)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}
