// Package exportjob is the export Job as banlieue-controller builds and reads it: the Job, the
// volume it copies and the report its command leaves. It imports nothing of libvirt, so the
// controller, which never talks to a host, can use it; internal/vmexport runs the copy.
package exportjob

import (
	"fmt"
	"slices"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

// Steps of an export; the command's Report names the one that failed, and the
// VirtualMachineExport's condition reason is derived from it (docs/guides/export.md).
const (
	StepFlatten  = "Flatten"
	StepDownload = "Download"
	StepVerify   = "Verify"
	StepPublish  = "Publish"
	StepCleanup  = "Cleanup"
)

// VolumeRef is one machine's volume on its Provider's host, as the export controller read it
// from the machine's spec and status.volumes.
type VolumeRef struct {
	ProviderNamespace, Provider string
	Domain, Pool, Volume        string
}

// Result is one disk's standalone copy.
type Result struct {
	// Size of the standalone qcow2 file in bytes.
	Size int64
	// Digest of the file: sha256:<hex>.
	Digest string
	// Capacity of the disk (its virtual size) in bytes.
	Capacity uint64
}

// MachineResult is what an export of a machine's disk published.
type MachineResult struct {
	Result
	// Volume is the exported volume's name on the host.
	Volume string
	// File is the disk's path under OutputDir.
	File string `json:",omitempty"`
	// Image is the pushed image by digest: a VMImage source's importFrom.
	Image string `json:",omitempty"`
}

// Report is an export's outcome as one JSON document, for the Job's termination message
// (--result-file): the result, or the failed step and its error. VMRunning marks a refusal of a
// running VM, which the controller retries rather than fails.
type Report struct {
	// The result when the export succeeded; nil (its fields absent) when it failed.
	*MachineResult
	// Step is the step that failed (Flatten, Download, Verify, Publish, Cleanup), or empty.
	Step string `json:",omitempty"`
	// Error is the failure's message, cut to fit the report.
	Error string `json:",omitempty"`
	// VMRunning: the export was refused because the machine's domain was not shut off.
	VMRunning bool `json:",omitempty"`
}

// MachineVolume is the volume of disk (the first disk when empty) of m, refused unless m's
// status records it as the machine's own.
func MachineVolume(m *infrav1.LibvirtMachine, disk string) (string, error) {
	if len(m.Spec.Disks) == 0 {
		return "", fmt.Errorf("machine %s/%s has no disks", m.Namespace, m.Name)
	}
	if disk == "" {
		disk = m.Spec.Disks[0].Name
	}
	if !slices.ContainsFunc(m.Spec.Disks, func(d infrav1.LibvirtDisk) bool { return d.Name == disk }) {
		return "", fmt.Errorf("invalid --disk: machine %s/%s has no disk %q", m.Namespace, m.Name, disk)
	}
	if m.Spec.DomainName == "" {
		return "", fmt.Errorf("machine %s/%s has no domain name yet: nothing was created on a host", m.Namespace, m.Name)
	}
	vol := m.Spec.DomainName + "-" + disk + ".qcow2"
	if !slices.Contains(m.Status.Volumes, vol) {
		return "", fmt.Errorf("volume %s is not recorded in machine %s/%s's status.volumes: not created by banlieue for it, not exported", vol, m.Namespace, m.Name)
	}
	return vol, nil
}
