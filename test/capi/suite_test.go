//go:build capi

// Package capi runs Cluster API's own core manager, built from the Go module proxy by
// hack/capi-assets.sh, as a separate process against envtest: Cluster API's CRDs installed, its
// admission webhooks registered and served by that manager (with a serving certificate envtest
// generates), and its installed RBAC — the manager acts as capi-system:capi-manager, so what it
// may do to banlieue's objects is what banlieue's aggregated ClusterRole grants, nothing more.
//
// Build-tagged so `go test ./...` leaves it out (the manager's build costs minutes cold):
//
//	hack/capi-test.sh            # as CI runs it
//	go test -tags capi -count=1 -v ./test/capi/
//
// Without the envtest binaries, the manager's build or (for the cases on the host) the lab, a
// test is skipped; with CI set, a missing prerequisite fails instead.
package capi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"banlieue.io/banlieue/internal/testenv"
)

// capiNamespace and capiAccount are where clusterctl init installs the core manager (its
// kustomization: namespace capi-system, name prefix capi-).
const (
	capiNamespace = "capi-system"
	capiAccount   = "capi-manager"
)

// capiFeatureGates are the defaults of the manager's Deployment (core/config/manager/manager.yaml),
// as `clusterctl init` installs it without variables.
const capiFeatureGates = "MachinePool=true,ClusterTopology=false,RuntimeSDK=false,MachineSetPreflightChecks=true," +
	"MachineWaitForVolumeDetachConsiderVolumeAttachments=true,PriorityQueue=true,ReconcilerRateLimiting=true," +
	"InPlaceUpdates=false,MachineTaintPropagation=false"

// suite is one API server with Cluster API's CRDs, webhooks and RBAC, the kube-controller-manager
// controllers a cluster's RBAC and ownership rest on, and Cluster API's manager running.
type suite struct {
	env     *testenv.Env
	assets  string // hack/capi-assets.sh's directory: manager, crd/, webhook/, rbac/
	manager *testenv.Process
}

// assets runs a hack/ script that builds (or finds cached) binaries and prints their directory
// last.
func assets(t *testing.T, script string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", script)).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s", err, ee.Stderr)
		}
		testenv.MissingPrerequisite(t, "hack/"+script+": "+err.Error())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// newSuite starts the API server and Cluster API's manager, and returns once the manager serves
// its webhooks (its readiness check) and so admits Cluster API objects.
func newSuite(t *testing.T) (context.Context, *suite) {
	t.Helper()
	capi := assets(t, "capi-assets.sh")
	node := assets(t, "node-assets.sh")
	env := testenv.StartWith(t, testenv.Options{
		// The CRDs as the module ships them: no conversion webhook (the kustomize patches that
		// add one are not applied), so v1beta1 is served unconverted. Every client here, the
		// manager included, reads and writes v1beta2 only, the contract banlieue implements.
		CRDDirs:      []string{filepath.Join(capi, "crd")},
		WebhookPaths: []string{filepath.Join(capi, "webhook", "manifests.yaml")},
	})
	testenv.SetLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &suite{env: env, assets: capi}
	startControllerManager(t, env, filepath.Join(node, "kube-controller-manager"))
	s.installRBAC(ctx, t)
	s.startManager(t)
	return ctx, s
}

// startControllerManager runs the real kube-controller-manager (built by hack/node-assets.sh) with
// the two controllers envtest lacks and this suite relies on: clusterrole-aggregation, which
// fills Cluster API's aggregated ClusterRole from the roles labelled aggregate-to-manager
// (banlieue's among them), and the garbage collector, which removes what an owner reference ties
// to a deleted object, as in any cluster.
func startControllerManager(t *testing.T, env *testenv.Env, bin string) {
	t.Helper()
	cmd := exec.Command(bin, "--kubeconfig", env.Kubeconfig(t), "--leader-elect=false", "--secure-port=0",
		"--controllers", "clusterrole-aggregation-controller,garbage-collector-controller")
	p := testenv.StartProcess(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-controller-manager output (last 20 lines):\n%s", tail(p.Output(), 20))
		}
	})
}

// installRBAC installs the manager's ClusterRoles and binding as Cluster API's kustomization
// renders them (core/config/default: namePrefix capi-, manager_role_aggregation_patch.yaml):
// manager-role carries the aggregate-to-manager label and the account is bound to the
// aggregated role, which also picks up every provider's role with that label.
func (s *suite) installRBAC(ctx context.Context, t *testing.T) {
	t.Helper()
	var role, aggregated rbacv1.ClusterRole
	s.decode(t, filepath.Join("rbac", "role.yaml"), &role)
	s.decode(t, filepath.Join("rbac", "aggregated_role.yaml"), &aggregated)
	role.Name = "capi-" + role.Name
	role.Labels = map[string]string{"cluster.x-k8s.io/aggregate-to-manager": "true"}
	aggregated.Name = "capi-" + aggregated.Name
	s.env.Create(ctx, t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: capiNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: capiAccount, Namespace: capiNamespace}},
		&role, &aggregated,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "capi-manager-rolebinding"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: aggregated.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: capiAccount, Namespace: capiNamespace}},
		})
	// banlieue's part, as installed (config/rbac/capi-manager.yaml, in config/default and the
	// chart): the only rules the manager has on banlieue's kinds, once aggregated.
	var banlieue rbacv1.ClusterRole
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "capi-manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, &banlieue); err != nil {
		t.Fatalf("decoding config/rbac/capi-manager.yaml: %v", err)
	}
	s.env.Create(ctx, t, &banlieue)
	testenv.Eventually(t, 30*time.Second, "banlieue's rules aggregated into "+aggregated.Name, func() error {
		var got rbacv1.ClusterRole
		if err := s.env.Client.Get(ctx, client.ObjectKey{Name: aggregated.Name}, &got); err != nil {
			return err
		}
		for _, r := range got.Rules {
			if slices.Contains(r.APIGroups, "infrastructure.banlieue.io") {
				return nil
			}
		}
		return fmt.Errorf("%d rules, none on infrastructure.banlieue.io", len(got.Rules))
	})
}

// decode reads one YAML document of the assets (rel) into obj, refusing unknown fields: a file
// of another shape than this suite expects fails loudly.
func (s *suite) decode(t *testing.T, rel string, obj any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(s.assets, rel))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.TrimPrefix(strings.TrimSpace(string(raw)), "---\n")
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatalf("decoding %s: %v", rel, err)
	}
}

// startManager runs Cluster API's manager as its installed account, serving the webhooks where
// envtest registered them, and waits for its readiness check (the webhook server started).
func (s *suite) startManager(t *testing.T) {
	t.Helper()
	hooks := s.env.Webhooks()
	health := testenv.FreePort(t)
	kubeconfig := s.env.KubeconfigAs(t, testenv.ServiceAccountUser(capiNamespace, capiAccount))
	cmd := exec.Command(filepath.Join(s.assets, "manager"),
		"--kubeconfig", kubeconfig,
		"--leader-elect=false",
		"--feature-gates="+capiFeatureGates,
		"--webhook-port", strconv.Itoa(hooks.Port),
		"--webhook-cert-dir", hooks.CertDir,
		"--health-addr", "127.0.0.1:"+strconv.Itoa(health),
		// Its metrics, behind TokenReview and SubjectAccessReview as installed, on a port of its
		// own: suites run side by side.
		"--diagnostics-address", "127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)),
	)
	// The manager reads its namespace and pod name for events and the cluster cache's identity,
	// as the Deployment's downward API gives them.
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+capiNamespace, "POD_NAME=capi-manager-test", "POD_UID=capi-manager-test")
	s.manager = testenv.StartProcess(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Cluster API manager output (last 60 lines):\n%s", tail(s.manager.Output(), 60))
		}
	})
	hc := &http.Client{Timeout: 2 * time.Second}
	start := time.Now()
	testenv.Eventually(t, 90*time.Second, "Cluster API manager ready", func() error {
		select {
		case <-s.manager.Exited():
			t.Fatalf("Cluster API manager exited: %v\n%s", s.manager.Err(), tail(s.manager.Output(), 40))
		default:
		}
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if err != nil {
			return err
		}
		resp.Body.Close()
		return testenv.Unmet(resp.StatusCode == http.StatusOK, resp.Status)
	})
	t.Logf("Cluster API manager ready in %s", time.Since(start).Round(time.Millisecond))
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// capiObject is an empty Cluster API object of kind in cluster.x-k8s.io/v1beta2: the suite
// speaks to Cluster API's types as unstructured objects, as any client without its Go module
// does (banlieue does not depend on Cluster API's module).
func capiObject(kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// get reads obj again into a fresh object of its kind.
func (s *suite) get(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	return got, s.env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got)
}

// condition is the status of condition typ in obj's status.conditions (v1beta2 conditions are
// metav1.Conditions), or "" without one.
func condition(obj *unstructured.Unstructured, typ string) (status, reason string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			return status, reason
		}
	}
	return "", ""
}
