package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
	"banlieue.io/banlieue/internal/operator"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	libvirtrole "banlieue.io/banlieue/internal/provider/libvirt/role"
)

// providerLibvirtOptions are the flags of `banlieue provider libvirt` beyond the common ones
// (docs/operations.md, "Role-specific flags").
type providerLibvirtOptions struct {
	providerName         string
	buildNamespace       string
	buildTolerations     []string
	importImage          string
	importServiceAccount string
	importBounds         jobbounds.Bounds
	importPull           jobimage.Pull
	consolePort          int
	consoleRelay         string
	hostLimits           hostconn.Limits
	breaker              hostconn.Breaker
}

func newProviderLibvirtCommand() *cobra.Command {
	po := providerLibvirtOptions{importBounds: jobbounds.DefaultImport(), hostLimits: hostconn.DefaultLimits, breaker: hostconn.DefaultBreaker}
	var tolerations []corev1.Toleration
	r := &role{name: "provider-libvirt", leaderElectionID: "banlieue-provider-libvirt", defaultWorkers: libvirtrole.DefaultWorkers}
	roleOptions := func(opts app.Options) libvirtrole.Options {
		return libvirtrole.Options{
			ProviderName:         po.providerName,
			ProviderNamespace:    opts.Namespace,
			BuildNamespace:       po.buildNamespace,
			ImportImage:          po.importImage,
			ImportServiceAccount: po.importServiceAccount,
			Tolerations:          tolerations,
			ImportBounds:         po.importBounds,
			ImportPull:           po.importPull,
			ConsolePort:          po.consolePort,
			ConsoleRelay:         po.consoleRelay,
			PodName:              podName(),
			Workers:              opts.Workers,
			HostLimits:           po.hostLimits,
			Breaker:              po.breaker,
		}
	}
	r.customize = func(o *manager.Options, opts app.Options) {
		o.Cache.ByObject = libvirtrole.CacheByObject(roleOptions(opts))
	}
	r.setup = func(mgr manager.Manager, opts app.Options) error { return libvirtrole.Setup(mgr, roleOptions(opts)) }
	cmd := r.command("libvirt", "Probe libvirt hosts, import images and realise LibvirtMachines as libvirt domains")
	// A bad toleration is fatal at startup, before anything is reconciled.
	cmd.PreRunE = func(*cobra.Command, []string) error {
		tolerations = nil
		for _, t := range po.buildTolerations {
			tol, err := operator.ParseToleration(t)
			if err != nil {
				return err
			}
			tolerations = append(tolerations, tol)
		}
		for flag, n := range map[string]int{"--host-domain-operations": po.hostLimits.DomainOperations,
			"--host-volume-uploads": po.hostLimits.VolumeUploads, "--host-breaker-failures": po.breaker.Failures} {
			if n < 1 || n > maxHostSetting {
				return fmt.Errorf("invalid %s: %d: want 1 to %d", flag, n, maxHostSetting)
			}
		}
		if po.breaker.CoolDown < time.Second {
			return fmt.Errorf("invalid --host-breaker-cool-down: %s: want at least 1s", po.breaker.CoolDown)
		}
		if po.importImage == "" {
			return fmt.Errorf("invalid --import-image: empty")
		}
		if po.importServiceAccount == "" {
			return fmt.Errorf("invalid --import-service-account: empty; the operator sets it to the Provider's own import account")
		}
		if err := po.importPull.Validate("import"); err != nil {
			return err
		}
		return po.importBounds.Validate("import", jobbounds.RuntimeMemory)
	}
	f := cmd.Flags()
	f.StringVar(&po.providerName, "provider-name", os.Getenv("BANLIEUE_PROVIDER_NAME"),
		"serve only the Provider of this name (env BANLIEUE_PROVIDER_NAME); the operator always sets it")
	f.StringVar(&po.buildNamespace, "build-namespace", envOr("BANLIEUE_BUILD_NAMESPACE", "banlieue-imagebuild"),
		"namespace of the artifacts PVC and the import Jobs; must equal the imagebuilder's (env BANLIEUE_BUILD_NAMESPACE)")
	f.StringArrayVar(&po.buildTolerations, "build-toleration", nil, "key[=value]:Effect toleration copied onto import Jobs (repeatable)")
	f.StringVar(&po.importImage, "import-image", envOr("BANLIEUE_IMPORT_IMAGE", "banlieue:"+currentVersion().Version),
		"image the import Jobs run (env BANLIEUE_IMPORT_IMAGE)")
	f.StringVar(&po.importServiceAccount, "import-service-account", os.Getenv("BANLIEUE_IMPORT_SERVICE_ACCOUNT"),
		"the Provider's own import ServiceAccount, in the build namespace, that its import Jobs run as; where it does not exist, they run as that namespace's default, which then needs its grant (ADR-0145) (env BANLIEUE_IMPORT_SERVICE_ACCOUNT); the operator always sets it")
	f.IntVar(&po.consolePort, "console-port", app.EnvInt("BANLIEUE_CONSOLE_PORT", 0),
		"port of the console endpoint the console relay calls (ADR-0140); 0 turns it off (env BANLIEUE_CONSOLE_PORT)")
	f.StringVar(&po.consoleRelay, "console-relay", envOr("BANLIEUE_CONSOLE_RELAY", "system:serviceaccount:banlieue-system:banlieue-controller"),
		"the only user whose console tokens the endpoint accepts: the controller's ServiceAccount (env BANLIEUE_CONSOLE_RELAY)")
	f.IntVar(&po.hostLimits.DomainOperations, "host-domain-operations", app.EnvInt("BANLIEUE_HOST_DOMAIN_OPERATIONS", po.hostLimits.DomainOperations),
		"machine passes (converge or teardown) talking to one host at once (env BANLIEUE_HOST_DOMAIN_OPERATIONS)")
	f.IntVar(&po.hostLimits.VolumeUploads, "host-volume-uploads", app.EnvInt("BANLIEUE_HOST_VOLUME_UPLOADS", po.hostLimits.VolumeUploads),
		"volume uploads streaming to one host at once (env BANLIEUE_HOST_VOLUME_UPLOADS)")
	f.IntVar(&po.breaker.Failures, "host-breaker-failures", app.EnvInt("BANLIEUE_HOST_BREAKER_FAILURES", po.breaker.Failures),
		"failed connection attempts in a row that open a host's circuit breaker (env BANLIEUE_HOST_BREAKER_FAILURES)")
	f.DurationVar(&po.breaker.CoolDown, "host-breaker-cool-down", po.breaker.CoolDown,
		"how long an open circuit breaker keeps its host from being dialled before one probe")
	po.importBounds.AddFlags(f, "import")
	po.importPull.AddFlags(f, "import")
	cmd.AddCommand(newProviderLibvirtCheckCommand(), newProviderLibvirtImportCommand(), newProviderLibvirtAuditCommand(),
		newProviderLibvirtExportCommand())
	return cmd
}

// maxHostSetting caps the per-host flags: a typo must not turn a limit into none.
const maxHostSetting = 256

// podName is the process's pod (the Downward API's POD_NAME), or the host name, which is the
// pod's name inside a pod.
func podName() string {
	host, _ := os.Hostname()
	return envOr("POD_NAME", host)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
