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
	vm.Labels[LabelClaim] = claim.Name
	if vm.Annotations == nil {
		vm.Annotations = map[string]string{}
	}
	vm.Annotations[AnnotationClaimSubjectIssuer] = claim.Spec.Subject.Issuer
	vm.Annotations[AnnotationClaimSubjectID] = claim.Spec.Subject.ID
	vm.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, gvk)}
	return nil
}

// newNonce is 128 bits from the system CSPRNG as 32 hex characters, minted once per binding.
func newNonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random nonce: %w", err)
	}
	return hex.EncodeToString(b), nil
}
