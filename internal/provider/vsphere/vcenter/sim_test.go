package vcenter

import (
	"context"
	"crypto/tls"
	"net/url"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	_ "github.com/vmware/govmomi/vapi/simulator" // the tagging endpoints
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"banlieue.io/banlieue/internal/provider/vsphere/vcsimtest"
)

const (
	simUser     = "banlieue@vsphere.local"
	simPassword = "s3cret-Pa55"
)

// sim is an in-process vcsim serving TLS with a certificate from a CA of the test's own.
type sim struct {
	model *simulator.Model
	srv   *simulator.Server
	ep    Endpoint
	admin *Session // out-of-band changes, as a person in the vSphere Client would make them
}

func startSim(t *testing.T, m *simulator.Model) *sim {
	t.Helper()
	if err := m.Create(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Remove)
	caPEM, cert := vcsimtest.ServingCA(t)
	m.Service.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	m.Service.Listen = &url.URL{Host: "127.0.0.1:0", User: url.UserPassword(simUser, simPassword)}
	m.Service.RegisterEndpoints = true
	srv := m.Service.NewServer()
	t.Cleanup(srv.Close)
	s := &sim{model: m, srv: srv, ep: Endpoint{
		URL: "https://" + srv.URL.Host + "/sdk", Username: simUser, Password: simPassword, CAPEM: caPEM,
	}}
	s.admin = s.dial(t)
	return s
}

func (s *sim) dial(t *testing.T, opt ...Option) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := Dial(ctx, s.ep, opt...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	return sess
}

// ref looks an object up by absolute inventory path, as the admin.
func (s *sim) ref(t *testing.T, path string) types.ManagedObjectReference {
	t.Helper()
	ref, err := object.NewSearchIndex(s.admin.vc).FindByInventoryPath(context.Background(), path)
	if err != nil || ref == nil {
		t.Fatalf("find %s: %v", path, err)
	}
	return ref.Reference()
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// timed logs how long the test took, for the report.
func timed(t *testing.T) {
	t.Helper()
	start := time.Now()
	t.Cleanup(func() { t.Logf("took %s", time.Since(start).Round(time.Millisecond)) })
}

// waitTasks waits for every task of this kind (e.g. "VirtualMachine.cloneVm") to end, so that a
// test may change simulator.TaskDelay afterwards: the waits order the task's read of it before
// the test's write.
func (s *sim) waitTasks(t *testing.T, descriptionID string) {
	t.Helper()
	ctx := ctxT(t)
	var tm mo.TaskManager
	if err := s.admin.read(ctx, *s.admin.vc.ServiceContent.TaskManager, []string{"recentTask"}, &tm); err != nil {
		t.Fatal(err)
	}
	for _, ref := range tm.RecentTask {
		var task mo.Task
		if err := s.admin.read(ctx, ref, []string{"info"}, &task); err != nil || task.Info.DescriptionId != descriptionID {
			continue
		}
		_ = object.NewTask(s.admin.vc, ref).Wait(ctx) // its outcome is the test's business
	}
}

// setTaskDelay sets vcsim's global task delays for this test; wait names the tasks to wait for
// before they are cleared.
func setTaskDelay(t *testing.T, s *sim, delays map[string]int, wait ...string) {
	t.Helper()
	simulator.TaskDelay.MethodDelay = delays
	t.Cleanup(func() {
		for _, w := range wait {
			s.waitTasks(t, w)
		}
		simulator.TaskDelay.MethodDelay = nil
	})
}
