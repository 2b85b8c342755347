package vsphere

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// providerEndpoint reads p's credentials Secret and CA by name (the per-Provider Role grants get
// on those names only; r must be uncached) and returns the endpoint and a version that changes
// when any of them does. A Secret or CA that is missing or unusable is a Refusal for the
// Provider's Ready condition (CredentialsUnavailable, ConnectFailed); any other error is the API
// server's and is retried.
func providerEndpoint(ctx context.Context, r client.Reader, p *banlieuev1.Provider) (Endpoint, string, *Refusal, error) {
	refuse := func(format string, args ...any) (Endpoint, string, *Refusal, error) {
		return Endpoint{}, "", &Refusal{Reason: banlieuev1.ReasonCredentialsUnavailable, Message: fmt.Sprintf(format, args...)}, nil
	}
	c := &p.Spec.Connection
	var s corev1.Secret
	if err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: c.CredentialsRef.Name}, &s); apierrors.IsNotFound(err) {
		return refuse("missing required field: Provider.spec.connection.credentialsRef (Secret %q not found in namespace %q)", c.CredentialsRef.Name, p.Namespace)
	} else if err != nil {
		return Endpoint{}, "", nil, fmt.Errorf("reading the credentials Secret %s/%s: %w", p.Namespace, c.CredentialsRef.Name, err)
	}
	var ca []byte
	version := "secret:" + s.ResourceVersion
	switch src := c.CABundle; {
	case src == nil:
		return refuse("missing required field: Provider.spec.connection.caBundle")
	case src.Inline != "":
		sum := sha256.Sum256([]byte(src.Inline))
		ca, version = []byte(src.Inline), version+"/inline:"+hex.EncodeToString(sum[:8])
	case src.ConfigMapRef != nil:
		key := cmp.Or(src.ConfigMapRef.Key, banlieuev1.DefaultCAKey)
		var cm corev1.ConfigMap
		if err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: src.ConfigMapRef.Name}, &cm); apierrors.IsNotFound(err) {
			return refuse("missing required field: Provider.spec.connection.caBundle.configMapRef (ConfigMap %q not found in namespace %q)", src.ConfigMapRef.Name, p.Namespace)
		} else if err != nil {
			return Endpoint{}, "", nil, fmt.Errorf("reading the CA ConfigMap %s/%s: %w", p.Namespace, src.ConfigMapRef.Name, err)
		}
		ca, version = []byte(cm.Data[key]), version+"/cm:"+cm.ResourceVersion
		if len(ca) == 0 {
			ca = cm.BinaryData[key]
		}
	case src.SecretRef != nil:
		key := cmp.Or(src.SecretRef.Key, banlieuev1.DefaultCAKey)
		var cs corev1.Secret
		if err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: src.SecretRef.Name}, &cs); apierrors.IsNotFound(err) {
			return refuse("missing required field: Provider.spec.connection.caBundle.secretRef (Secret %q not found in namespace %q)", src.SecretRef.Name, p.Namespace)
		} else if err != nil {
			return Endpoint{}, "", nil, fmt.Errorf("reading the CA Secret %s/%s: %w", p.Namespace, src.SecretRef.Name, err)
		}
		ca, version = cs.Data[key], version+"/casecret:"+cs.ResourceVersion
	}
	e, refusal := endpointFor(p, s.Data, ca)
	if refusal != nil {
		return Endpoint{}, "", refusal, nil
	}
	return e, version + "/" + e.URL, nil, nil
}
