package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// testPowerPhases: a VM created with desiredPowerState PoweredOff, whose machine the provider
// reports defined and off as asked (provisioned, Ready=False DomainNotRunning), reads Stopped in
// status.phase and in the PHASE column the API server prints, and its LibvirtMachine's
// PROVISIONED column is true. Asked on, it is Provisioning until the domain runs; suspended as
// asked, Suspended (docs/adr/0147-phases-of-a-vm-as-its-spec-asks.md).
func (s *suite) testPowerPhases(ctx context.Context, t *testing.T) {
	ns := "power-phases"
	s.namespace(ctx, t, ns)
	s.provider(ctx, t, ns, guideProvider, "libvirt")
	s.image(ctx, t, "power-phases", banlieuev1.InstallImmediate, readyRowIn(ns, guideProvider))
	vm := guideVM(ns, "off-01", "small", "power-phases", nil)
	vm.Spec.DesiredPowerState = banlieuev1.PoweredOff
	s.create(ctx, t, vm)

	m := s.waitMachine(ctx, t, ns, vm.Name)
	s.waitVM(ctx, t, ns, vm.Name, "phase Provisioning before the machine reports", func(vm *banlieuev1.VirtualMachine) bool {
		return vm.Status.Phase == banlieuev1.VMPhaseProvisioning
	})
	// What the provider writes after defining the domain and creating its disks, left off.
	machineStatus := func(power banlieuev1.PowerState, ready metav1.ConditionStatus, reason, msg string) {
		s.machineStatus(ctx, t, m, infrav1.LibvirtMachineStatus{
			Initialization:     &banlieuev1.InitializationStatus{Provisioned: ptr.To(true)},
			DomainUUID:         "6f1c0f43-7d3c-4c36-9f3f-1b7f0e4a8c12",
			ObservedPowerState: power,
			Conditions: []metav1.Condition{{Type: banlieuev1.ConditionReady, Status: ready, Reason: reason, Message: msg,
				LastTransitionTime: metav1.Now()}},
		})
	}
	machineStatus(banlieuev1.PoweredOff, metav1.ConditionFalse, infrav1.ReasonDomainNotRunning,
		"domain is defined and off (ShutOff), as spec.desiredPowerState PoweredOff asks")
	s.waitVM(ctx, t, ns, vm.Name, "phase Stopped", func(vm *banlieuev1.VirtualMachine) bool {
		return vm.Status.Phase == banlieuev1.VMPhaseStopped && vm.Status.ObservedPowerState == banlieuev1.PoweredOff &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionReady, metav1.ConditionFalse, banlieuev1.ReasonInfrastructureNotReady) &&
			hasCondition(vm.Status.Conditions, banlieuev1.ConditionInfrastructureReady, metav1.ConditionFalse, infrav1.ReasonDomainNotRunning)
	})
	s.expectColumns(ctx, t, "/apis/banlieue.io/v1alpha1/namespaces/"+ns+"/virtualmachines/"+vm.Name,
		map[string]string{"Phase": "Stopped", "Power": "PoweredOff", "Ready": "False"})
	s.expectColumns(ctx, t, "/apis/infrastructure.banlieue.io/v1alpha1/namespaces/"+ns+"/libvirtmachines/"+vm.Name,
		map[string]string{"Provisioned": "true", "Power": "PoweredOff"})

	// Asked on: not yet as asked until the domain runs.
	s.patchVM(ctx, t, ns, vm.Name, func(vm *banlieuev1.VirtualMachine) { vm.Spec.DesiredPowerState = banlieuev1.PoweredOn })
	s.waitVM(ctx, t, ns, vm.Name, "phase Provisioning while the domain is off and asked on", func(vm *banlieuev1.VirtualMachine) bool {
		return vm.Status.Phase == banlieuev1.VMPhaseProvisioning
	})
	machineStatus(banlieuev1.PoweredOn, metav1.ConditionTrue, infrav1.ReasonDomainRunning, "domain is defined and running")
	s.waitVM(ctx, t, ns, vm.Name, "phase Ready", func(vm *banlieuev1.VirtualMachine) bool { return vm.Status.Phase == banlieuev1.VMPhaseReady })

	// Suspended as asked.
	s.patchVM(ctx, t, ns, vm.Name, func(vm *banlieuev1.VirtualMachine) { vm.Spec.DesiredPowerState = banlieuev1.Suspended })
	machineStatus(banlieuev1.Suspended, metav1.ConditionFalse, infrav1.ReasonDomainSuspended, "domain is suspended, as spec.desiredPowerState asks")
	s.waitVM(ctx, t, ns, vm.Name, "phase Suspended", func(vm *banlieuev1.VirtualMachine) bool {
		return vm.Status.Phase == banlieuev1.VMPhaseSuspended
	})
	s.expectColumns(ctx, t, "/apis/banlieue.io/v1alpha1/namespaces/"+ns+"/virtualmachines/"+vm.Name,
		map[string]string{"Phase": "Suspended", "Power": "Suspended", "Ready": "False"})
}

// expectColumns reads path as the table `kubectl get` prints (the CRD's printer columns,
// evaluated by the API server) and compares the named cells.
func (s *suite) expectColumns(ctx context.Context, t *testing.T, path string, want map[string]string) {
	t.Helper()
	got, err := printedRow(ctx, s.cfg, path)
	if err != nil {
		t.Fatal(err)
	}
	for col, v := range want {
		if got[col] != v {
			t.Errorf("%s: column %s = %q, want %q (row %v)", path, col, got[col], v, got)
		}
	}
}

// printedRow is the one row of the server-side table of path, by column name.
func printedRow(ctx context.Context, cfg *rest.Config, path string) (map[string]string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	body, err := cs.RESTClient().Get().AbsPath(path).SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET %s as a table: %w: %s", path, err, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		return nil, err
	}
	if len(table.Rows) != 1 {
		return nil, fmt.Errorf("GET %s as a table: %d rows, want 1", path, len(table.Rows))
	}
	row := map[string]string{}
	for i, c := range table.ColumnDefinitions {
		if i < len(table.Rows[0].Cells) && table.Rows[0].Cells[i] != nil {
			row[c.Name] = fmt.Sprint(table.Rows[0].Cells[i])
		}
	}
	return row, nil
}
