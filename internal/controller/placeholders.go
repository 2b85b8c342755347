package controller

import (
	"strconv"
	"strings"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// renderUserData substitutes the user-data placeholders (docs/guides/libvirt-provider.md, "7. Run a VM"). Values come from the
// first networkOverrides entry, so a pool member's address reaches its guest; without one they
// are empty. The replacement is a single pass, so a value that itself looks like a placeholder
// is never expanded again.
func renderUserData(text, vmName string, overrides []banlieuev1.NetworkOverride) string {
	var static banlieuev1.StaticIpamConfig
	prefix := ""
	if len(overrides) > 0 {
		static = overrides[0].Static
		prefix = strconv.Itoa(int(static.Prefix))
	}
	return strings.NewReplacer(
		"${VM_NAME}", vmName,
		"${FQDN}", fqdn(vmName, static.Domain),
		"${IP}", static.Address,
		"${PREFIX}", prefix,
		"${GATEWAY}", static.Gateway,
		"${DNS}", strings.Join(static.Nameservers, ","),
		"${DOMAIN}", static.Domain,
	).Replace(text)
}

// fqdn qualifies name with domain unless it already is; the trailing dot for an empty domain is
// what docs/guides/cloud-init-on-libvirt.md describes (`<name>.`), a rooted name that says "no domain known".
func fqdn(name, domain string) string {
	if domain != "" && strings.HasSuffix(strings.ToLower(name), "."+strings.ToLower(domain)) {
		return name
	}
	return name + "." + domain
}
