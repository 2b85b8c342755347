package jobbounds

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// RuntimeMemory is what a Job's Go process needs besides its data buffers: the runtime, the
// client libraries, TLS. A build needs it on top of its decoders' caps; an import's buffers are
// small enough that it covers them too (docs/guides/image-sources.md, "Jobs").
const RuntimeMemory = 64 << 20

// DefaultBuild are the bounds of a build Job given no flag. The deadline is the bound on time:
// the minimum transfer rate only catches a stalled download, and 32Gi (the largest download) at
// 16Ki/s would take 24 days. Six hours let the largest download through at 1.5 MiB/s, and every
// real cloud image (a few GiB) at a fraction of that. The memory limit is twice what the largest
// decoders (64Mi xz dictionary, 128Mi zstd window) and the runtime take together; CPU is one
// core, as the decoders and the checksum run on one.
func DefaultBuild() Bounds {
	return Bounds{
		Deadline:      6 * time.Hour,
		CPURequest:    resource.MustParse("100m"),
		CPULimit:      resource.MustParse("1"),
		MemoryRequest: resource.MustParse("128Mi"),
		MemoryLimit:   resource.MustParse("512Mi"),
	}
}

// DefaultImport are the bounds of an import Job given no flag. The import streams the artifact
// from the volume to the host through fixed buffers, so its memory does not grow with the image;
// 256Mi leaves several times the peak measured on the lab (docs/guides/image-sources.md, "Jobs").
// Its six hours are for the same largest disks as a build's, over the link to the host.
func DefaultImport() Bounds {
	return Bounds{
		Deadline:      6 * time.Hour,
		CPURequest:    resource.MustParse("100m"),
		CPULimit:      resource.MustParse("1"),
		MemoryRequest: resource.MustParse("64Mi"),
		MemoryLimit:   resource.MustParse("256Mi"),
	}
}
