package install

import (
	"cmp"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"banlieue.io/banlieue/internal/imagebuilder/build"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
)

// jobValues set every limit and Job bound of the chart to something other than its default.
var jobValues = []string{
	"imagebuilder.limits.maxDownloadSize=4Gi", "imagebuilder.limits.maxDiskSize=40Gi",
	"imagebuilder.limits.maxXZDictionary=8Mi", "imagebuilder.limits.maxZstdWindow=16Mi",
	"imagebuilder.limits.minTransferRate=1Mi",
	"imagebuilder.limits.allowNetworks[0]=10.20.0.0/16", "imagebuilder.limits.allowNetworks[1]=fd00::/8",
	"imagebuilder.limits.insecureRegistries[0]=mirror.lab:5000",
	"imagebuilder.jobs.deadline=90m", "imagebuilder.jobs.cpuRequest=250m", "imagebuilder.jobs.cpuLimit=0",
	"imagebuilder.jobs.memoryRequest=256Mi", "imagebuilder.jobs.memoryLimit=1Gi",
	"operator.importJobs.deadline=2h", "operator.importJobs.cpuRequest=50m", "operator.importJobs.cpuLimit=2",
	"operator.importJobs.memoryRequest=32Mi", "operator.importJobs.memoryLimit=128Mi",
}

// roleFlags parses a rendered role's args with the binary's own limit and bound flags, starting
// from zero values: a flag the rendering leaves out stays zero and fails the comparison, so the
// defaults are checked to be rendered, not merely inherited.
func roleFlags(t *testing.T, args []string, kind string) (build.Limits, jobbounds.Bounds) {
	t.Helper()
	var limits build.Limits
	var bounds jobbounds.Bounds
	fs := pflag.NewFlagSet(kind, pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	if kind == "build" {
		limits.AddFlags(fs)
	}
	bounds.AddFlags(fs, kind)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return limits, bounds
}

func deploymentArgs(t *testing.T, objs []*unstructured.Unstructured, name string) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == name {
			ctrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(ctrs[0].(map[string]any), "args")
			return args
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}

// TestChartJobFlags: the chart's (and config/default's) limit and Job bound values reach the
// imagebuilder's and the operator's args; left at their defaults they are the binary's defaults.
func TestChartJobFlags(t *testing.T) {
	helm := helmBinary(t)
	custom := func(deadline string, cpuReq, cpuLim, memReq, memLim string) jobbounds.Bounds {
		d, _ := time.ParseDuration(deadline)
		return jobbounds.Bounds{Deadline: d, CPURequest: resource.MustParse(cpuReq), CPULimit: resource.MustParse(cpuLim),
			MemoryRequest: resource.MustParse(memReq), MemoryLimit: resource.MustParse(memLim)}
	}
	for _, tt := range []struct {
		name                      string
		rendering                 []byte
		limits                    build.Limits
		buildBounds, importBounds jobbounds.Bounds
	}{
		{"helm template (default values)", renderChart(t, helm), build.DefaultLimits(), jobbounds.DefaultBuild(), jobbounds.DefaultImport()},
		{"kubectl kustomize config/default", renderKustomize(t), build.DefaultLimits(), jobbounds.DefaultBuild(), jobbounds.DefaultImport()},
		{"helm template (job values set)", renderChart(t, helm, setFlags(jobValues)...), build.Limits{
			MaxDownloadBytes: 4 << 30, MaxDiskBytes: 40 << 30, MaxXZDictBytes: 8 << 20, MaxZstdWindowBytes: 16 << 20, MinBytesPerSecond: 1 << 20,
			AllowNetworks:      []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00::/8")},
			InsecureRegistries: []string{"mirror.lab:5000"},
		}, custom("90m", "250m", "0", "256Mi", "1Gi"), custom("2h", "50m", "2", "32Mi", "128Mi")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs := parseObjects(t, tt.rendering)
			builderArgs := deploymentArgs(t, objs, "banlieue-imagebuilder")
			limits, bounds := roleFlags(t, builderArgs, "build")
			if !reflect.DeepEqual(limits, tt.limits) {
				t.Errorf("imagebuilder limits\n got %+v\nwant %+v\nfrom %q", limits, tt.limits, builderArgs)
			}
			if got, want := bounds.Args("build"), tt.buildBounds.Args("build"); !slices.Equal(got, want) {
				t.Errorf("imagebuilder build bounds %q, want %q", got, want)
			}
			// The rendered limits must be ones the imagebuilder starts with.
			if err := bounds.Validate("build", limits.MaxXZDictBytes+limits.MaxZstdWindowBytes+jobbounds.RuntimeMemory); err != nil {
				t.Errorf("imagebuilder would refuse its args: %v", err)
			}
			opArgs := deploymentArgs(t, objs, "banlieue-operator")
			_, imp := roleFlags(t, opArgs, "import")
			if got, want := imp.Args("import"), tt.importBounds.Args("import"); !slices.Equal(got, want) {
				t.Errorf("operator import bounds %q, want %q", got, want)
			}
			if err := imp.Validate("import", jobbounds.RuntimeMemory); err != nil {
				t.Errorf("operator would refuse its args: %v", err)
			}
			for _, a := range deploymentArgs(t, objs, "banlieue-controller") {
				if strings.HasPrefix(a, "--build-") || strings.HasPrefix(a, "--import-") || strings.HasPrefix(a, "--max-") {
					t.Errorf("controller got %s, a flag it does not have", a)
				}
			}
		})
	}
}

func setFlags(values []string) []string {
	var args []string
	for _, v := range values {
		args = append(args, "--set", v)
	}
	return args
}

// TestChartBuildJobPull: image.pullPolicy and the build namespace's pull secrets and CA bundle
// ConfigMap reach the imagebuilder's args (which set them on every build Job); left unset, the
// chart renders none of these flags, as config/default does.
func TestChartBuildJobPull(t *testing.T) {
	helm := helmBinary(t)
	parse := func(args []string) (jobimage.Pull, string) {
		var pull jobimage.Pull
		var ca string
		fs := pflag.NewFlagSet("build", pflag.ContinueOnError)
		fs.ParseErrorsAllowlist.UnknownFlags = true
		pull.AddFlags(fs, "build")
		fs.StringVar(&ca, "build-ca-configmap", "", "")
		if err := fs.Parse(args); err != nil {
			t.Fatalf("parsing %q: %v", args, err)
		}
		return pull, ca
	}
	for _, tt := range []struct {
		name      string
		rendering []byte
		pull      jobimage.Pull
		ca        string
	}{
		{"helm template (default values)", renderChart(t, helm), jobimage.Pull{}, ""},
		{"kubectl kustomize config/default", renderKustomize(t), jobimage.Pull{}, ""},
		{"helm template (pull and CA values set)", renderChart(t, helm, setFlags([]string{"image.pullPolicy=Never",
			"imagebuilder.jobs.imagePullSecrets[0].name=regcred", "imagebuilder.jobs.imagePullSecrets[1].name=mirror",
			"imagebuilder.jobs.caBundleConfigMap=mirror-ca"})...),
			jobimage.Pull{Policy: "Never", Secrets: []string{"regcred", "mirror"}}, "mirror-ca"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := deploymentArgs(t, parseObjects(t, tt.rendering), "banlieue-imagebuilder")
			pull, ca := parse(args)
			if pull.Policy != tt.pull.Policy || !slices.Equal(pull.Secrets, tt.pull.Secrets) || ca != tt.ca {
				t.Errorf("build Jobs pull %+v with CA ConfigMap %q, want %+v and %q (args %q)", pull, ca, tt.pull, tt.ca, args)
			}
		})
	}
}

// TestChartExportJobs: both installs configure the controller's export Jobs
// (docs/guides/libvirt-provider.md, "Exporting a disk off its host"): BANLIEUE_EXPORT_IMAGE is
// the controller's own image unless controller.exportJobs.image names another, and the chart's
// pull policy, pull secrets and plain-HTTP registries reach the controller's export flags; left
// unset, no such flag is rendered, as config/default renders none.
func TestChartExportJobs(t *testing.T) {
	helm := helmBinary(t)
	for _, tt := range []struct {
		name      string
		rendering []byte
		image     string // "" wants the controller's own
		pull      jobimage.Pull
		insecure  []string
	}{
		{"helm template (default values)", renderChart(t, helm), "", jobimage.Pull{}, nil},
		{"kubectl kustomize config/default", renderKustomize(t), "", jobimage.Pull{}, nil},
		{"helm template (export values set)", renderChart(t, helm, setFlags([]string{"image.pullPolicy=Never",
			"controller.exportJobs.image=registry.example/banlieue-export:v2",
			"controller.exportJobs.imagePullSecrets[0].name=regcred", "controller.exportJobs.insecureRegistries={registry.lab:5000,10.0.0.7}"})...),
			"registry.example/banlieue-export:v2", jobimage.Pull{Policy: "Never", Secrets: []string{"regcred"}}, []string{"registry.lab:5000", "10.0.0.7"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var d *appsv1.Deployment
			for _, o := range parseObjects(t, tt.rendering) {
				if o.GetKind() == "Deployment" && o.GetName() == "banlieue-controller" {
					d = &appsv1.Deployment{}
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
						t.Fatal(err)
					}
				}
			}
			if d == nil {
				t.Fatal("no Deployment banlieue-controller")
			}
			c := d.Spec.Template.Spec.Containers[0]
			want := cmp.Or(tt.image, c.Image)
			var got []string
			for _, e := range c.Env {
				if e.Name == "BANLIEUE_EXPORT_IMAGE" {
					got = append(got, e.Value)
				}
			}
			if !slices.Equal(got, []string{want}) || strings.HasPrefix(want, "banlieue:") {
				t.Errorf("BANLIEUE_EXPORT_IMAGE %q, want %q (the controller runs %s)", got, want, c.Image)
			}
			var pull jobimage.Pull
			var insecure []string
			fs := pflag.NewFlagSet("export", pflag.ContinueOnError)
			fs.ParseErrorsAllowlist.UnknownFlags = true
			pull.AddFlags(fs, "export")
			fs.StringArrayVar(&insecure, "export-insecure-registry", nil, "")
			if err := fs.Parse(c.Args); err != nil {
				t.Fatalf("parsing %q: %v", c.Args, err)
			}
			if pull.Policy != tt.pull.Policy || !slices.Equal(pull.Secrets, tt.pull.Secrets) || !slices.Equal(insecure, tt.insecure) {
				t.Errorf("export Jobs pull %+v, insecure registries %q; want %+v and %q (args %q)", pull, insecure, tt.pull, tt.insecure, c.Args)
			}
		})
	}
}
