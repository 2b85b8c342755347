package jobimage

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
)

func parse(kind string, args ...string) (Pull, error) {
	var p Pull
	fs := pflag.NewFlagSet(kind, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	p.AddFlags(fs, kind)
	if err := fs.Parse(args); err != nil {
		return p, err
	}
	return p, p.Validate(kind)
}

// The operator forwards a ProviderClass's pull settings as Args; the provider parses them back.
func TestArgsRoundTrip(t *testing.T) {
	for _, want := range []Pull{
		{},
		{Policy: corev1.PullNever},
		{Policy: corev1.PullAlways, Secrets: []string{"regcred", "mirror"}},
		{Secrets: []string{"regcred"}},
	} {
		got, err := parse("import", want.Args("import")...)
		if err != nil {
			t.Fatalf("%+v: %v", want, err)
		}
		if got.Policy != want.Policy || !reflect.DeepEqual(got.Secrets, want.Secrets) {
			t.Errorf("round trip of %+v gave %+v (args %q)", want, got, want.Args("import"))
		}
	}
}

func TestBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--build-image-pull-policy", "never"}, `"never": want Always, IfNotPresent or Never`},
		{[]string{"--build-image-pull-secret", "Reg_Cred"}, "invalid --build-image-pull-secret: \"Reg_Cred\""},
	} {
		_, err := parse("build", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

func TestApplyReachesEveryContainer(t *testing.T) {
	spec := corev1.PodSpec{
		Containers:       []corev1.Container{{Name: "a", ImagePullPolicy: corev1.PullAlways}, {Name: "b"}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "stale"}},
	}
	Pull{Policy: corev1.PullNever, Secrets: []string{"regcred"}}.Apply(&spec)
	for _, c := range spec.Containers {
		if c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("container %s pulls %q, want Never", c.Name, c.ImagePullPolicy)
		}
	}
	if want := []corev1.LocalObjectReference{{Name: "regcred"}}; !reflect.DeepEqual(spec.ImagePullSecrets, want) {
		t.Errorf("pull secrets %+v, want %+v", spec.ImagePullSecrets, want)
	}
	Pull{}.Apply(&spec)
	if spec.Containers[0].ImagePullPolicy != "" || spec.ImagePullSecrets != nil {
		t.Errorf("the empty Pull left policy %q and secrets %+v, want Kubernetes' defaults", spec.Containers[0].ImagePullPolicy, spec.ImagePullSecrets)
	}
}
