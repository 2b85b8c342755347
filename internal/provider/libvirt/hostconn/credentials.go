// Package hostconn turns a Provider into a live libvirt connection: it reads the Provider's
// credentials Secret and CA by name and keeps one pooled, multiplexed connection per Provider for
// every controller and command of the process.
package hostconn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/pkg/libvirt"
)

// Keys of the Provider's credentials Secret.
const (
	certKey = "tls.crt"
	keyKey  = "tls.key"
)

// Credentials are a Provider's TLS material and the versions of the objects it came from; the
// connection set redials when the version changes, so a rotated certificate is used on the next reconcile.
type Credentials struct {
	TLS     libvirt.Credentials
	Version string
}

// CredentialsError is a Provider whose Secret or CA cannot be used (CredentialsUnavailable).
type CredentialsError struct{ msg string }

func (e *CredentialsError) Error() string { return e.msg }

func missingField(format string, args ...any) error {
	return &CredentialsError{msg: "missing required field: " + fmt.Sprintf(format, args...)}
}

func invalidField(what, format string, args ...any) error {
	return &CredentialsError{msg: "invalid " + what + ": " + fmt.Sprintf(format, args...)}
}

// ResolveCredentials reads the Secret and CA with direct GETs by name (the provider's Role
// grants get on those names only, no list or watch) and parses them.
func ResolveCredentials(ctx context.Context, r client.Reader, p *banlieuev1.Provider) (Credentials, error) {
	m, err := readMaterial(ctx, r, p)
	if err != nil {
		return Credentials{}, err
	}
	return m.parse()
}

// material is a Provider's TLS material as read, not yet parsed, and the versions of the objects
// it came from.
type material struct {
	ca, cert, key []byte
	version       string
}

// readMaterial GETs the Provider's Secret and CA by name and checks their fields.
func readMaterial(ctx context.Context, r client.Reader, p *banlieuev1.Provider) (material, error) {
	ns := p.Namespace
	conn := p.Spec.Connection
	var secret corev1.Secret
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: conn.CredentialsRef.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return material{}, missingField("Provider.spec.connection.credentialsRef (Secret %q not found in namespace %q)",
				conn.CredentialsRef.Name, ns)
		}
		return material{}, err
	}
	for _, k := range []string{certKey, keyKey} {
		if len(secret.Data[k]) == 0 {
			return material{}, missingField("secret.data.%s (Secret %q)", k, secret.Name)
		}
	}
	ca, caVersion, err := resolveCABundle(ctx, r, ns, conn.CABundle)
	if err != nil {
		return material{}, err
	}
	return material{ca: ca, cert: secret.Data[certKey], key: secret.Data[keyKey], version: secret.ResourceVersion + "/" + caVersion}, nil
}

// parse turns the material into credentials: the key and certificates are parsed here.
func (m material) parse() (Credentials, error) {
	creds, err := libvirt.NewCredentials(m.ca, m.cert, m.key)
	if err != nil {
		return Credentials{}, &CredentialsError{msg: err.Error()}
	}
	return Credentials{TLS: creds, Version: m.version}, nil
}

// resolveCABundle returns the CA PEM and a version that changes when it does. A CA is required:
// every realistic libvirt deployment uses a private CA, so public roots would only fail later.
func resolveCABundle(ctx context.Context, r client.Reader, ns string, src *banlieuev1.CABundleSource) ([]byte, string, error) {
	if src == nil {
		return nil, "", missingField("Provider.spec.connection.caBundle")
	}
	set := 0
	for _, present := range []bool{src.Inline != "", src.ConfigMapRef != nil, src.SecretRef != nil} {
		if present {
			set++
		}
	}
	if set != 1 {
		return nil, "", invalidField("Provider.spec.connection.caBundle", "set exactly one of inline, configMapRef and secretRef")
	}
	switch {
	case src.Inline != "":
		// The text itself versions an inline CA, so editing it redials.
		sum := sha256.Sum256([]byte(src.Inline))
		return []byte(src.Inline), "inline:" + hex.EncodeToString(sum[:8]), nil
	case src.ConfigMapRef != nil:
		key := keyOrDefault(src.ConfigMapRef.Key)
		var cm corev1.ConfigMap
		if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.ConfigMapRef.Name}, &cm); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, "", missingField("Provider.spec.connection.caBundle.configMapRef (ConfigMap %q not found in namespace %q)", src.ConfigMapRef.Name, ns)
			}
			return nil, "", err
		}
		if v, ok := cm.Data[key]; ok && v != "" {
			return []byte(v), "cm:" + cm.ResourceVersion, nil
		}
		if v := cm.BinaryData[key]; len(v) > 0 {
			return v, "cm:" + cm.ResourceVersion, nil
		}
		return nil, "", missingField("configmap.data.%s (ConfigMap %q)", key, cm.Name)
	default:
		key := keyOrDefault(src.SecretRef.Key)
		var s corev1.Secret
		if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.SecretRef.Name}, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, "", missingField("Provider.spec.connection.caBundle.secretRef (Secret %q not found in namespace %q)", src.SecretRef.Name, ns)
			}
			return nil, "", err
		}
		v := s.Data[key]
		if len(v) == 0 {
			return nil, "", missingField("secret.data.%s (Secret %q)", key, s.Name)
		}
		if !utf8.Valid(v) {
			return nil, "", invalidField("Provider.spec.connection.caBundle.secretRef", "secret.data.%s is not UTF-8 PEM", key)
		}
		return v, "secret:" + s.ResourceVersion, nil
	}
}

func keyOrDefault(key string) string {
	if key == "" {
		return banlieuev1.DefaultCAKey
	}
	return key
}
