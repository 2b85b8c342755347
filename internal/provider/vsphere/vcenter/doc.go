// Package vcenter is the vSphere provider's client of vCenter, written with govmomi. It knows
// nothing of Kubernetes: the provider role adapts it to VSphereMachine.
//
// Surface:
//
//   - Dial(ctx, Endpoint, ...Option) *Session: TLS verified against Endpoint.CAPEM only (no
//     system roots, no thumbprint fallback, no way to skip verification), then a login. A request
//     answered NotAuthenticated (session expired or terminated) logs in again once and is retried.
//     Every request is bounded by WithCallTimeout (30 s), every task wait by WithTaskTimeout
//     (10 min); WithLimits bounds the clones (4) and power operations (16) run at once. An
//     Endpoint URL without a path gets /sdk. Session.Close logs out. The password is never
//     logged nor put in an error.
//   - FailureDomains(ctx, FailureDomainQuery): one FailureDomain per compute cluster, named by
//     DomainName, region and zone from the nearest tag in the k8s-region / k8s-zone categories
//     (cluster first, then its folders and datacenter), datastores and networks narrowed to those
//     asked for that every connected host of the cluster, not in maintenance, really reaches.
//     VTPM is declared in the query and copied (ADR-0039). The design is ADR-0153.
//   - Ensure(ctx, MachineSpec) Machine: clone powered off (linked when the template has a snapshot
//     and no disk grows), resize CPU, memory and disks, NICs on port groups, the cloud-init
//     guestinfo keys (base64), vTPM; idempotent. Get, PowerOn, PowerOff (graceful: ShutdownGuest,
//     then hard power-off after the timeout, or at once when vCenter refuses the guest shutdown,
//     e.g. ToolsUnavailable; nothing is cut when vCenter does not answer; returns the
//     PowerOffPath taken), Delete (power off, destroy, return when gone). Machine.Ref is
//     "VirtualMachine:vm-42"; Watch reports MachineUpdate (a Machine and Deleted).
//   - Watch(ctx, datacenter, folder, fn): WaitForUpdatesEx over a container view of the folder,
//     reporting power state, guest IPs, Tools status and deletion.
//
// Ownership: a VM is banlieue's for an owner only if its extraConfig key banlieue.io.owner-uid
// (outside guestinfo.*, which the guest can write) names that owner's UID. Ensure writes it in the
// clone spec itself, so no VM of ours ever exists without it; config.managedBy is set to the
// extension key io.banlieue as a marker for people, but is not the proof. Every change or destroy
// reads the proof first; a VM without it is ErrNotOwned and is never adopted, changed or
// destroyed.
//
// Names: user-supplied names are inventory paths below the datacenter, looked up with
// SearchIndex.FindByInventoryPath only, never resolved as managed-object references or globs.
// Refs passed back in (Machine.Ref, "VirtualMachine:vm-42") must name a VirtualMachine and are
// re-proven owned before use.
//
// Errors are *StepError naming the step that failed, so the provider can map them to condition
// reasons; among them: "parse endpoint URL", "check credentials", "load CA", "connect to <host>", "log in to
// <url> as <user>", "check spec", "check name", "resolve folder|datastore|network|resource
// pool|template", "find VM", "read VM", "prove owner", "clone <template>", "plan
// reconfiguration" (e.g. a disk would shrink), "reconfigure", "power on", "ask the guest to shut
// down", "wait for guest shutdown", "power off", "power off before destroy", "destroy", "confirm
// destroyed", "list datacenters", "list clusters of <dc>", "read hosts of cluster <c>", "log in
// to the tagging service", "read tag categories", "read attached tags", "watch <folder>".
// vCenter's fault stays in the chain (fault.Is, fault.As); ErrNotFound and ErrNotOwned are
// matched with errors.Is.
package vcenter
