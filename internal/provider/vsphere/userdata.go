package vsphere

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	"banlieue.io/banlieue/internal/provider/providerkit"
)

// machineUserData is the user-data of m, nil when it names no Secret, read by name from an
// uncached reader and used only when it is banlieue-controller's copy for this very machine
// (providerkit.MachineUserData says why): it is written into guestinfo.
func machineUserData(ctx context.Context, reader client.Reader, m *infrav1.VSphereMachine) ([]byte, error) {
	return providerkit.MachineUserData(ctx, reader, providerkit.UserDataRef{
		Machine: m, Kind: "VSphereMachine", Secret: m.Spec.UserDataSecretRef, Hash: m.Spec.UserDataHash})
}
