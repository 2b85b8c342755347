package image

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"strings"
	"testing"

	"banlieue.io/banlieue/internal/imagebuilder/checksum"
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
			for _, given := range []checksum.Digest{{}, {Alg: "sha256", Hex: hex.EncodeToString(sha[:])}, {Alg: "sha512", Hex: hex.EncodeToString(sha5[:])}} {
				d := newUploadDigest(given)
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
				gotSHA, gotOther := d.sums()
				if want := "sha256:" + hex.EncodeToString(sha[:]); gotSHA.String() != want {
					t.Errorf("--checksum %q: sha256 = %s, want %s", given, gotSHA, want)
				}
				switch {
				case given.Alg == "sha512" && gotOther != given:
					t.Errorf("sha512 = %s, want %s", gotOther, given)
				case given.Alg != "sha512" && !gotOther.IsZero():
					t.Errorf("--checksum %q: a second digest %s was computed", given, gotOther)
				}
			}
		})
	}
}

func TestUploadMismatch(t *testing.T) {
	sha := func(c string) checksum.Digest { return checksum.Digest{Alg: "sha256", Hex: strings.Repeat(c, 64)} }
	sha5 := func(c string) checksum.Digest { return checksum.Digest{Alg: "sha512", Hex: strings.Repeat(c, 128)} }
	const path = "/artifacts/disk.raw"
	for _, tc := range []struct {
		name                           string
		digest, given, sent, sentOther checksum.Digest
		want                           string // "" for no mismatch
	}{
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
			err := uploadMismatch(path, tc.digest, tc.given, tc.sent, tc.sentOther)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}
