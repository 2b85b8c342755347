package build

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/spf13/pflag"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// The imagebuilder hands its limits to the build as Args; parsed back by the build's own flags
// they must be the same limits, or a build Job would run under other limits than configured.
func TestLimitsArgsRoundTrip(t *testing.T) {
	want := Limits{
		MaxDownloadBytes: 5 << 30, MaxDiskBytes: 3 << 40, MaxXZDictBytes: 1 << 20, MaxZstdWindowBytes: 8 << 20,
		MinBytesPerSecond:  1000,
		AllowNetworks:      []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")},
		InsecureRegistries: []string{"registry.lab:5000"},
	}
	got := DefaultLimits()
	fs := pflag.NewFlagSet("build", pflag.ContinueOnError)
	got.AddFlags(fs)
	if err := fs.Parse(want.Args()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed back\n got %+v\nwant %+v", got, want)
	}
}

func TestLimitFlagsRefuseBadValues(t *testing.T) {
	for _, args := range [][]string{
		{"--max-disk-size", "lots"},
		{"--max-disk-size", "-1Gi"},
		{"--min-transfer-rate", "1.5"},
		{"--allow-network", "10.0.0.0"},
	} {
		l := DefaultLimits()
		fs := pflag.NewFlagSet("build", pflag.ContinueOnError)
		fs.SetOutput(discard{})
		l.AddFlags(fs)
		if err := fs.Parse(args); err == nil {
			t.Errorf("%q accepted: %+v", args, l)
		}
	}
	l := DefaultLimits()
	fs := pflag.NewFlagSet("build", pflag.ContinueOnError)
	l.AddFlags(fs)
	if err := fs.Parse([]string{"--min-transfer-rate", "64Ki/s", "--max-download-size", "2G"}); err != nil {
		t.Fatal(err)
	}
	if l.MinBytesPerSecond != 64<<10 || l.MaxDownloadBytes != 2e9 {
		t.Errorf("parsed %+v", l)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func TestFailureOf(t *testing.T) {
	refused := refusedBy(FlagMaxDiskSize, 256<<30, "qcow2 virtual size 300Gi")
	for _, tt := range []struct {
		err  error
		want Failure
	}{
		{refused, Failure{banlieuev1.ReasonSourceRefused, "source refused by --max-disk-size 256Gi: qcow2 virtual size 300Gi"}},
		{fmt.Errorf("decompressing xz: %w", refused), Failure{banlieuev1.ReasonSourceRefused,
			"decompressing xz: source refused by --max-disk-size 256Gi: qcow2 virtual size 300Gi"}},
		{errors.New("GET https://a/b: 404 Not Found"), Failure{banlieuev1.ReasonBuildFailed, "GET https://a/b: 404 Not Found"}},
	} {
		if got := FailureOf(tt.err); got != tt.want {
			t.Errorf("FailureOf(%v) = %+v, want %+v", tt.err, got, tt.want)
		}
	}
}
