package libvirt

import (
	"errors"
	"fmt"
	"slices"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// A LibvirtMachine is written by the controller or, under Cluster API, by its users directly;
// the host names in it are not trusted as written (docs/security.md, "LibvirtMachine
// authority"). Before the provider makes any call to the host, each name must be one the
// machine's own Provider, or a VMImage row of that Provider, grants:
//
//   - spec.domainName is <namespace>-<name> of the machine, the controller's rule
//     (internal/controller/libvirt_machine.go): no machine can name another namespace's domain;
//   - spec.pool is the pool target of one of the Provider's storage classes;
//   - each spec.network[].source is the network or bridge target of one of its network classes;
//   - spec.bootSource.volume (the backing image, or the installer for installMedia) is a volume a
//     VMImage row of this Provider resolved to (the row's resolvedRef, or the resolvedRef of its
//     zone named after the pool or the failure domain, the controller's bootVolume), or an
//     earlier import of such a VMImage: a machine keeps the base it was built on after a rebuilt
//     artifact moved the row (docs/reliability.md, "Ownership and the other issue 15 fixes",
//     row 3b). Another machine's disk or seed is never such a volume: theirs end in .qcow2 and
//     -cidata.iso.

// AuthorityError is a name in the machine's spec that its Provider does not grant. The machine
// reports it as NotPermitted, and nothing on the host was called.
type AuthorityError struct{ msg string }

func (e *AuthorityError) Error() string { return e.msg }

func refuse(format string, args ...any) *AuthorityError {
	return &AuthorityError{msg: fmt.Sprintf(format, args...)}
}

// isAuthorityError reports whether err is a refusal of checkAuthority.
func isAuthorityError(err error) bool {
	var a *AuthorityError
	return errors.As(err, &a)
}

// checkAuthority refuses the first name in the machine's spec that p and the VMImages do not
// grant it. p is the Provider named by spec.providerRef; images are all VMImages (the rows of
// other Providers are skipped).
func checkAuthority(m *infrav1.LibvirtMachine, p *banlieuev1.Provider, images []banlieuev1.VMImage) error {
	s := &m.Spec
	provider := p.Namespace + "/" + p.Name
	if want := m.Namespace + "-" + m.Name; s.DomainName != want {
		return refuse("invalid spec.domainName: %q is not %q; a machine's domain is its namespace, \"-\" and its name", s.DomainName, want)
	}
	if !slices.ContainsFunc(p.Spec.Capabilities.StorageClasses, func(c banlieuev1.StorageClassMapping) bool {
		return targetIs(c.Target, targetPool, s.Pool)
	}) {
		return refuse("invalid spec.pool: %q is not the target of any storage class of Provider %s", s.Pool, provider)
	}
	for i, nic := range s.Network {
		key := targetNetwork
		if nic.Source.Kind == infrav1.SourceBridge {
			key = targetBridge
		}
		if !slices.ContainsFunc(p.Spec.Capabilities.NetworkClasses, func(c banlieuev1.NetworkClassMapping) bool {
			return targetIs(c.Target, key, nic.Source.Name)
		}) {
			return refuse("invalid spec.network[%d].source: %s %q is not the target of any network class of Provider %s",
				i, key, nic.Source.Name, provider)
		}
	}
	if !slices.ContainsFunc(images, func(img banlieuev1.VMImage) bool { return grantsVolume(&img, p, s) }) {
		return refuse("invalid spec.bootSource.volume: %q is not a volume any VMImage resolved to for Provider %s and pool %q",
			s.BootSource.Volume, provider, s.Pool)
	}
	return nil
}

func targetIs(target map[string]string, key, name string) bool {
	v, ok := target[key]
	return ok && v == name
}

// grantsVolume reports whether the image's row for p resolves the machine's boot volume, now or
// by an earlier import.
func grantsVolume(img *banlieuev1.VMImage, p *banlieuev1.Provider, s *infrav1.LibvirtMachineSpec) bool {
	i := slices.IndexFunc(img.Status.PerProvider, func(r banlieuev1.ProviderImageStatus) bool {
		return r.ProviderName == p.Name && r.ProviderNamespace == p.Namespace
	})
	if i < 0 {
		return false
	}
	row, volume := &img.Status.PerProvider[i], s.BootSource.Volume
	if volume == "" {
		return false
	}
	if row.ResolvedRef == volume {
		return true
	}
	for _, z := range row.Zones {
		if (z.Name == s.Pool || z.Name == s.FailureDomain) && z.ResolvedRef == volume {
			return true
		}
	}
	_, earlier := ArtifactVolumeDigest(img.Name, volume)
	return earlier
}
