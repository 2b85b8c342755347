package libvirt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/console"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/pkg/libvirt"
)

// consoleOpenTimeout bounds the reviews, the reads and DOMAIN_OPEN_CONSOLE; the console itself
// then lasts until a side hangs up.
const consoleOpenTimeout = 30 * time.Second

// ConsoleServer is the provider's console endpoint (ADR-0140): the relay of the aggregated API
// asks it, with a token for this Provider's audience, for one of this Provider's machines'
// console, which it opens on the pooled connection to the host. The host's key never leaves
// the process; what leaves is the console's bytes, to the relay alone.
type ConsoleServer struct {
	// Client creates the TokenReviews; Reader reads the machine and the Provider, uncached.
	Client client.Client
	Reader client.Reader
	// Connections is the role's pool of host connections.
	Connections *hostconn.Connections
	// Provider is the one Provider this process serves; its machines alone have a console here.
	Provider types.NamespacedName
	// Relay is the user name the relay's tokens authenticate as
	// (system:serviceaccount:<namespace>:<name>); no one else is served.
	Relay string
}

// ServeHTTP serves one console request.
func (s *ConsoleServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), consoleOpenTimeout)
	defer cancel()
	code, err := s.serve(ctx, w, r)
	if err != nil {
		log.FromContext(ctx).Info("console refused", "path", r.URL.Path, "code", code, "reason", err.Error())
		http.Error(w, err.Error(), code)
	}
}

func (s *ConsoleServer) serve(ctx context.Context, w http.ResponseWriter, r *http.Request) (int, error) {
	key, ok := console.ParseProviderPath(r.URL.Path)
	if !ok {
		return http.StatusNotFound, fmt.Errorf("no such path %s", r.URL.Path)
	}
	if code, err := s.authenticate(ctx, r); err != nil {
		return code, err
	}
	if !console.IsUpgrade(r) {
		return http.StatusBadRequest, fmt.Errorf("a console is an HTTP upgrade to %q", console.UpgradeProtocol)
	}
	var m infrav1.LibvirtMachine
	if err := s.Reader.Get(ctx, key, &m); err != nil {
		return http.StatusNotFound, fmt.Errorf("LibvirtMachine %s: %w", key, client.IgnoreNotFound(err))
	}
	if m.ProviderKey() != s.Provider {
		return http.StatusForbidden, fmt.Errorf("LibvirtMachine %s belongs to Provider %s, not %s", key, m.ProviderKey(), s.Provider)
	}
	if want := m.Namespace + "-" + m.Name; m.Spec.DomainName != want {
		return http.StatusForbidden, fmt.Errorf("LibvirtMachine %s: invalid spec.domainName %q (a machine's domain is %q)", key, m.Spec.DomainName, want)
	}
	var p banlieuev1.Provider
	if err := s.Reader.Get(ctx, s.Provider, &p); err != nil {
		return http.StatusServiceUnavailable, fmt.Errorf("reading Provider %s: %w", s.Provider, err)
	}
	c, err := s.Connections.Connect(ctx, s.Reader, &p)
	if err != nil {
		return http.StatusServiceUnavailable, fmt.Errorf("connecting to the host of Provider %s: %w", s.Provider, err)
	}
	def, dom, err := ownDomain(ctx, c, &m)
	if err != nil {
		return http.StatusConflict, err
	}
	if def == nil {
		return http.StatusNotFound, fmt.Errorf("LibvirtMachine %s has no domain %s on the host yet", key, m.Spec.DomainName)
	}
	var flags libvirt.ConsoleFlags
	if r.URL.Query().Get(console.ForceParam) == "true" {
		flags |= libvirt.ConsoleForce
	}
	con, err := c.OpenConsole(ctx, dom, "", flags)
	if err != nil {
		return consoleErrorCode(err), fmt.Errorf("opening the console of domain %s: %w", m.Spec.DomainName, err)
	}
	conn, rw, err := console.Hijack(w)
	if err != nil {
		_ = con.Close()
		return http.StatusInternalServerError, err
	}
	log.FromContext(ctx).Info("console opened", "machine", key, "domain", m.Spec.DomainName)
	console.Splice(context.WithoutCancel(ctx), conn, rw.Reader, con, con)
	log.FromContext(ctx).Info("console closed", "machine", key)
	return 0, nil
}

// authenticate accepts only the relay's token for this Provider's audience: a token issued for
// another Provider's console, or for the API server, is refused.
func (s *ConsoleServer) authenticate(ctx context.Context, r *http.Request) (int, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return http.StatusUnauthorized, errors.New("no bearer token")
	}
	audience := console.Audience(s.Provider)
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}
	if err := s.Client.Create(ctx, tr); err != nil {
		return http.StatusServiceUnavailable, fmt.Errorf("reviewing the token: %w", err)
	}
	if !tr.Status.Authenticated || !slices.Contains(tr.Status.Audiences, audience) {
		return http.StatusUnauthorized, fmt.Errorf("the token is not valid for audience %s", audience)
	}
	if tr.Status.User.Username != s.Relay {
		return http.StatusForbidden, fmt.Errorf("%s is not the console relay", tr.Status.User.Username)
	}
	return 0, nil
}

// consoleErrorCode maps libvirtd's refusal: a console someone else holds is a conflict the user
// can resolve (force), a stopped domain has no console.
func consoleErrorCode(err error) int {
	var le *libvirt.Error
	if errors.As(err, &le) {
		if le.Code == libvirt.ErrOperationInvalid || le.Code == libvirt.ErrOperationFailed {
			return http.StatusConflict
		}
	}
	return http.StatusBadGateway
}
