package operator

import banlieuev1 "banlieue.io/banlieue/api/v1alpha1"

// imageRef is the class's image reference: repo:tag, repo:tag@digest, or repo@digest when the
// tag is empty.
func imageRef(img banlieuev1.ProviderImage) string {
	ref := img.Repository
	if img.Tag != "" {
		ref += ":" + img.Tag
	}
	if img.Digest != "" {
		ref += "@" + img.Digest
	}
	return ref
}

// imageValid reports whether the class names a usable image (ProviderClass Ready reason
// InvalidImage otherwise).
func imageValid(img banlieuev1.ProviderImage) bool {
	return img.Repository != "" && img.Tag != ""
}
