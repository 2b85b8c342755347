package controller

import (
	"fmt"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// installMode is the image's install mode in its canonical spelling; an image without a template
// boots as is.
func installMode(image *banlieuev1.VMImage) banlieuev1.InstallMode {
	if image.Spec.Template == nil || image.Spec.Template.InstallMode == "" {
		return banlieuev1.InstallImmediate
	}
	return image.Spec.Template.InstallMode.Canonical()
}

// imageClassMismatch explains why class and image cannot be paired (docs/guides/libvirt-provider.md, "7. Run a VM"), or
// returns "". A vTPM on a copy of a shared disk would share sealed state between VMs, so a TPM
// class needs an image every VM installs for itself.
func imageClassMismatch(class *banlieuev1.VMClass, image *banlieuev1.VMImage) string {
	if !class.Spec.TPMEnabled || installMode(image) != banlieuev1.InstallImmediate {
		return ""
	}
	return fmt.Sprintf("VMClass %s has tpmEnabled, but VMImage %s has installMode immediate "+
		"(or no template): a vTPM needs a disk each VM installs for itself, so use an image with "+
		"installMode deferred or manual (ADR-0040, ADR-0048)", class.Name, image.Name)
}
