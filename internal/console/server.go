package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// openTimeout bounds everything before the console's bytes flow: the reviews, the reads and the
// relay's dial, answered by the provider once libvirtd opened the console.
const openTimeout = 30 * time.Second

// Server is the aggregated API server's handler: discovery, and the console subresource.
type Server struct {
	// Reader reads the front-proxy ConfigMap, the VM, its LibvirtMachine and Provider, uncached:
	// a console is opened rarely and must act on the current objects.
	Reader client.Reader
	// Client creates the SubjectAccessReviews.
	Client client.Client
	// Relay reaches the providers.
	Relay *Relay
}

// ServeHTTP routes one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if serveDiscovery(w, r) {
		return
	}
	vm, ok := parsePath(r.URL.Path)
	if !ok {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("no such path %s", r.URL.Path))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), openTimeout)
	defer cancel()
	code, reason, err := s.open(ctx, w, r, vm)
	if err != nil {
		log.FromContext(ctx).Info("console refused", "virtualMachine", vm, "code", code, "reason", err.Error())
		writeStatus(w, code, reason, err.Error())
	}
}

// open authenticates and authorises the request, then relays it; on success the response has
// been taken over and the console has run to its end.
func (s *Server) open(ctx context.Context, w http.ResponseWriter, r *http.Request, vm types.NamespacedName) (int, metav1.StatusReason, error) {
	fp, err := loadFrontProxy(ctx, s.Reader)
	if err != nil {
		return http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, err
	}
	user, err := fp.authenticate(r)
	if err != nil {
		return http.StatusUnauthorized, metav1.StatusReasonUnauthorized, err
	}
	if allowed, why, err := s.authorize(ctx, user, vm); err != nil {
		return http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Errorf("reviewing %s's access: %w", user.Name, err)
	} else if !allowed {
		msg := fmt.Sprintf("virtualmachines.%s %q is forbidden: User %q cannot get resource \"virtualmachines/console\" in API group %q in the namespace %q",
			Group, vm.Name, user.Name, Group, vm.Namespace)
		if why != "" {
			msg += ": " + why
		}
		return http.StatusForbidden, metav1.StatusReasonForbidden, errors.New(msg)
	}
	if !IsUpgrade(r) {
		return http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Errorf("a console is an HTTP upgrade to %q (banlieue console, kubectl banlieue console)", UpgradeProtocol)
	}
	machine, provider, err := s.target(ctx, vm)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return http.StatusNotFound, metav1.StatusReasonNotFound, err
		}
		return http.StatusConflict, metav1.StatusReasonConflict, err
	}
	up, err := s.Relay.Dial(ctx, provider, machine, r.URL.Query().Get(ForceParam) == "true")
	if err != nil {
		var pe *ProviderError
		if errors.As(err, &pe) {
			return pe.Code, metav1.StatusReasonServiceUnavailable, err
		}
		return http.StatusBadGateway, metav1.StatusReasonServiceUnavailable, err
	}
	conn, rw, err := Hijack(w)
	if err != nil {
		up.Close()
		return http.StatusInternalServerError, metav1.StatusReasonInternalError, err
	}
	log.FromContext(ctx).Info("console opened", "virtualMachine", vm, "user", user.Name, "machine", machine.Name)
	// The console outlives the open deadline: it ends when either side hangs up.
	Splice(context.WithoutCancel(ctx), conn, rw.Reader, up, up.Reader)
	log.FromContext(ctx).Info("console closed", "virtualMachine", vm, "user", user.Name)
	return 0, "", nil
}

// authorize asks the API server whether user may get vm's console: the same attributes the
// kube-apiserver authorised before it forwarded the request, checked again here so that the
// relay never opens a console on the word of a request it did not see authorised.
func (s *Server) authorize(ctx context.Context, user User, vm types.NamespacedName) (bool, string, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = v
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Name, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: vm.Namespace, Verb: "get", Group: Group, Resource: Resource, Subresource: Subresource, Name: vm.Name,
		},
	}}
	if err := s.Client.Create(ctx, sar); err != nil {
		return false, "", err
	}
	return sar.Status.Allowed, sar.Status.Reason, nil
}

// target finds the VM's LibvirtMachine and its Provider.
func (s *Server) target(ctx context.Context, key types.NamespacedName) (*infrav1.LibvirtMachine, *banlieuev1.Provider, error) {
	var vm banlieuev1.VirtualMachine
	if err := s.Reader.Get(ctx, key, &vm); err != nil {
		return nil, nil, err
	}
	ref := vm.Status.InfrastructureRef
	if ref == nil {
		return nil, nil, fmt.Errorf("VirtualMachine %s has no machine yet (status.infrastructureRef is empty)", key)
	}
	if ref.Kind != "LibvirtMachine" || ref.APIGroup != infrav1.GroupVersion.Group || ref.Namespace != vm.Namespace {
		return nil, nil, fmt.Errorf("VirtualMachine %s: status.infrastructureRef names %s %s/%s, which has no console", key, ref.Kind, ref.Namespace, ref.Name)
	}
	var m infrav1.LibvirtMachine
	if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &m); err != nil {
		return nil, nil, err
	}
	var p banlieuev1.Provider
	if err := s.Reader.Get(ctx, m.ProviderKey(), &p); err != nil {
		return nil, nil, fmt.Errorf("LibvirtMachine %s/%s: its Provider: %w", m.Namespace, m.Name, err)
	}
	return &m, &p, nil
}

// writeStatus answers with a metav1.Status, which kubectl and client-go print as the reason.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	})
}
