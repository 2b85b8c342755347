package jobbounds

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func parse(t *testing.T, kind string, args ...string) (Bounds, error) {
	t.Helper()
	b := DefaultBuild()
	fs := pflag.NewFlagSet(kind, pflag.ContinueOnError)
	fs.SetOutput(discard{})
	b.AddFlags(fs, kind)
	return b, fs.Parse(args)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// The operator forwards the import bounds to each provider as Args; parsed back by the
// provider's flags they must be the same bounds.
func TestArgsRoundTrip(t *testing.T) {
	want := Bounds{
		Deadline:   90 * time.Minute,
		CPURequest: resource.MustParse("250m"), CPULimit: resource.MustParse("0"),
		MemoryRequest: resource.MustParse("1Gi"), MemoryLimit: resource.MustParse("3Gi"),
	}
	got, err := parse(t, "import", want.Args("import")...)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Args("import"), want.Args("import")) || got.Deadline != want.Deadline ||
		got.MemoryLimit.Cmp(want.MemoryLimit) != 0 || !got.CPULimit.IsZero() {
		t.Errorf("parsed back %v, want %v", got.Args("import"), want.Args("import"))
	}
}

func TestBadValues(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"--build-memory-limit", "lots"}, "not a Kubernetes quantity"},
		{[]string{"--build-cpu-request", "-1"}, "not a Kubernetes quantity"},
		{[]string{"--build-deadline", "6"}, "--build-deadline"},
		{[]string{"--build-deadline", "30s"}, "invalid --build-deadline: 30s: want at least 1m0s"},
		{[]string{"--build-deadline", "0s"}, "invalid --build-deadline"},
		{[]string{"--build-memory-limit", "200Mi"}, "invalid --build-memory-limit: 200Mi: build Jobs need at least 256Mi"},
		{[]string{"--build-memory-request", "1Gi"}, "invalid --build-memory-request: 1Gi is above --build-memory-limit 512Mi"},
		{[]string{"--build-cpu-request", "2"}, "invalid --build-cpu-request: 2 is above --build-cpu-limit 1"},
	} {
		b, err := parse(t, "build", tt.args...)
		if err == nil {
			err = b.Validate("build", 256<<20)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want an error with %q", tt.args, err, tt.want)
		}
	}
	// A request above a limit that is off is no conflict.
	b, err := parse(t, "build", "--build-cpu-limit", "0", "--build-cpu-request", "4")
	if err != nil || b.Validate("build", 256<<20) != nil {
		t.Errorf("cpu request 4 without a CPU limit refused: %v %v", err, b.Validate("build", 256<<20))
	}
}

func TestDefaultsAreValid(t *testing.T) {
	if err := DefaultBuild().Validate("build", 64<<20+128<<20+RuntimeMemory); err != nil {
		t.Errorf("build defaults: %v", err)
	}
	if err := DefaultImport().Validate("import", RuntimeMemory); err != nil {
		t.Errorf("import defaults: %v", err)
	}
}

func TestPodFields(t *testing.T) {
	for _, tt := range []struct {
		name      string
		b         Bounds
		deadline  int64
		resources corev1.ResourceRequirements
		gomem     string
	}{
		{"build defaults", DefaultBuild(), 6 * 3600, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		}, "483183819"},
		{"no CPU limit, deadline rounded up", Bounds{Deadline: 90*time.Second + time.Millisecond,
			CPURequest: resource.MustParse("2"), MemoryRequest: resource.MustParse("1G"), MemoryLimit: resource.MustParse("1G")},
			91, corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1G")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1G")},
			}, "900000000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := *tt.b.ActiveDeadlineSeconds(); got != tt.deadline {
				t.Errorf("activeDeadlineSeconds %d, want %d", got, tt.deadline)
			}
			got := tt.b.Resources()
			for _, l := range []struct{ got, want corev1.ResourceList }{{got.Requests, tt.resources.Requests}, {got.Limits, tt.resources.Limits}} {
				if len(l.got) != len(l.want) {
					t.Errorf("resources %v, want %v", got, tt.resources)
				}
				for name, q := range l.want {
					if g := l.got[name]; g.Cmp(q) != 0 {
						t.Errorf("%s %s, want %s", name, &g, &q)
					}
				}
			}
			if env := tt.b.GoMemLimit(); env.Name != "GOMEMLIMIT" || env.Value != tt.gomem {
				t.Errorf("GOMEMLIMIT %+v, want %s", env, tt.gomem)
			}
		})
	}
}
