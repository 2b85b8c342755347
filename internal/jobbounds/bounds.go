// Package jobbounds bounds the Jobs banlieue starts, build Jobs and import Jobs alike: how long
// one may run and how much CPU and memory its pod gets (docs/guides/image-sources.md, "Jobs").
// A Job without them runs for as long as a hostile source keeps it busy.
package jobbounds

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Bounds are the deadline and the resources of one kind of Job.
type Bounds struct {
	// Deadline is the Job's activeDeadlineSeconds: the whole Job, retries included, is stopped
	// once it has been active that long.
	Deadline time.Duration
	// CPURequest and MemoryRequest are what the scheduler reserves for the pod.
	CPURequest, MemoryRequest resource.Quantity
	// CPULimit throttles the pod; zero sets no CPU limit.
	CPULimit resource.Quantity
	// MemoryLimit is where the kernel kills the pod; GOMEMLIMIT is set a little under it.
	MemoryLimit resource.Quantity
}

// Flag suffixes; the flags are `--<kind>-deadline`, `--<kind>-cpu-request`, and so on, with
// kind "build" or "import".
const (
	flagDeadline      = "deadline"
	flagCPURequest    = "cpu-request"
	flagCPULimit      = "cpu-limit"
	flagMemoryRequest = "memory-request"
	flagMemoryLimit   = "memory-limit"
	// minDeadline refuses a deadline no real Job could meet: the pod alone takes seconds to
	// start, and an image pull may take a minute.
	minDeadline = time.Minute
)

// Flag is the name of the kind's flag with suffix, for error messages: Flag("build", "deadline").
func Flag(kind, suffix string) string { return "--" + kind + "-" + suffix }

// AddFlags registers the kind's flags on fs, with b's values as defaults.
func (b *Bounds) AddFlags(fs *pflag.FlagSet, kind string) {
	fs.DurationVar(&b.Deadline, kind+"-"+flagDeadline, b.Deadline,
		"longest a "+kind+" Job may run, retries included, before it is stopped (activeDeadlineSeconds)")
	fs.Var(&quantity{&b.CPURequest}, kind+"-"+flagCPURequest, "CPU requested by "+kind+" pods, e.g. 100m")
	fs.Var(&quantity{&b.CPULimit}, kind+"-"+flagCPULimit, "CPU limit of "+kind+" pods, e.g. 1; 0: no limit")
	fs.Var(&quantity{&b.MemoryRequest}, kind+"-"+flagMemoryRequest, "memory requested by "+kind+" pods, e.g. 128Mi")
	fs.Var(&quantity{&b.MemoryLimit}, kind+"-"+flagMemoryLimit, "memory limit of "+kind+" pods, e.g. 512Mi; GOMEMLIMIT is set a little under it")
}

// Args are the flags that give a role the bounds b for the kind's Jobs (the operator forwards
// the import Jobs' bounds to every provider this way).
func (b Bounds) Args(kind string) []string {
	return []string{
		Flag(kind, flagDeadline), b.Deadline.String(),
		Flag(kind, flagCPURequest), b.CPURequest.String(),
		Flag(kind, flagCPULimit), b.CPULimit.String(),
		Flag(kind, flagMemoryRequest), b.MemoryRequest.String(),
		Flag(kind, flagMemoryLimit), b.MemoryLimit.String(),
	}
}

// Validate refuses bounds the API server would refuse on every Job (a request above its limit)
// or no Job could live with: a deadline under a minute, or a memory limit under minMemory, what
// the kind's Job needs at the least (build: its decoders' caps plus the Go runtime).
func (b Bounds) Validate(kind string, minMemory int64) error {
	switch {
	case b.Deadline < minDeadline:
		return fmt.Errorf("invalid %s: %s: want at least %s", Flag(kind, flagDeadline), b.Deadline, minDeadline)
	case b.MemoryLimit.Value() < minMemory:
		return fmt.Errorf("invalid %s: %s: %s Jobs need at least %s", Flag(kind, flagMemoryLimit), &b.MemoryLimit, kind,
			resource.NewQuantity(minMemory, resource.BinarySI))
	case b.MemoryRequest.Cmp(b.MemoryLimit) > 0:
		return fmt.Errorf("invalid %s: %s is above %s %s", Flag(kind, flagMemoryRequest), &b.MemoryRequest, Flag(kind, flagMemoryLimit), &b.MemoryLimit)
	case !b.CPULimit.IsZero() && b.CPURequest.Cmp(b.CPULimit) > 0:
		return fmt.Errorf("invalid %s: %s is above %s %s", Flag(kind, flagCPURequest), &b.CPURequest, Flag(kind, flagCPULimit), &b.CPULimit)
	}
	return nil
}

// ActiveDeadlineSeconds is the Job spec's field for b.Deadline, rounded up to a whole second.
func (b Bounds) ActiveDeadlineSeconds() *int64 {
	return ptr.To(int64((b.Deadline + time.Second - 1) / time.Second))
}

// Resources are the container's requests and limits. Zero values are left out, so a zero CPU
// limit means none.
func (b Bounds) Resources() corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	set := func(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
		if !q.IsZero() {
			l[name] = q
		}
	}
	set(r.Requests, corev1.ResourceCPU, b.CPURequest)
	set(r.Requests, corev1.ResourceMemory, b.MemoryRequest)
	set(r.Limits, corev1.ResourceCPU, b.CPULimit)
	set(r.Limits, corev1.ResourceMemory, b.MemoryLimit)
	return r
}

// GoMemLimit is the GOMEMLIMIT environment variable for the container: 90% of the memory limit,
// in bytes. The Go collector works harder as the heap nears it, so a burst of garbage is
// collected before the kernel kills the pod; the tenth left over is for what the runtime does
// not count (thread stacks outside the heap, the page cache the cgroup charges).
func (b Bounds) GoMemLimit() corev1.EnvVar {
	return corev1.EnvVar{Name: "GOMEMLIMIT", Value: strconv.FormatInt(b.MemoryLimit.Value()/10*9, 10)}
}

// quantity is a resource-quantity flag.
type quantity struct{ q *resource.Quantity }

func (f *quantity) String() string {
	if f.q == nil {
		return "0"
	}
	return f.q.String()
}

func (f *quantity) Set(s string) error {
	v, err := resource.ParseQuantity(s)
	if err != nil || v.Sign() < 0 {
		return fmt.Errorf("%q is not a Kubernetes quantity such as 500m or 512Mi", s)
	}
	*f.q = v
	return nil
}

func (f *quantity) Type() string { return "quantity" }
