package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// testHugeConditionMessage is the bound on condition messages (docs/reliability.md, "Ownership:
// only what is banlieue's") through a real reconciler: an image-row message as long as the CRD
// admits (32768 characters; libvirt errors reach 4 MiB) flows into the VM's Scheduled and Ready
// messages, each with its own prefix. Unbounded, the API server refuses the whole status write
// (maxLength 32768) and the VM keeps its previous conditions.
func (s *suite) testHugeConditionMessage(ctx context.Context, t *testing.T) {
	ns := "huge"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, "host", "libvirt")
	row := banlieuev1.ProviderImageStatus{ProviderName: "host", ProviderNamespace: ns, Reason: "ImportFailed", Message: "import Job running"}
	s.image(ctx, t, "img-huge", banlieuev1.InstallImmediate, row)
	s.create(ctx, t, guideVM(ns, "web-01", "small", "img-huge", nil))
	s.waitVM(ctx, t, ns, "web-01", "Scheduled=False with the short message", func(vm *banlieuev1.VirtualMachine) bool {
		c := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled)
		return c != nil && c.Reason == banlieuev1.ReasonImageNotReady && strings.Contains(c.Message, "(ImportFailed: import Job running)")
	})

	const prefix = "virError(Code=1, Domain=18, Message='internal error: "
	row.Message = prefix + strings.Repeat("qemu-img: Could not open ", (32768-len(prefix))/25)
	s.imageRows(ctx, t, "img-huge", row)
	vm := s.waitVM(ctx, t, ns, "web-01", "Scheduled=False with the bounded 32 KiB message", func(vm *banlieuev1.VirtualMachine) bool {
		c := meta.FindStatusCondition(vm.Status.Conditions, banlieuev1.ConditionScheduled)
		return c != nil && strings.Contains(c.Message, "(ImportFailed: virError(Code=1")
	})
	for _, typ := range []string{banlieuev1.ConditionScheduled, banlieuev1.ConditionReady} {
		c := meta.FindStatusCondition(vm.Status.Conditions, typ)
		if c.Status != metav1.ConditionFalse || len(c.Message) > banlieuev1.MaxConditionMessage ||
			!strings.Contains(c.Message, "qemu-img: Could not open") || !strings.HasSuffix(c.Message, " bytes]") {
			t.Errorf("%s = %s, %d bytes ending %q", typ, c.Status, len(c.Message), c.Message[max(0, len(c.Message)-40):])
		}
	}
}
