package image

import (
	"context"
	"errors"
	"fmt"
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
	importSA          = "banlieue-import"
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
	s.env.CreateLabNamespace(ctx, t, s.lab, providerNamespace, "lab-creds", "lab-ca")
	s.env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: buildNamespace}})
	return s
}

// createProvider creates a libvirt Provider for the lab whose storage class i maps to pools[i].
func (s *labSuite) createProvider(ctx context.Context, t *testing.T, name string, pools ...string) *banlieuev1.Provider {
	t.Helper()
	var classes []banlieuev1.StorageClassMapping
	for i, pool := range pools {
		classes = append(classes, banlieuev1.StorageClassMapping{Name: fmt.Sprintf("sc-%d", i), Target: map[string]string{"pool": pool}})
	}
	p := s.lab.Provider(providerNamespace, name, "lab-creds", "lab-ca", banlieuev1.ProviderCapabilities{StorageClasses: classes})
	s.env.Create(ctx, t, p)
	return p
}

// createPool starts a transient dir pool with a unique name on the lab host; it and its
// volumes are removed when the test ends.
func (s *labSuite) createPool(ctx context.Context, t *testing.T, prefix string) libvirt.StoragePool {
	t.Helper()
	return s.createPoolNamed(ctx, t, prefix+"-"+testenv.RunID())
}

// createPoolNamed is createPool with the exact name.
func (s *labSuite) createPoolNamed(ctx context.Context, t *testing.T, name string) libvirt.StoragePool {
	t.Helper()
	return labhost.CreatePool(ctx, t, s.host, s.lab, name)
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
