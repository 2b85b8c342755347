package vmexport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/vmexport/exportjob"
	"banlieue.io/banlieue/pkg/libvirt"
)

// MachineOptions name the disk ExportMachine takes and where it goes: exactly one of OutputDir
// and Registry.
type MachineOptions struct {
	// Namespace and Machine name the LibvirtMachine, whose status says which volume is its own.
	// Unset, Volume names the volume instead.
	Namespace, Machine string
	// Volume, resolved by the export controller from the machine, spares the export Job's
	// account any read of machines: it names the Provider, the domain that must be shut off, and
	// the pool and volume to copy. Exactly one of Machine and Volume.
	Volume *VolumeRef
	// Disk is one of the machine's spec.disks; empty: the first (the OS disk).
	Disk string
	// ID names the host's temporary copy, so a retry of the same export finds and replaces its
	// own; empty: the machine's UID.
	ID string
	// OutputDir receives disk.qcow2 and disk.qcow2.sha256.
	OutputDir string
	// Registry is the repository (with an optional tag) the containerDisk is pushed to; the
	// credentials are the Docker config's (DOCKER_CONFIG), never a flag.
	Registry string
	// InsecureRegistry lets Registry be reached over plain HTTP.
	InsecureRegistry bool
	// Architecture of the guest, recorded in the image's config (amd64 or arm64).
	Architecture string
	// ScratchDir holds the disk before a push; empty: the system's temporary directory.
	ScratchDir string
	Options    Options
}

// VolumeRef is one machine's volume on its Provider's host (exportjob.VolumeRef).
type VolumeRef = exportjob.VolumeRef

// MachineResult is what ExportMachine published.
type MachineResult = exportjob.MachineResult

// dialTimeout bounds the connection to the host; every later call has the client's own.
const dialTimeout = 30 * time.Second

// ErrVMRunning is an export refused because the machine's domain is not shut off: a running
// guest changes the disk under the copy (docs/adr/0157-vm-export-flattened-copy-of-a-stopped-disk.md).
var ErrVMRunning = errors.New("the VM is not stopped: stop it first, an export copies a stopped disk")

// ExportMachine exports one disk of a stopped LibvirtMachine: only a volume the machine's
// status records as its own, of a domain that is shut off before and after the host's copy.
func ExportMachine(ctx context.Context, kube client.Reader, o MachineOptions, log io.Writer) (MachineResult, error) {
	if (o.OutputDir == "") == (o.Registry == "") {
		return MachineResult{}, errors.New("give exactly one of --output-dir and --registry")
	}
	switch o.Architecture {
	case "", "amd64", "arm64":
	default:
		return MachineResult{}, fmt.Errorf("invalid --architecture %q: amd64 or arm64", o.Architecture)
	}
	var dest name.Reference
	if o.Registry != "" {
		var opts []name.Option
		if o.InsecureRegistry {
			opts = append(opts, name.Insecure)
		}
		var err error
		if dest, err = name.ParseReference(o.Registry, opts...); err != nil {
			return MachineResult{}, fmt.Errorf("invalid --registry: %w", err)
		}
		if _, ok := dest.(name.Digest); ok {
			return MachineResult{}, errors.New("invalid --registry: name a repository or a tag; the digest is the export's")
		}
	}
	ref, err := resolveVolume(ctx, kube, &o)
	if err != nil {
		return MachineResult{}, err
	}
	provider := &banlieuev1.Provider{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: ref.ProviderNamespace, Name: ref.Provider}, provider); err != nil {
		return MachineResult{}, fmt.Errorf("reading Provider %s/%s: %w", ref.ProviderNamespace, ref.Provider, err)
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	host, err := hostconn.Dial(dctx, kube, provider)
	cancel()
	if err != nil {
		return MachineResult{}, fmt.Errorf("connecting to Provider %s/%s: %w", ref.ProviderNamespace, ref.Provider, err)
	}
	defer host.Close()

	vol, id := ref.Volume, o.ID
	stopped := func(ctx context.Context) error { return checkStopped(ctx, host, ref.Domain) }
	if err := stopped(ctx); err != nil {
		return MachineResult{}, err
	}
	pool, err := host.StoragePoolLookupByName(ctx, ref.Pool)
	if err != nil {
		return MachineResult{}, fmt.Errorf("looking up pool %s: %w", ref.Pool, err)
	}
	v, err := host.StorageVolLookupByName(ctx, pool, vol)
	if err != nil {
		return MachineResult{}, fmt.Errorf("looking up volume %s: %w", vol, err)
	}
	opts := o.Options
	opts.AfterFlatten = stopped
	copyName := CopyName(vol, id)
	_, _ = fmt.Fprintf(log, "exporting volume %s of domain %s from pool %s\n", vol, ref.Domain, pool.Name)

	dir := o.OutputDir
	if o.Registry != "" {
		if dir, err = os.MkdirTemp(o.ScratchDir, "export-"); err != nil {
			return MachineResult{}, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
	}
	res, err := ToDir(ctx, host, pool, v, copyName, dir, opts)
	if err != nil {
		return MachineResult{}, err
	}
	out := MachineResult{Result: res, Volume: vol}
	_, _ = fmt.Fprintf(log, "downloaded %d bytes (%s)\n", res.Size, res.Digest)
	if o.Registry == "" {
		out.File = filepath.Join(dir, DiskFile)
		return out, nil
	}
	arch := o.Architecture
	if arch == "" {
		arch = "amd64"
	}
	img, err := PushContainerDisk(ctx, filepath.Join(dir, DiskFile), res, dest, arch,
		remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return MachineResult{}, err
	}
	_, _ = fmt.Fprintf(log, "pushed %s\n", img)
	out.Image = img
	return out, nil
}

// resolveVolume is the volume o names: Volume as given, or the machine's own, read from its
// LibvirtMachine. o.ID defaults to the machine's UID; with Volume it is required, since a retry
// must find the copy its first attempt left.
func resolveVolume(ctx context.Context, kube client.Reader, o *MachineOptions) (VolumeRef, error) {
	if (o.Machine == "") == (o.Volume == nil) {
		return VolumeRef{}, errors.New("give exactly one of --machine and --volume")
	}
	if v := o.Volume; v != nil {
		for flag, val := range map[string]string{"--provider": v.Provider, "--provider-namespace": v.ProviderNamespace,
			"--domain": v.Domain, "--pool": v.Pool, "--volume": v.Volume, "--id": o.ID} {
			if val == "" {
				return VolumeRef{}, fmt.Errorf("--volume needs %s", flag)
			}
		}
		return *v, nil
	}
	m := &infrav1.LibvirtMachine{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Machine}, m); err != nil {
		return VolumeRef{}, fmt.Errorf("reading LibvirtMachine %s/%s: %w", o.Namespace, o.Machine, err)
	}
	vol, err := exportjob.MachineVolume(m, o.Disk)
	if err != nil {
		return VolumeRef{}, err
	}
	if o.ID == "" {
		o.ID = string(m.UID)
	}
	p := m.ProviderKey()
	return VolumeRef{ProviderNamespace: p.Namespace, Provider: p.Name, Domain: m.Spec.DomainName, Pool: m.Spec.Pool, Volume: vol}, nil
}

// checkStopped refuses a domain that exists and is not shut off.
func checkStopped(ctx context.Context, host *libvirt.Client, domain string) error {
	dom, err := host.DomainLookupByName(ctx, domain)
	if libvirt.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up domain %s: %w", domain, err)
	}
	state, _, err := host.DomainState(ctx, dom)
	if err != nil {
		return fmt.Errorf("reading the state of domain %s: %w", domain, err)
	}
	if state != libvirt.DomainShutOff {
		return fmt.Errorf("domain %s is %s: %w", domain, state, ErrVMRunning)
	}
	return nil
}
