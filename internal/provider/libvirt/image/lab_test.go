package image

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
	"banlieue.io/banlieue/pkg/libvirt"
)

const (
	providerNamespace = "banlieue-system"
	buildNamespace    = "banlieue-imagebuild"
)

// labSuite is a real API server holding a Provider's credentials and the lab libvirtd.
type labSuite struct {
	env  *testenv.Env
	lab  testenv.LibvirtLab
	host *libvirt.Client
}

func newLabSuite(t *testing.T) *labSuite {
	t.Helper()
	s := &labSuite{lab: testenv.RequireLibvirtLab(t)}
	s.env = testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.host = labhost.Dial(t, s.lab)
	for _, ns := range []string{providerNamespace, buildNamespace} {
		if err := s.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "lab-creds", Namespace: providerNamespace},
		Data:       map[string][]byte{"tls.crt": s.lab.Read(t, "clientcert.pem"), "tls.key": s.lab.Read(t, "clientkey.pem")},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "lab-ca", Namespace: providerNamespace},
		Data:       map[string]string{"ca.crt": string(s.lab.Read(t, "cacert.pem"))},
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// createProvider creates a libvirt Provider for the lab whose storage class i maps to pools[i].
func (s *labSuite) createProvider(ctx context.Context, t *testing.T, name string, pools ...string) *banlieuev1.Provider {
	t.Helper()
	var classes []banlieuev1.StorageClassMapping
	for i, pool := range pools {
		classes = append(classes, banlieuev1.StorageClassMapping{Name: fmt.Sprintf("sc-%d", i), Target: map[string]string{"pool": pool}})
	}
	p := &banlieuev1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: providerNamespace},
		Spec: banlieuev1.ProviderSpec{
			ProviderClassRef: banlieuev1.LocalObjectReference{Name: "libvirt"},
			Connection: banlieuev1.ProviderConnection{
				Endpoint:       s.lab.Endpoint,
				CredentialsRef: banlieuev1.LocalObjectReference{Name: "lab-creds"},
				CABundle:       &banlieuev1.CABundleSource{ConfigMapRef: &banlieuev1.KeySelector{Name: "lab-ca"}},
			},
			Capabilities: banlieuev1.ProviderCapabilities{StorageClasses: classes},
		},
	}
	if err := s.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// createPool starts a transient dir pool with a unique name on the lab host; it and its
// volumes are removed when the test ends.
func (s *labSuite) createPool(ctx context.Context, t *testing.T, prefix string) libvirt.StoragePool {
	t.Helper()
	return s.createPoolNamed(ctx, t, prefix+"-"+randomHex(3))
}

// createPoolNamed is createPool with the exact name.
func (s *labSuite) createPoolNamed(ctx context.Context, t *testing.T, name string) libvirt.StoragePool {
	t.Helper()
	dir := filepath.Join(s.lab.Dir, "pools", name)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	var def strings.Builder
	def.WriteString("<pool type='dir'><name>")
	_ = xml.EscapeText(&def, []byte(name))
	def.WriteString("</name><target><path>")
	_ = xml.EscapeText(&def, []byte(dir))
	def.WriteString("</path></target></pool>")
	pool, err := s.host.StoragePoolCreateXML(ctx, def.String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if vols, err := s.host.StoragePoolListAllVolumes(ctx, pool); err == nil {
			for _, v := range vols {
				_ = s.host.StorageVolDelete(ctx, v)
			}
		}
		_ = s.host.StoragePoolDestroy(ctx, pool)
		_ = os.RemoveAll(dir)
	})
	return pool
}

// volumes returns the names and handles of the pool's volumes.
func (s *labSuite) volumes(ctx context.Context, t *testing.T, pool libvirt.StoragePool) map[string]libvirt.StorageVol {
	t.Helper()
	// libvirtd refuses a refresh while an upload into the pool runs; volumes created through
	// the API are listed without one.
	var remote *libvirt.Error
	if err := s.host.StoragePoolRefresh(ctx, pool); err != nil && !errors.As(err, &remote) {
		t.Fatal(err)
	}
	vols, err := s.host.StoragePoolListAllVolumes(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]libvirt.StorageVol{}
	for _, v := range vols {
		out[v.Name] = v
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
