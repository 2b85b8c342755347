package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/console"
)

// consoleRelayOptions are the controller's console flags: the aggregated API it serves for the
// APIService v1alpha1.subresources.banlieue.io (ADR-0140).
type consoleRelayOptions struct {
	port           int
	certDir        string
	serviceAccount string
}

func (o *consoleRelayOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&o.port, "console-port", app.EnvInt("BANLIEUE_CONSOLE_PORT", 0),
		"port of the console relay, the aggregated API the kube-apiserver forwards banlieue console sessions to; 0 (the default) turns it off (env BANLIEUE_CONSOLE_PORT)")
	f.StringVar(&o.certDir, "console-cert-dir", envOr("BANLIEUE_CONSOLE_CERT_DIR", "/etc/banlieue/console"),
		"directory holding the relay's serving certificate, tls.crt and tls.key, that the APIService's caBundle vouches for (env BANLIEUE_CONSOLE_CERT_DIR)")
	f.StringVar(&o.serviceAccount, "console-service-account", envOr("POD_NAMESPACE", "banlieue-system")+"/"+envOr("POD_SERVICE_ACCOUNT", "banlieue-controller"),
		"namespace/name of the relay's own ServiceAccount, whose per-Provider tokens the providers accept")
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if o.port < 0 || o.port > 65535 {
			return fmt.Errorf("invalid --console-port: %d", o.port)
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
}

// setup adds the relay's listener when a port is set.
func (o *consoleRelayOptions) setup(mgr manager.Manager) error {
	if o.port == 0 {
		return nil
	}
	sa, err := parseNamespacedName(o.serviceAccount)
	if err != nil {
		return fmt.Errorf("invalid --console-service-account: %w", err)
	}
	cfg, err := console.ServingTLS(filepath.Join(o.certDir, "tls.crt"), filepath.Join(o.certDir, "tls.key"))
	if err != nil {
		return fmt.Errorf("the console relay's serving certificate (--console-cert-dir): %w", err)
	}
	return mgr.Add(&console.Listener{
		Addr: ":" + strconv.Itoa(o.port),
		TLS:  cfg,
		Handler: &console.Server{
			Reader: mgr.GetAPIReader(),
			Client: mgr.GetClient(),
			Relay: &console.Relay{
				Tokens: &console.ServiceAccountTokens{Client: mgr.GetClient(), ServiceAccount: sa},
				TLS:    console.ProviderTLS(),
			},
		},
	})
}

func parseNamespacedName(s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("%q is not namespace/name", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
