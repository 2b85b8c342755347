package vmexport

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"banlieue.io/banlieue/pkg/libvirt"
)

// DiskFile is the exported disk's file name in a directory target and, under disk/, in a
// containerDisk image, where the imagebuilder's OCI source finds it.
const DiskFile = "disk.qcow2"

// ToDir exports vol into dir/disk.qcow2 and its digest into dir/disk.qcow2.sha256 (sha256sum's
// format). The disk is written as disk.qcow2.part and renamed once verified, so a reader never
// sees a partial disk under the final name, and a retry starts the part afresh.
func ToDir(ctx context.Context, h Host, pool libvirt.StoragePool, vol libvirt.StorageVol, copyName, dir string, t Options) (Result, error) {
	final := filepath.Join(dir, DiskFile)
	part := final + ".part"
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return Result{}, &StepError{StepPublish, err}
	}
	res, err := Disk(ctx, h, pool, vol, copyName, f, t)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = &StepError{StepPublish, cerr}
	}
	if err != nil {
		_ = os.Remove(part)
		return Result{}, err
	}
	sum := fmt.Sprintf("%s  %s\n", res.Digest[len("sha256:"):], DiskFile)
	if err := os.WriteFile(final+".sha256", []byte(sum), 0o644); err != nil {
		return Result{}, &StepError{StepPublish, err}
	}
	if err := os.Rename(part, final); err != nil {
		return Result{}, &StepError{StepPublish, err}
	}
	return res, nil
}

// qemuID is the user and group QEMU runs as in a containerDisk's consumers (KubeVirt's 107).
const qemuID = 107

// diskLayer is a layer holding path as disk/disk.qcow2, read from the file each time the layer is
// opened (for its digest, then its upload): memory stays at the copy buffers.
func diskLayer(path string, size int64) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		pr, pw := io.Pipe()
		go func() {
			defer func() { _ = f.Close() }() // read only
			tw := tar.NewWriter(pw)
			err := tw.WriteHeader(&tar.Header{Name: "disk/", Typeflag: tar.TypeDir, Mode: 0o555, Uid: qemuID, Gid: qemuID})
			if err == nil {
				err = tw.WriteHeader(&tar.Header{Name: "disk/" + DiskFile, Typeflag: tar.TypeReg, Mode: 0o444, Size: size, Uid: qemuID, Gid: qemuID})
			}
			if err == nil {
				_, err = io.Copy(tw, io.NewSectionReader(f, 0, size))
			}
			if err == nil {
				err = tw.Close()
			}
			pw.CloseWithError(err)
		}()
		return pr, nil
	})
}

// PushContainerDisk pushes the exported disk at path (res as Disk returned it) to ref as a
// one-layer containerDisk image and returns the image pinned by digest (repository@sha256:...),
// the form a VMImage's OCI source takes. The file is checked against res.Digest first; the
// registry verifies each blob against its digest on upload, and the manifest is read back by
// digest after. arch is the guest's (the VMImage's architecture, which selects the platform of
// an index when pulled); opts carry the transport and credentials; ctx bounds the whole push.
func PushContainerDisk(ctx context.Context, path string, res Result, ref name.Reference, arch string, opts ...remote.Option) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", &StepError{StepPublish, err}
	}
	got, err := FileDigest(io.NewSectionReader(f, 0, res.Size))
	_ = f.Close()
	if err == nil && got != res.Digest {
		err = fmt.Errorf("%s reads as %s, the export was %s", path, got, res.Digest)
	}
	if err != nil {
		return "", &StepError{StepVerify, err}
	}
	layer, err := diskLayer(path, res.Size)
	if err != nil {
		return "", &StepError{StepPublish, err}
	}
	// The config first: AppendLayers adds the layer's diff ID to it.
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		OS: "linux", Architecture: arch,
		Created: v1.Time{Time: time.Unix(0, 0).UTC()},
		RootFS:  v1.RootFS{Type: "layers"},
		Config:  v1.Config{Labels: map[string]string{"io.banlieue.export.disk-digest": res.Digest}},
	})
	if err == nil {
		img, err = mutate.AppendLayers(img, layer)
	}
	if err != nil {
		return "", &StepError{StepPublish, err}
	}
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	if err := remote.Write(ref, img, opts...); err != nil {
		return "", &StepError{StepPublish, fmt.Errorf("pushing to %s: %w", ref.Context(), err)}
	}
	digest, err := img.Digest()
	if err != nil {
		return "", &StepError{StepPublish, err}
	}
	pinned := ref.Context().Digest(digest.String())
	desc, err := remote.Head(pinned, opts...)
	if err != nil {
		return "", &StepError{StepVerify, fmt.Errorf("reading %s back: %w", pinned, err)}
	}
	if desc.Digest != digest {
		return "", &StepError{StepVerify, fmt.Errorf("%s serves manifest %s, pushed %s", ref.Context(), desc.Digest, digest)}
	}
	return pinned.String(), nil
}
