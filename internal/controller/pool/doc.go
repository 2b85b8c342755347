// Package pool runs VirtualMachinePools and VirtualMachineClaims (docs/guides/virtualmachine-pools.md).
//
// A pool keeps warm members, ordinary VirtualMachines it owns, so a consumer does not wait out
// provisioning; a claim takes one Ready member away from its pool for a while. The pool decides
// what to create and delete with a pure planner (planner.go) over a projection of its members
// (member.go); the reconcilers only read, plan and write.
//
// Binding is safe without a lock: the claim patches the member carrying the member's
// resourceVersion, so of two claims racing for one member exactly one wins, and the pool deletes
// members with a resourceVersion precondition, so it never deletes a member a claim took after
// the pool looked.
package pool
