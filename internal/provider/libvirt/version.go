package libvirt

import (
	"fmt"

	"banlieue.io/banlieue/pkg/libvirt"
)

// undefineTPMSince is the first libvirtd that accepts VIR_DOMAIN_UNDEFINE_TPM (8.9.0). Older
// daemons refuse a flag they do not know, so deletion would never finish on Debian 11, Ubuntu
// 22.04 or RHEL 8; they delete a TPM's state on undefine anyway unless the domain asks for
// persistent_state, which banlieue never does.
const undefineTPMSince = 8_009_000

// undefineFlagsFor is what teardown passes to a daemon of version v: a UEFI domain cannot be
// undefined without NVRAM, and without the TPM a deleted VM would leave its swtpm state — the
// very secret the vTPM isolates — behind.
func undefineFlagsFor(v uint64) libvirt.DomainUndefineFlags {
	flags := libvirt.UndefineManagedSave | libvirt.UndefineNVRAM
	if v >= undefineTPMSince {
		flags |= libvirt.UndefineTPM
	}
	return flags
}

// formatLibVersion renders libvirt's major*1_000_000 + minor*1000 + release as "major.minor.release".
func formatLibVersion(v uint64) string {
	return fmt.Sprintf("%d.%d.%d", v/1_000_000, v/1000%1000, v%1000)
}
