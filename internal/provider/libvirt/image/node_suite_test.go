//go:build node

package image

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/jobimage"
	providerlibvirt "banlieue.io/banlieue/internal/provider/libvirt"
	"banlieue.io/banlieue/internal/provider/libvirt/hostconn"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
)

// The suites of this file run the Provider and VMImage controllers in the test process against
// the real node's control plane (hack/node-test.sh), so every import Job they make is a pod of
// the node's kubelet: banlieue's image, the import ServiceAccount's token and the artifacts PVC
// bound to a local PersistentVolume the test writes the artifacts into, as the imagebuilder
// would. The controllers' internals an installed release does not expose (a short old-base
// grace, tolerations, a fast resync) are set here; the installed pipeline is
// test/node/pipeline_test.go.

const (
	artifactsPVC   = "banlieue-artifacts"
	imagebuilderFM = banlieuev1.FieldManagerImagebuilder
	// nodeImage is banlieue's image as hack/image.sh import loads it into the node's containerd.
	nodeImage = "registry.example/banlieue:v0.0.0-image-suite"
)

// newNodeSuite is newLabSuite on the real node: the lab host as the node's pods reach it, the
// namespaces created (and, at the end, removed) on the node's API server.
func newNodeSuite(t *testing.T) *labSuite {
	t.Helper()
	nodeDir, _ := testenv.RealNode()
	kubeconfig := filepath.Join(nodeDir, "kubeconfig")
	if _, err := os.Stat(kubeconfig); err != nil {
		testenv.MissingPrerequisite(t, "the real node is not up (no "+kubeconfig+"): run hack/node-test.sh")
	}
	// The Provider names the address the import pods dial; the host reaches it too (the bridge).
	s := &labSuite{lab: testenv.RequirePodLibvirtLab(t)}
	s.host = labhost.Dial(t, s.lab)
	s.env = testenv.Attach(t, kubeconfig)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	s.waitNamespacesGone(ctx, t)
	t.Cleanup(func() { s.removeNamespaces(t) })
	s.env.CreateLabNamespace(ctx, t, s.lab, providerNamespace, "lab-creds", "lab-ca")
	s.env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: buildNamespace}})
	s.grantImports(ctx, t)
	return s
}

// startControllers runs the Provider and VMImage controllers, and returns the directory behind
// the artifacts PVC.
func (s *labSuite) startControllers(ctx context.Context, t *testing.T) string {
	t.Helper()
	testenv.SetLogger(t)
	mgr := s.env.NewManager(t)
	conns := hostconn.NewConnections()
	t.Cleanup(conns.Close)
	if err := (&providerlibvirt.ProviderReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Connections: conns, Resync: 2 * time.Second}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connections: conns,
		BuildNamespace: buildNamespace, ImportImage: loadImage(t), ImportServiceAccount: importSA, WatchJobs: true,
		Pull:        jobimage.Pull{Policy: corev1.PullNever},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "build", Effect: corev1.TaintEffectNoSchedule}},
		// Short, so that old bases are collected within the tests' waits.
		OldBaseGrace: labOldBaseGrace,
	}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	artifacts := s.artifactsVolume(ctx, t)
	testenv.StartManager(t, mgr)
	return artifacts
}

var (
	imageOnce sync.Once
	imageErr  error
)

// loadImage builds banlieue's image and loads it into the node's containerd once per test binary.
func loadImage(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() {
		cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "image.sh"), "import")
		cmd.Dir = testenv.RepoRoot()
		cmd.Env = append(os.Environ(), "IMAGE="+nodeImage)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if out, err := cmd.Output(); err != nil {
			imageErr = fmt.Errorf("hack/image.sh import: %w\n%s%s", err, out, stderr.String())
		}
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return nodeImage
}

// grantImports gives the import account what the operator grants a Provider's import account
// (internal/operator/rules.go, importRoleRules): Provider "lab", the one every suite here
// creates, and its credentials, read-only, by name.
func (s *labSuite) grantImports(ctx context.Context, t *testing.T) {
	t.Helper()
	s.env.Create(ctx, t,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: importSA, Namespace: buildNamespace}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: importSA, Namespace: providerNamespace}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{banlieuev1.GroupVersion.Group}, Resources: []string{"providers"}, Verbs: []string{"get"}, ResourceNames: []string{"lab"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"lab-creds"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{"lab-ca"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: importSA, Namespace: providerNamespace},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: importSA},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: buildNamespace, Name: importSA}}},
	)
}

// artifactsVolume binds the artifacts PVC to a local PersistentVolume on the node, under its
// state directory, and returns that directory.
func (s *labSuite) artifactsVolume(ctx context.Context, t *testing.T) string {
	t.Helper()
	nodeDir, nodeName := testenv.RealNode()
	dir := filepath.Join(nodeDir, "image-suite-artifacts")
	const pvName = "banlieue-image-suite-artifacts"
	testenv.LocalVolume(t, s.env.Client, pvName, nodeName, dir, buildNamespace, artifactsPVC)
	s.env.Create(ctx, t, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: artifactsPVC, Namespace: buildNamespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(""),
			VolumeName:       pvName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	})
	return dir
}

// removeNamespaces ends a suite on the shared control plane: after its controllers stopped,
// nobody removes the finalizers of its Providers and VMImages, so the test does, then deletes
// its namespaces and waits until they are gone for the next suite.
func (s *labSuite) removeNamespaces(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := s.env.Client
	var providers banlieuev1.ProviderList
	var images banlieuev1.VMImageList
	_ = c.List(ctx, &providers, client.InNamespace(providerNamespace))
	_ = c.List(ctx, &images)
	var objs []client.Object
	for i := range providers.Items {
		objs = append(objs, &providers.Items[i])
	}
	for i := range images.Items {
		objs = append(objs, &images.Items[i])
	}
	for _, o := range objs {
		_ = c.Delete(ctx, o)
		_ = c.Patch(ctx, o, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	}
	for _, ns := range []string{providerNamespace, buildNamespace} {
		_ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	s.waitNamespacesGone(ctx, t)
}

// waitNamespacesGone waits until the suite's namespaces do not exist (an earlier suite's, or its
// own at the end, still terminating).
func (s *labSuite) waitNamespacesGone(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, ns := range []string{providerNamespace, buildNamespace} {
		testenv.WaitGone(ctx, t, s.env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, 2*time.Minute)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
