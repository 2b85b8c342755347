package hostconn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// objectReader serves Secrets and ConfigMaps from memory and counts the GETs: the cache's logic
// is what is under test, not the API server.
type objectReader struct {
	objs map[client.ObjectKey]client.Object
	gets int
}

func (r *objectReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets++
	src, ok := r.objs[key]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	switch o := obj.(type) {
	case *corev1.Secret:
		s, ok := src.(*corev1.Secret)
		if !ok {
			return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
		}
		s.DeepCopyInto(o)
	case *corev1.ConfigMap:
		c, ok := src.(*corev1.ConfigMap)
		if !ok {
			return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
		}
		c.DeepCopyInto(o)
	default:
		return errors.New("unexpected kind")
	}
	return nil
}

func (r *objectReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the provider never lists Secrets or ConfigMaps")
}

func testPEM(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cache-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// TestCredentialCache: a Provider's Secret and CA are read at most once per TTL, parsed only
// when a resourceVersion changed, and read again at once when the connection spec changes, after
// Forget, and after a failure (never cached).
func TestCredentialCache(t *testing.T) {
	certPEM, keyPEM := testPEM(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds", ResourceVersion: "10"},
		Data: map[string][]byte{certKey: certPEM, keyKey: keyPEM}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ca", ResourceVersion: "20"},
		Data: map[string]string{banlieuev1.DefaultCAKey: string(certPEM)}}
	r := &objectReader{objs: map[client.ObjectKey]client.Object{{Namespace: "ns", Name: "creds"}: secret, {Namespace: "ns", Name: "ca"}: cm}}
	p := &banlieuev1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lab"},
		Spec: banlieuev1.ProviderSpec{Connection: banlieuev1.ProviderConnection{Endpoint: "qemu+tls://host.example/system",
			CredentialsRef: banlieuev1.LocalObjectReference{Name: "creds"},
			CABundle:       &banlieuev1.CABundleSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "ca"}}}}}

	now := time.Unix(1000, 0)
	c := newCredentialCache()
	c.now = func() time.Time { return now }
	parses := 0
	c.parse = func(m material) (Credentials, error) { parses++; return m.parse() }
	ctx := context.Background()
	step := func(name string, wantGets, wantParses int, wantVersion string) {
		t.Helper()
		gets0, parses0 := r.gets, parses
		got, err := c.resolve(ctx, r, p, false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.gets-gets0 != wantGets || parses-parses0 != wantParses || got.Credentials.Version != wantVersion {
			t.Errorf("%s: %d GETs, %d parses, version %q; want %d, %d, %q", name, r.gets-gets0, parses-parses0,
				got.Credentials.Version, wantGets, wantParses, wantVersion)
		}
	}

	step("first pass reads the Secret and the CA and parses them", 2, 1, "10/cm:20")
	step("a pass within the TTL reads nothing", 0, 0, "10/cm:20")
	now = now.Add(CredentialsTTL - time.Second)
	step("still within the TTL", 0, 0, "10/cm:20")
	now = now.Add(2 * time.Second)
	step("past the TTL, same versions: read again, not parsed", 2, 0, "10/cm:20")

	gets0, parses0 := r.gets, parses
	if _, err := c.resolve(ctx, r, p, true); err != nil || r.gets-gets0 != 2 || parses != parses0 {
		t.Errorf("the Provider's probe reads whatever the age: %v, %d GETs, %d parses; want 2, 0", err, r.gets-gets0, parses-parses0)
	}
	step("the probe's read restarts the TTL", 0, 0, "10/cm:20")

	secret.ResourceVersion = "11" // rotated
	now = now.Add(CredentialsTTL)
	step("past the TTL, a rotated Secret: parsed", 2, 1, "11/cm:20")

	cm.ResourceVersion = "21"
	p.Spec.Connection.CABundle.ConfigMapRef.Key = banlieuev1.DefaultCAKey // the spec changed: no TTL
	step("a connection spec change is read at once", 2, 1, "11/cm:21")

	c.forget(client.ObjectKeyFromObject(p))
	step("after Forget (a failed dial) it is read again; versions unchanged, so parsed anew as the entry is gone", 2, 1, "11/cm:21")

	// A failure is reported, and not cached: the next pass reads again.
	delete(r.objs, client.ObjectKey{Namespace: "ns", Name: "creds"})
	now = now.Add(CredentialsTTL)
	var credErr *CredentialsError
	if _, err := c.resolve(ctx, r, p, false); !errors.As(err, &credErr) {
		t.Fatalf("missing Secret: %v, want a CredentialsError", err)
	}
	gets0 = r.gets
	if _, err := c.resolve(ctx, r, p, false); !errors.As(err, &credErr) || r.gets == gets0 {
		t.Errorf("a failure must not be cached: %v after %d GETs", err, r.gets-gets0)
	}

	// Another Provider has its own entry.
	r.objs[client.ObjectKey{Namespace: "ns", Name: "creds"}] = secret
	other := p.DeepCopy()
	other.Name = "other"
	step("restored", 2, 1, "11/cm:21")
	gets0 = r.gets
	if _, err := c.resolve(ctx, r, other, false); err != nil || r.gets-gets0 != 2 {
		t.Errorf("another Provider: %v, %d GETs; want its own read", err, r.gets-gets0)
	}
}
