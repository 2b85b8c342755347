package image

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/imagebuilder/checksum"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
)

// libvirtSource is the VMImage's source for this backend. Sources are merge-keyed on the class,
// so there is at most one.
func libvirtSource(img *banlieuev1.VMImage, class string) (banlieuev1.ImageSource, bool) {
	for _, s := range img.Spec.Sources {
		if s.ProviderClass == class {
			return s, true
		}
	}
	return banlieuev1.ImageSource{}, false
}

// targetPools are the pools of the Provider's declared storage classes that its failure
// domains verified on the host, in declaration order without duplicates. A declared class the
// probe did not find is not a target: importing into it would fail on every attempt.
func targetPools(p *banlieuev1.Provider) []string {
	verified := map[string]bool{}
	for _, fd := range p.Status.FailureDomains {
		for _, sc := range fd.Attributes.AvailableStorageClasses {
			verified[sc] = true
		}
	}
	var pools []string
	for _, sc := range p.Spec.Capabilities.StorageClasses {
		pool := sc.Target["pool"]
		if pool != "" && verified[sc.Name] && !slices.Contains(pools, pool) {
			pools = append(pools, pool)
		}
	}
	return pools
}

// backingFileVolume is the volume a BackingFile source names: the basename of its ref.
func backingFileVolume(ref string) string { return path.Base(ref) }

// buildGate is the row of a Url source whose artifact is not ready to import, if so.
func buildGate(p *banlieuev1.Provider, artifact *banlieuev1.BuildArtifact) (banlieuev1.ProviderImageStatus, bool) {
	switch {
	case artifact == nil || artifact.Phase == banlieuev1.BuildPending || artifact.Phase == banlieuev1.BuildBuilding:
		return notReadyRow(p, banlieuev1.ReasonBuildPending, "waiting for the imagebuilder to publish the artifact"), true
	case artifact.Phase == banlieuev1.BuildFailed:
		reason := banlieuev1.ReasonBuildFailed
		if artifact.Reason == banlieuev1.ReasonSourceRefused {
			reason = artifact.Reason
		}
		return notReadyRow(p, reason, artifact.Message), true
	case artifact.PVCRef == nil || artifact.File == "":
		// Ready without a location is an imagebuilder bug; waiting is all the provider can do.
		return notReadyRow(p, banlieuev1.ReasonBuildPending, "build artifact is Ready but names no PVC or file"), true
	case artifactSHA256(artifact) == "":
		// Also an imagebuilder bug: it publishes sha256, and the volume is named by it.
		return notReadyRow(p, banlieuev1.ReasonBuildPending, fmt.Sprintf(
			"build artifact is Ready but its checksum %q is not sha256:<hex>, which names its volume", artifact.Checksum)), true
	}
	return banlieuev1.ProviderImageStatus{}, false
}

// gatedZones gives a row that waits on the build one zone per pool it will import into, each
// with the row's reason and message: the guide reads pools through
// `{.status.perProvider[*].zones[*]}`, and a row without zones would print nothing there while
// the build is pending (docs/guides/libvirt-provider.md, "Troubleshooting"). Without a
// verified pool the row stays without zones; it says why.
func gatedZones(row banlieuev1.ProviderImageStatus, pools []string) banlieuev1.ProviderImageStatus {
	for _, pool := range pools {
		row.Zones = append(row.Zones, notReadyZone(pool, row.Reason, row.Message))
	}
	return row
}

// artifactSHA256 is the hex of the artifact's sha256 checksum, or "" when it has none.
func artifactSHA256(a *banlieuev1.BuildArtifact) string {
	d, err := checksum.Parse(a.Checksum)
	if err != nil || d.Alg != "sha256" {
		return ""
	}
	return d.Hex
}

// artifactVolume is the volume a Ready artifact is imported into on every pool.
func artifactVolume(img *banlieuev1.VMImage) string {
	a := img.Status.BuildArtifact
	return providerlibvirt.ArtifactVolumeName(img.Name, artifactSHA256(a), a.Kind == banlieuev1.ArtifactISO)
}

// urlRow folds the pools' zones into the Provider's row: ready when every zone is, the volume
// name as resolvedRef only then.
func urlRow(p *banlieuev1.Provider, volume string, zones []banlieuev1.ImageZoneStatus) banlieuev1.ProviderImageStatus {
	row := banlieuev1.ProviderImageStatus{
		ProviderName: p.Name, ProviderNamespace: p.Namespace, Ready: true, Reason: banlieuev1.ReasonReconciled, Zones: zones,
	}
	ready, failed := 0, 0
	var notGranted *banlieuev1.ImageZoneStatus
	for i, z := range zones {
		switch {
		case z.Ready:
			ready++
		case z.Reason == banlieuev1.ReasonImportFailed:
			failed++
		case z.Reason == banlieuev1.ReasonJobsNotGranted && notGranted == nil:
			notGranted = &zones[i]
		}
	}
	switch {
	case ready == len(zones):
		row.ResolvedRef = volume
		row.Message = fmt.Sprintf("imported into %d pool(s)", len(zones))
	case notGranted != nil:
		// One grant is missing for every pool: the row says which, as its zones do.
		row.Ready, row.Reason, row.Message = false, notGranted.Reason, notGranted.Message
	case failed > 0:
		row.Ready, row.Reason = false, banlieuev1.ReasonImportFailed
		row.Message = fmt.Sprintf("import failed in %d of %d pool(s)", failed, len(zones))
	default:
		row.Ready, row.Reason = false, banlieuev1.ReasonImporting
		row.Message = fmt.Sprintf("imported into %d of %d pool(s)", ready, len(zones))
	}
	return row
}

// backingFileRow is ready when the volume was found in at least one verified pool.
func backingFileRow(p *banlieuev1.Provider, volume string, zones []banlieuev1.ImageZoneStatus) banlieuev1.ProviderImageStatus {
	for _, z := range zones {
		if z.Ready {
			return banlieuev1.ProviderImageStatus{ProviderName: p.Name, ProviderNamespace: p.Namespace,
				Ready: true, Reason: banlieuev1.ReasonReconciled, ResolvedRef: volume, Zones: zones}
		}
	}
	row := notReadyRow(p, banlieuev1.ReasonVolumeNotFound, fmt.Sprintf("volume %s is not in any of the Provider's verified pools", volume))
	row.Zones = zones
	return row
}

func notReadyRow(p *banlieuev1.Provider, reason, message string) banlieuev1.ProviderImageStatus {
	return banlieuev1.ProviderImageStatus{ProviderName: p.Name, ProviderNamespace: p.Namespace, Reason: reason, Message: banlieuev1.ConditionMessage(message)}
}

func notReadyZone(pool, reason, message string) banlieuev1.ImageZoneStatus {
	return banlieuev1.ImageZoneStatus{Name: pool, Reason: reason, Message: banlieuev1.ConditionMessage(message)}
}

// sortRows orders rows by namespace, then name, so the applied list is stable.
func sortRows(rows []banlieuev1.ProviderImageStatus) {
	slices.SortFunc(rows, func(a, b banlieuev1.ProviderImageStatus) int {
		return cmp.Or(strings.Compare(a.ProviderNamespace, b.ProviderNamespace), strings.Compare(a.ProviderName, b.ProviderName))
	})
}

// rowsApplied reports whether status already holds rows exactly, for generation: applying them
// again would change nothing. A provider of one Provider owns its row alone; one serving every
// Provider also owns the rows of Providers gone since, which only an apply removes, so for it
// status may hold no other row. Every provider reconciles a VMImage on every change of it, each
// other provider's row write included: without this check a fleet's providers rewrote their
// rows for every row any of them wrote, a hundred writers' applies on one object at once.
func rowsApplied(status *banlieuev1.VMImageStatus, generation int64, rows []banlieuev1.ProviderImageStatus, oneProvider bool) bool {
	if status.ObservedGeneration != generation || (!oneProvider && len(status.PerProvider) != len(rows)) {
		return false
	}
	for _, row := range rows {
		i := slices.IndexFunc(status.PerProvider, func(r banlieuev1.ProviderImageStatus) bool {
			return r.ProviderName == row.ProviderName && r.ProviderNamespace == row.ProviderNamespace
		})
		if i < 0 || !equality.Semantic.DeepEqual(status.PerProvider[i], row) {
			return false
		}
	}
	return true
}
