package build

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Limits bound what a build accepts from a source, which is input from outside the cluster
// (docs/guides/image-sources.md). The imagebuilder holds them as flags and passes them to
// every build Job (Args), so one setting governs every build.
type Limits struct {
	// MaxDownloadBytes caps the bytes fetched from a URL or pulled from a registry.
	MaxDownloadBytes int64
	// MaxDiskBytes caps the decompressed stream and the virtual size of a qcow2 source: the
	// disk the artifact becomes.
	MaxDiskBytes int64
	// MaxXZDictBytes caps the dictionary an xz stream may declare; the decoder allocates it.
	MaxXZDictBytes int64
	// MaxZstdWindowBytes caps the window a zstd frame may declare; the decoder allocates it.
	MaxZstdWindowBytes int64
	// MinBytesPerSecond is the slowest a download may run, averaged over a minute, before it
	// counts as stalled; 0 turns the check off.
	MinBytesPerSecond int64
	// AllowNetworks are the private, loopback and link-local networks a source may reach (an
	// on-premises mirror); every other such destination is refused.
	AllowNetworks []netip.Prefix
	// InsecureRegistries are the registries (host or host:port) that may be reached over plain
	// HTTP; every other registry must speak HTTPS.
	InsecureRegistries []string
}

// DefaultLimits are the limits of a build given no flag: generous for real cloud images
// (a few GiB compressed, tens of GiB virtual), small enough that a crafted source cannot take
// the build pod's memory or the artifacts volume.
func DefaultLimits() Limits {
	return Limits{
		MaxDownloadBytes:   32 << 30,
		MaxDiskBytes:       256 << 30,
		MaxXZDictBytes:     64 << 20,
		MaxZstdWindowBytes: 128 << 20,
		MinBytesPerSecond:  16 << 10,
	}
}

// Flag names, shared by `banlieue imagebuilder` and `banlieue imagebuilder build`.
const (
	FlagMaxDownloadSize    = "max-download-size"
	FlagMaxDiskSize        = "max-disk-size"
	FlagMaxXZDict          = "max-xz-dictionary"
	FlagMaxZstdWindow      = "max-zstd-window"
	FlagMinTransferRate    = "min-transfer-rate"
	FlagAllowNetwork       = "allow-network"
	FlagInsecureRegistry   = "insecure-registry"
	minTransferRateSuffix  = "/s"
	quantityFlagUsageShape = "a Kubernetes quantity such as 512Mi or 32Gi"
)

// AddFlags registers l's flags on fs, with l's values as defaults.
func (l *Limits) AddFlags(fs *pflag.FlagSet) {
	fs.Var(&quantity{&l.MaxDownloadBytes}, FlagMaxDownloadSize, "largest source a build fetches, "+quantityFlagUsageShape)
	fs.Var(&quantity{&l.MaxDiskBytes}, FlagMaxDiskSize, "largest disk a build produces (decompressed stream, qcow2 virtual size), "+quantityFlagUsageShape)
	fs.Var(&quantity{&l.MaxXZDictBytes}, FlagMaxXZDict, "largest dictionary an xz source may declare, "+quantityFlagUsageShape)
	fs.Var(&quantity{&l.MaxZstdWindowBytes}, FlagMaxZstdWindow, "largest window a zstd source may declare, "+quantityFlagUsageShape)
	fs.Var(&quantity{&l.MinBytesPerSecond}, FlagMinTransferRate, "slowest download, per second over a minute, before it counts as stalled (0: no minimum), "+quantityFlagUsageShape)
	fs.Var(&prefixes{&l.AllowNetworks}, FlagAllowNetwork, "private, loopback or link-local network (CIDR) a source may reach, e.g. an on-premises mirror (repeatable)")
	fs.StringArrayVar(&l.InsecureRegistries, FlagInsecureRegistry, nil, "registry (host or host:port) a containerDisk may be pulled from over plain HTTP (repeatable)")
}

// Args are the flags that give a build command the limits l.
func (l Limits) Args() []string {
	args := []string{
		"--" + FlagMaxDownloadSize, quantityString(l.MaxDownloadBytes),
		"--" + FlagMaxDiskSize, quantityString(l.MaxDiskBytes),
		"--" + FlagMaxXZDict, quantityString(l.MaxXZDictBytes),
		"--" + FlagMaxZstdWindow, quantityString(l.MaxZstdWindowBytes),
		"--" + FlagMinTransferRate, quantityString(l.MinBytesPerSecond),
	}
	for _, p := range l.AllowNetworks {
		args = append(args, "--"+FlagAllowNetwork, p.String())
	}
	for _, r := range l.InsecureRegistries {
		args = append(args, "--"+FlagInsecureRegistry, r)
	}
	return args
}

// RefusedError is a source that broke a limit or the transport policy. Retrying cannot help,
// so a download gives up at once, and the VMImage row reports it as SourceRefused.
type RefusedError struct {
	// Rule names the limit or policy, as the user sets it: "--max-disk-size 256Gi".
	Rule string
	// Seen is what the source did: "qcow2 virtual size 300Gi".
	Seen string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("source refused by %s: %s", e.Rule, e.Seen)
}

// refusedBy is the refusal of a source that went over the byte limit of flag.
func refusedBy(flag string, limit int64, seen string) error {
	return &RefusedError{Rule: "--" + flag + " " + quantityString(limit), Seen: seen}
}

// quantityString prints n the way a user would write it: 32Gi rather than 34359738368.
func quantityString(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// quantity is a byte-count flag written as a Kubernetes quantity.
type quantity struct{ n *int64 }

func (q *quantity) String() string {
	if q.n == nil {
		return "0"
	}
	return quantityString(*q.n)
}

func (q *quantity) Set(s string) error {
	v, err := resource.ParseQuantity(strings.TrimSuffix(s, minTransferRateSuffix))
	if err != nil {
		return fmt.Errorf("%q is not %s", s, quantityFlagUsageShape)
	}
	n, ok := v.AsInt64()
	if !ok || n < 0 {
		return fmt.Errorf("%q is not a byte count", s)
	}
	*q.n = n
	return nil
}

func (q *quantity) Type() string { return "quantity" }

// prefixes is a repeatable CIDR flag.
type prefixes struct{ p *[]netip.Prefix }

func (f *prefixes) String() string {
	if f.p == nil {
		return "[]"
	}
	s := make([]string, len(*f.p))
	for i, p := range *f.p {
		s[i] = p.String()
	}
	return "[" + strings.Join(s, ",") + "]"
}

func (f *prefixes) Set(s string) error {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return fmt.Errorf("%q is not a CIDR network such as 10.0.0.0/8", s)
	}
	*f.p = append(*f.p, p.Masked())
	return nil
}

func (f *prefixes) Type() string { return "cidr" }
