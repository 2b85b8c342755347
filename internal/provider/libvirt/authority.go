package libvirt

import (
	"errors"
	"fmt"
	"path"
	"slices"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// A LibvirtMachine's host names are not trusted as written: under Cluster API its users write it.
// checkAuthority grants each name (domain, pool, networks, boot volume) only when the machine's
// own Provider or a VMImage row of that Provider does, before any call to the host, as a pure
// function of the machine, its Provider and the VMImages. The rules, and why the boot volume
// recorded in status.bootVolume outlives the rows, are in docs/security.md, "LibvirtMachine
// authority".

// AuthorityError is a name in the machine's spec that its Provider does not grant (yet). The
// machine reports it under Reason, and nothing on the host was called.
type AuthorityError struct {
	// Reason is NotPermitted, or WaitingForImage while a row that may grant the name is not ready.
	Reason string
	msg    string
}

func (e *AuthorityError) Error() string { return e.msg }

func refuse(format string, args ...any) *AuthorityError {
	return &AuthorityError{Reason: infrav1.ReasonNotPermitted, msg: fmt.Sprintf(format, args...)}
}

// authorityReason is the reason of a refusal of checkAuthority, or "" when err is not one.
func authorityReason(err error) string {
	var a *AuthorityError
	if errors.As(err, &a) {
		return a.Reason
	}
	return ""
}

// checkAuthority returns the first name in the machine's spec that p and the VMImages do not
// grant it, as an *AuthorityError. p is the Provider named by spec.providerRef; images are all
// VMImages (the rows of other Providers are skipped).
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
	volume := s.BootSource.Volume
	if volume != "" && m.Status.BootVolume == volume {
		return nil
	}
	if slices.ContainsFunc(images, func(img banlieuev1.VMImage) bool { return grantsVolume(&img, p, s) }) {
		return nil
	}
	if i := slices.IndexFunc(images, func(img banlieuev1.VMImage) bool { return mayGrantVolume(&img, p, volume) }); i >= 0 {
		return &AuthorityError{Reason: infrav1.ReasonWaitingForImage, msg: fmt.Sprintf(
			"spec.bootSource.volume: %q is the source of VMImage %s, whose row for Provider %s is not ready; checking again",
			volume, images[i].Name, provider)}
	}
	return refuse("invalid spec.bootSource.volume: %q is not a volume any VMImage resolved to for Provider %s and pool %q",
		volume, provider, s.Pool)
}

func targetIs(target map[string]string, key, name string) bool {
	v, ok := target[key]
	return ok && v == name
}

// providerRow is the image's row for p, or nil.
func providerRow(img *banlieuev1.VMImage, p *banlieuev1.Provider) *banlieuev1.ProviderImageStatus {
	i := slices.IndexFunc(img.Status.PerProvider, func(r banlieuev1.ProviderImageStatus) bool {
		return r.ProviderName == p.Name && r.ProviderNamespace == p.Namespace
	})
	if i < 0 {
		return nil
	}
	return &img.Status.PerProvider[i]
}

// grantsVolume reports whether the image's row for p resolves the machine's boot volume now, or
// the volume is one of the image's imports.
func grantsVolume(img *banlieuev1.VMImage, p *banlieuev1.Provider, s *infrav1.LibvirtMachineSpec) bool {
	row, volume := providerRow(img, p), s.BootSource.Volume
	if row == nil || volume == "" {
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
	_, imported := ArtifactVolumeDigest(img.Name, volume)
	return imported
}

// mayGrantVolume reports whether the image's libvirt source is a BackingFile naming volume and
// its row for p is absent or not ready: the row resolves to that volume once the provider finds
// it on the host, which an outage or a slow first lookup delays. (A Url source's volumes are
// its imports, which grantsVolume grants from the name alone.)
func mayGrantVolume(img *banlieuev1.VMImage, p *banlieuev1.Provider, volume string) bool {
	if volume == "" || !slices.ContainsFunc(img.Spec.Sources, func(src banlieuev1.ImageSource) bool {
		return src.ProviderClass == ClassName && src.Kind == banlieuev1.SourceBackingFile &&
			path.Base(src.Ref) == volume
	}) {
		return false
	}
	row := providerRow(img, p)
	return row == nil || !row.Ready || row.ResolvedRef == ""
}
