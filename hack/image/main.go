// Command image packs one static binary into a single-layer container image without a container
// engine (go-containerregistry) and writes it as an image tarball that `ctr images import` and
// `docker load` read. hack/image.sh uses it for banlieue's image (the Dockerfile's image: the
// binary at /banlieue, user 65532, CA roots) and hack/node.sh for the node's pause image.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// caPath is where Go's crypto/x509 (and distroless, which the Dockerfile builds on) look for roots.
const caPath = "etc/ssl/certs/ca-certificates.crt"

type options struct {
	binary, target, tag, out, user, caBundle, version string
}

// Banlieue's image, as the Dockerfile describes it; hack/image.sh relies on these defaults.
const (
	banlieuePath = "/banlieue"
	banlieueUser = "65532:65532"
)

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "static binary to pack (required)")
	flag.StringVar(&o.target, "path", banlieuePath, "path of the binary in the image; also the entrypoint")
	flag.StringVar(&o.tag, "tag", "", "image reference written into the tarball (required)")
	flag.StringVar(&o.out, "out", "", "tarball to write (required)")
	flag.StringVar(&o.user, "user", banlieueUser, "numeric uid:gid the image runs as")
	flag.StringVar(&o.caBundle, "ca-bundle", "", "PEM CA roots to install at /"+caPath+" (empty: none)")
	flag.StringVar(&o.version, "version", "", "org.opencontainers.image.version label (empty: none)")
	flag.Parse()
	if o.binary == "" || o.tag == "" || o.out == "" {
		fmt.Fprintln(os.Stderr, "image: --binary, --tag and --out are required")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ref, err := name.NewTag(o.tag)
	if err != nil {
		return fmt.Errorf("parsing --tag: %w", err)
	}
	uid, gid, err := parseUser(o.user)
	if err != nil {
		return err
	}
	layerTar, err := buildLayer(o, uid, gid)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return fmt.Errorf("making the layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fmt.Errorf("appending the layer: %w", err)
	}
	cfg := v1.Config{
		Entrypoint: []string{o.target},
		User:       o.user,
		WorkingDir: "/home/nonroot",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
	}
	if o.caBundle != "" {
		cfg.Env = append(cfg.Env, "SSL_CERT_FILE=/"+caPath)
	}
	if o.version != "" {
		cfg.Labels = map[string]string{"org.opencontainers.image.version": o.version}
	}
	img, err = mutate.Config(img, cfg)
	if err != nil {
		return fmt.Errorf("setting the image config: %w", err)
	}
	img, err = mutate.ConfigFile(img, withPlatform(img))
	if err != nil {
		return fmt.Errorf("setting the platform: %w", err)
	}
	if err := tarball.WriteToFile(o.out, ref, img); err != nil {
		return fmt.Errorf("writing %s: %w", o.out, err)
	}
	return nil
}

func withPlatform(img v1.Image) *v1.ConfigFile {
	cf, err := img.ConfigFile()
	if err != nil || cf == nil {
		cf = &v1.ConfigFile{}
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	return cf
}

func parseUser(user string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(user, ":")
	if !ok {
		return 0, 0, fmt.Errorf("--user %q: want numeric uid:gid", user)
	}
	if uid, err = strconv.Atoi(u); err != nil {
		return 0, 0, fmt.Errorf("--user %q: uid: %w", user, err)
	}
	if gid, err = strconv.Atoi(g); err != nil {
		return 0, 0, fmt.Errorf("--user %q: gid: %w", user, err)
	}
	return uid, gid, nil
}

// buildLayer writes the one layer, laid out as distroless/static:nonroot (the Dockerfile's base):
// the binary, a writable /tmp, the nonroot user's passwd/group entries and home (the working
// directory), and the CA roots when given.
func buildLayer(o options, uid, gid int) ([]byte, error) {
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return nil, fmt.Errorf("reading --binary: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dir := func(path string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path + "/", Mode: mode, ModTime: epoch})
	}
	file := func(path string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	steps := []func() error{
		func() error { return dir("tmp", 0o1777) },
		func() error { return dir("etc", 0o755) },
		func() error { return dir("home", 0o755) },
		func() error {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "home/nonroot/", Mode: 0o700, Uid: uid, Gid: gid, ModTime: epoch})
		},
		func() error {
			return file("etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, gid))
		},
		func() error { return file("etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", gid)) },
	}
	if o.caBundle != "" {
		roots, err := os.ReadFile(o.caBundle)
		if err != nil {
			return nil, fmt.Errorf("reading --ca-bundle: %w", err)
		}
		steps = append(steps,
			func() error { return dir("etc/ssl", 0o755) },
			func() error { return dir("etc/ssl/certs", 0o755) },
			func() error { return file(caPath, 0o644, roots) })
	}
	steps = append(steps, func() error { return file(strings.TrimPrefix(o.target, "/"), 0o755, bin) })
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, fmt.Errorf("writing the layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("writing the layer: %w", err)
	}
	return buf.Bytes(), nil
}
