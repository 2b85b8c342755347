package libvirt

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/internal/provider/providerkit"
)

// machineUserData is the user-data of m, nil when it names no Secret, used only when the
// Secret is banlieue's copy for this very machine (providerkit.MachineUserData says why).
// reader must be uncached.
func machineUserData(ctx context.Context, reader client.Reader, m *infrav1.LibvirtMachine) ([]byte, error) {
	return providerkit.MachineUserData(ctx, reader, userDataRef(m))
}

func userDataRef(m *infrav1.LibvirtMachine) providerkit.UserDataRef {
	return providerkit.UserDataRef{Machine: m, Kind: "LibvirtMachine", Secret: m.Spec.UserDataSecretRef, Hash: m.Spec.UserDataHash}
}

// checkUserDataSecret refuses a Secret that is not banlieue's user-data copy for m.
func checkUserDataSecret(s *corev1.Secret, m *infrav1.LibvirtMachine) error {
	return providerkit.CheckUserDataSecret(s, userDataRef(m))
}
