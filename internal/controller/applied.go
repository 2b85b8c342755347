package controller

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// appliedMachines remembers, per VM, the machine this process last applied and the fields the
// API server then recorded as the controller's, so that a pass whose machine would not change
// skips the apply. A VM is reconciled on every change of its machine (the provider's finalizer,
// providerID and status writes): five passes per VM were five applies of the same machine, the
// most frequent write of a burst (docs/performance.md, "The fleet bench").
//
// Skipping is safe when the configuration is the one applied last and the controller still owns
// exactly the fields it owned after that apply: another writer changing one of those fields
// takes it over (an update, or a forced apply), which changes the controller's managed fields, so
// the next pass applies again and takes it back, as before.
type appliedMachines struct {
	mu   sync.Mutex
	byVM map[types.NamespacedName]appliedMachine
}

// appliedMachine is one apply's record: the machine's UID, a digest of the configuration sent
// and one of the fields the controller owned in the answer.
type appliedMachine struct {
	uid           types.UID
	config, owned [sha256.Size]byte
}

func newAppliedMachines() *appliedMachines {
	return &appliedMachines{byVM: map[types.NamespacedName]appliedMachine{}}
}

// configDigest digests the configuration an apply of desired sends: everything desired holds,
// which is what ssa.Apply sends (its identity, labels, annotations, owner references and spec).
func configDigest(desired client.Object) ([sha256.Size]byte, error) {
	data, err := json.Marshal(desired)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(data), nil
}

// ownedDigest digests the fields manager applied on obj, from its managed fields; ok is false
// when manager owns none there.
func ownedDigest(obj client.Object, manager string) (digest [sha256.Size]byte, ok bool) {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.FieldsV1 != nil {
			return sha256.Sum256(e.FieldsV1.GetRawBytes()), true
		}
	}
	return digest, false
}

// unchanged reports whether applying a configuration of digest config to existing, the VM's
// machine as read, would change nothing: it is what this process applied last, to this machine,
// and the fields manager owns are still the ones it owned then.
func (a *appliedMachines) unchanged(vm types.NamespacedName, existing client.Object, config [sha256.Size]byte, manager string) bool {
	if existing == nil {
		return false
	}
	owned, ok := ownedDigest(existing, manager)
	if !ok {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	last, found := a.byVM[vm]
	return found && last.uid == existing.GetUID() && last.config == config && last.owned == owned
}

// record keeps what an apply of config answered with (applied, decoded from the API server's
// answer); an answer without the manager's fields is not recorded, so the next pass applies.
func (a *appliedMachines) record(vm types.NamespacedName, applied client.Object, config [sha256.Size]byte, manager string) {
	owned, ok := ownedDigest(applied, manager)
	a.mu.Lock()
	defer a.mu.Unlock()
	if !ok {
		delete(a.byVM, vm)
		return
	}
	a.byVM[vm] = appliedMachine{uid: applied.GetUID(), config: config, owned: owned}
}

// forget drops a VM's record: it is being deleted.
func (a *appliedMachines) forget(vm types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.byVM, vm)
}
