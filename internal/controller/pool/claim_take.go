package pool

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// takeMember marks vm as bound to claim: the claim label and subject annotations, and the claim
// as its only owner. Re-parenting is what lets the pool be deleted without taking a consumer's
// VM with it, and what makes deleting the claim collect the VM.
func takeMember(vm *banlieuev1.VirtualMachine, claim *banlieuev1.VirtualMachineClaim, scheme *runtime.Scheme) error {
	gvk, err := apiutil.GVKForObject(claim, scheme)
	if err != nil {
		return err
	}
	if vm.Labels == nil {
		vm.Labels = map[string]string{}
	}
	vm.Labels[banlieuev1.LabelClaim] = claim.Name
	if vm.Annotations == nil {
		vm.Annotations = map[string]string{}
	}
	vm.Annotations[banlieuev1.AnnotationClaimSubjectIssuer] = claim.Spec.Subject.Issuer
	vm.Annotations[banlieuev1.AnnotationClaimSubjectID] = claim.Spec.Subject.ID
	vm.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, gvk)}
	return nil
}

// takenBy reports whether vm is a member claim took: it carries the label of the claim's pool
// and the claim's own, and this claim (by UID, so not an earlier claim of the same name) is its
// controller, as takeMember left it. Labels alone prove nothing, since anyone may set them, and
// a claim destroys what it took.
func takenBy(vm *banlieuev1.VirtualMachine, claim *banlieuev1.VirtualMachineClaim) bool {
	owner := metav1.GetControllerOfNoCopy(vm)
	return owner != nil && owner.UID == claim.UID &&
		vm.Labels[banlieuev1.LabelPool] == claim.Spec.PoolRef.Name && vm.Labels[banlieuev1.LabelClaim] == claim.Name
}

// strays are the VMs of vms that claim took but did not record as bound: left by a bind that
// lost its race to record. They were never handed out, so the claim deletes them; every other
// VM, whatever its labels, is not the claim's to touch.
func strays(claim *banlieuev1.VirtualMachineClaim, vms []banlieuev1.VirtualMachine) []banlieuev1.VirtualMachine {
	var out []banlieuev1.VirtualMachine
	for i := range vms {
		if ref := claim.Status.VirtualMachineRef; takenBy(&vms[i], claim) && (ref == nil || ref.Name != vms[i].Name) {
			out = append(out, vms[i])
		}
	}
	return out
}

// newNonce is 128 bits from the system CSPRNG as 32 hex characters, minted once per binding.
func newNonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random nonce: %w", err)
	}
	return hex.EncodeToString(b), nil
}
