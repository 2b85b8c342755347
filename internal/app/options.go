package app

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/pflag"
)

// DefaultLeaderElectionNamespace holds the leases unless --leader-election-namespace says otherwise.
const DefaultLeaderElectionNamespace = "banlieue-system"

// Options are the flags every long-running role accepts. Each flag falls back to an environment
// variable so a Deployment can configure a role without rewriting its arguments.
type Options struct {
	Kubeconfig              string
	Namespace               string
	HealthPort              int
	MetricsPort             int
	MetricsSecure           bool
	LogFormat               string
	LogLevel                string
	NoLeaderElect           bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	LeaderElectionIdentity  string
	// MetricsCertDir holds tls.crt and tls.key, the certificate /metrics presents (reloaded when
	// they change); empty: one generated in memory, which no scraper can verify.
	MetricsCertDir string
	// Workers is how many objects each of the role's controllers reconciles at once (--workers).
	Workers int
	// KubeAPIQPS and KubeAPIBurst bound the role's requests to the API server (--kube-api-qps,
	// --kube-api-burst). client-go's own default, 5 per second with bursts of 10, is what a
	// kubeconfig without them gets: it held 200 VMs to 2.5 realised per second whatever the
	// workers (docs/performance.md, "Load"). The API server's priority and fairness is what
	// protects it; this only keeps a runaway role from hogging its share.
	KubeAPIQPS   float64
	KubeAPIBurst int
}

// Default request limits of every role: those of kube-controller-manager's --kube-api-qps and
// --kube-api-burst.
const (
	DefaultKubeAPIQPS   = 50
	DefaultKubeAPIBurst = 100
)

// MaxWorkers caps --workers: a typo must not open hundreds of concurrent passes against the
// API server or, in the provider, against one libvirtd (whose own limits are per host:
// docs/operations.md, "Host protection").
const MaxWorkers = 64

// AddFlags registers the common flags. leaderElectionID is the role's default lease name;
// defaultNamespace is the role's default --namespace ("" = cluster-wide); defaultWorkers is the
// role's default --workers.
func (o *Options) AddFlags(fs *pflag.FlagSet, leaderElectionID, defaultNamespace string, defaultWorkers int) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"kubeconfig file (env KUBECONFIG); default: in-cluster config, then ~/.kube/config")
	fs.StringVar(&o.Namespace, "namespace", envString("BANLIEUE_NAMESPACE", defaultNamespace),
		"namespace to watch; empty watches every namespace (env BANLIEUE_NAMESPACE)")
	fs.IntVar(&o.HealthPort, "health-port", EnvInt("BANLIEUE_HEALTH_PORT", 8081),
		"port serving /livez and /readyz (env BANLIEUE_HEALTH_PORT)")
	fs.IntVar(&o.MetricsPort, "metrics-port", EnvInt("BANLIEUE_METRICS_PORT", 8080),
		"port serving /metrics; 0 disables it (env BANLIEUE_METRICS_PORT)")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", envBoolOr("BANLIEUE_METRICS_SECURE", true),
		"serve /metrics over HTTPS to tokens allowed to get it; false: plain HTTP on 127.0.0.1, for local development (env BANLIEUE_METRICS_SECURE)")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", os.Getenv("BANLIEUE_METRICS_CERT_DIR"),
		"directory holding tls.crt and tls.key, the certificate /metrics serves (reloaded when they change); empty: a self-signed one generated at start (env BANLIEUE_METRICS_CERT_DIR)")
	fs.StringVar(&o.LogFormat, "log-format", envString("BANLIEUE_LOG_FORMAT", "text"),
		"log format: text or json (env BANLIEUE_LOG_FORMAT)")
	fs.StringVar(&o.LogLevel, "log-level", os.Getenv("BANLIEUE_LOG_LEVEL"),
		"log level: error, warn, info, debug or a verbosity number (env BANLIEUE_LOG_LEVEL)")
	fs.BoolVar(&o.NoLeaderElect, "no-leader-elect", envBool("BANLIEUE_NO_LEADER_ELECT"),
		"run without leader election (env BANLIEUE_NO_LEADER_ELECT)")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace",
		envString("BANLIEUE_LEADER_ELECTION_NAMESPACE", DefaultLeaderElectionNamespace),
		"namespace of the leader election lease (env BANLIEUE_LEADER_ELECTION_NAMESPACE)")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id",
		envString("BANLIEUE_LEADER_ELECTION_ID", leaderElectionID),
		"name of the leader election lease (env BANLIEUE_LEADER_ELECTION_ID)")
	fs.StringVar(&o.LeaderElectionIdentity, "leader-election-identity",
		envString("BANLIEUE_LEADER_ELECTION_IDENTITY", defaultIdentity()),
		"this process's identity in the lease (env BANLIEUE_LEADER_ELECTION_IDENTITY; default POD_NAME, then HOSTNAME)")
	fs.IntVar(&o.Workers, "workers", EnvInt("BANLIEUE_WORKERS", defaultWorkers),
		fmt.Sprintf("objects each controller of the role reconciles at once, 1 to %d (env BANLIEUE_WORKERS)", MaxWorkers))
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", envFloat("BANLIEUE_KUBE_API_QPS", DefaultKubeAPIQPS),
		"requests per second to the API server, sustained (env BANLIEUE_KUBE_API_QPS)")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", EnvInt("BANLIEUE_KUBE_API_BURST", DefaultKubeAPIBurst),
		"requests to the API server in a burst above --kube-api-qps (env BANLIEUE_KUBE_API_BURST)")
}

// Validate rejects values the manager would otherwise misinterpret.
func (o *Options) Validate() error {
	if o.LogFormat != "text" && o.LogFormat != "json" {
		return fmt.Errorf("invalid --log-format: %q (want text or json)", o.LogFormat)
	}
	if _, err := parseLevel(o.LogLevel); err != nil {
		return err
	}
	for name, port := range map[string]int{"--health-port": o.HealthPort, "--metrics-port": o.MetricsPort} {
		if port < 0 || port > 65535 {
			return fmt.Errorf("invalid %s: %d is not a port number", name, port)
		}
	}
	if o.MetricsCertDir != "" {
		// controller-runtime falls back to a self-signed certificate when the files are absent,
		// which a scraper told to verify would refuse without saying why: fail at start instead.
		if !o.MetricsSecure {
			return fmt.Errorf("invalid --metrics-cert-dir: --metrics-secure=false serves plain HTTP")
		}
		if _, err := tls.LoadX509KeyPair(filepath.Join(o.MetricsCertDir, "tls.crt"), filepath.Join(o.MetricsCertDir, "tls.key")); err != nil {
			return fmt.Errorf("invalid --metrics-cert-dir: %w", err)
		}
	}
	if o.Workers < 1 || o.Workers > MaxWorkers {
		return fmt.Errorf("invalid --workers: %d: want 1 to %d", o.Workers, MaxWorkers)
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		return fmt.Errorf("invalid --kube-api-qps/--kube-api-burst: %v/%d: both must be positive", o.KubeAPIQPS, o.KubeAPIBurst)
	}
	if !o.NoLeaderElect && (o.LeaderElectionID == "" || o.LeaderElectionNamespace == "") {
		return fmt.Errorf("invalid --leader-election-id/--leader-election-namespace: both must be set unless --no-leader-elect")
	}
	return nil
}

func defaultIdentity() string {
	for _, env := range []string{"POD_NAME", "HOSTNAME"} {
		if v := os.Getenv(env); v != "" {
			return v
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "unknown"
}

func envString(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return fallback
}

// envFloat is the number in environment variable name, fallback when it is unset or not a number.
func envFloat(name string, fallback float64) float64 {
	if f, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil {
		return f
	}
	return fallback
}

// EnvInt is the integer in environment variable name, fallback when it is unset or not a number.
func EnvInt(name string, fallback int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return fallback
}

// envBoolOr is envBool for a flag that defaults to true: an unset or unparsable value keeps the
// fallback, so a typo cannot turn a protection off.
func envBoolOr(name string, fallback bool) bool {
	if b, err := strconv.ParseBool(os.Getenv(name)); err == nil {
		return b
	}
	return fallback
}

func envBool(name string) bool {
	b, _ := strconv.ParseBool(os.Getenv(name))
	return b
}
