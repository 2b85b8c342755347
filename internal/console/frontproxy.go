package console

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AuthenticationConfigMap is where the kube-apiserver publishes how it authenticates to
// aggregated servers (its --requestheader-* flags), for them to verify it.
var AuthenticationConfigMap = types.NamespacedName{Namespace: "kube-system", Name: "extension-apiserver-authentication"}

// User is who the kube-apiserver says sent a request.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// frontProxy is the kube-apiserver's request-header configuration.
type frontProxy struct {
	roots        *x509.CertPool
	allowedNames []string
	userHeaders  []string
	groupHeaders []string
	extraPrefix  []string
	uidHeaders   []string
}

// loadFrontProxy reads the configuration the kube-apiserver published. It is read for every
// console request, so a rotated front-proxy CA is honoured at once; a console is opened rarely.
func loadFrontProxy(ctx context.Context, r client.Reader) (*frontProxy, error) {
	var cm corev1.ConfigMap
	if err := r.Get(ctx, AuthenticationConfigMap, &cm); err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s: %w", AuthenticationConfigMap, err)
	}
	ca := cm.Data["requestheader-client-ca-file"]
	if ca == "" {
		return nil, fmt.Errorf("ConfigMap %s has no requestheader-client-ca-file: the kube-apiserver runs without --requestheader-client-ca-file", AuthenticationConfigMap)
	}
	fp := &frontProxy{roots: x509.NewCertPool()}
	if !fp.roots.AppendCertsFromPEM([]byte(ca)) {
		return nil, fmt.Errorf("ConfigMap %s: requestheader-client-ca-file holds no PEM certificate", AuthenticationConfigMap)
	}
	for key, dst := range map[string]*[]string{
		"requestheader-allowed-names":        &fp.allowedNames,
		"requestheader-username-headers":     &fp.userHeaders,
		"requestheader-group-headers":        &fp.groupHeaders,
		"requestheader-extra-headers-prefix": &fp.extraPrefix,
		"requestheader-uid-headers":          &fp.uidHeaders,
	} {
		if v := cm.Data[key]; v != "" {
			if err := json.Unmarshal([]byte(v), dst); err != nil {
				return nil, fmt.Errorf("ConfigMap %s: %s: %w", AuthenticationConfigMap, key, err)
			}
		}
	}
	if len(fp.userHeaders) == 0 {
		return nil, fmt.Errorf("ConfigMap %s names no requestheader-username-headers", AuthenticationConfigMap)
	}
	return fp, nil
}

// errNotFrontProxy is a request that did not come from the kube-apiserver's front proxy.
var errNotFrontProxy = errors.New("the request does not carry the kube-apiserver's front-proxy client certificate")

// authenticate returns the user the front proxy names in r's headers, once r's client
// certificate is verified as the front proxy's. Without that proof the headers are anyone's
// words, so they are never read.
func (fp *frontProxy) authenticate(r *http.Request) (User, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return User{}, errNotFrontProxy
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: fp.roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return User{}, fmt.Errorf("%w: %v", errNotFrontProxy, err)
	}
	if len(fp.allowedNames) > 0 && !slices.Contains(fp.allowedNames, leaf.Subject.CommonName) {
		return User{}, fmt.Errorf("%w: common name %q is not among requestheader-allowed-names", errNotFrontProxy, leaf.Subject.CommonName)
	}
	u := User{Name: firstValue(r.Header, fp.userHeaders), UID: firstValue(r.Header, fp.uidHeaders)}
	if u.Name == "" {
		return User{}, errors.New("the front proxy named no user")
	}
	for _, h := range fp.groupHeaders {
		u.Groups = append(u.Groups, r.Header.Values(h)...)
	}
	for _, prefix := range fp.extraPrefix {
		for key, vals := range r.Header {
			if len(key) <= len(prefix) || !strings.EqualFold(key[:len(prefix)], prefix) {
				continue
			}
			// Extra keys travel percent-encoded (the requestheader convention).
			k, err := url.PathUnescape(key[len(prefix):])
			if err != nil {
				k = key[len(prefix):]
			}
			if u.Extra == nil {
				u.Extra = map[string][]string{}
			}
			k = strings.ToLower(k)
			u.Extra[k] = append(u.Extra[k], vals...)
		}
	}
	return u, nil
}

func firstValue(h http.Header, keys []string) string {
	for _, k := range keys {
		if v := h.Get(k); v != "" {
			return v
		}
	}
	return ""
}
