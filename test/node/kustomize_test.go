//go:build node

package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/testenv"
)

// TestKustomizeInstallOnTheRealNode installs as docs/guides/install.md's kustomize path does: a
// copy of config/ whose config/default/kustomization.yaml has its image's newTag edited to the
// release's (the guide's "or edit newName/newTag"), then `kubectl apply --server-side -k
// config/crd` and `-k config/default`: the three roles' pods Ready on the real node under their
// ServiceAccount tokens, running the release's image with the default pull policy (present in
// the node, never pulled), and the ProviderClass's image rewritten to the same tag by the
// kustomization's replacements. What it added is deleted again with `kubectl delete -k`.
func TestKustomizeInstallOnTheRealNode(t *testing.T) {
	n := requireNode(t)
	importImage(t)
	ctx := t.Context()
	for _, role := range roles {
		if _, err := n.cs.RbacV1().ClusterRoles().Get(ctx, "banlieue-"+role, metav1.GetOptions{}); err == nil {
			testenv.MissingPrerequisite(t, "ClusterRole banlieue-"+role+" exists already: the kustomize install needs a control plane without banlieue installed")
		}
	}

	config := filepath.Join(t.TempDir(), "config")
	if err := os.CopyFS(config, os.DirFS(filepath.Join(testenv.RepoRoot(), "config"))); err != nil {
		t.Fatal(err)
	}
	kustomization := filepath.Join(config, "default", "kustomization.yaml")
	data, err := os.ReadFile(kustomization)
	if err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(imageTag, ":")
	edited := strings.Replace(string(data), "  newName: registry.example/banlieue\n  newTag: v0.1.0\n",
		"  newName: "+repo+"\n  newTag: "+tag+"\n", 1)
	if edited == string(data) {
		t.Fatalf("%s: no images entry newName registry.example/banlieue, newTag v0.1.0 to edit (docs/guides/install.md)", kustomization)
	}
	if err := os.WriteFile(kustomization, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	kubectl(t, n, "apply", "--server-side", "-k", filepath.Join(config, "crd"))
	kubectl(t, n, "apply", "--server-side", "-k", filepath.Join(config, "default"))
	t.Logf("kubectl apply -k config/crd and config/default in %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		// What config/default added, last first, then its namespaces gone: the next test installs
		// the chart into a control plane without banlieue, as this one did. The CRDs stay: the
		// control plane came with them (hack/node-test.sh), and the apply changed nothing there.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, dir := range []string{"providerclass", "manager", "admission", "rbac", "namespaces"} {
			kubectlIn(ctx, t, n, "delete", "--wait=true", "--ignore-not-found", "-k", filepath.Join(config, dir))
		}
		for _, ns := range []string{systemNS, buildNS} {
			waitNamespaceGone(ctx, t, n, ns)
		}
	})

	waitRolesReady(t, n, corev1.PullIfNotPresent)
	t.Logf("three roles Ready %v after the apply", time.Since(start).Round(time.Second))
	var pc banlieuev1.ProviderClass
	if err := n.client(t).Get(ctx, client.ObjectKey{Name: "libvirt"}, &pc); err != nil {
		t.Fatalf("ProviderClass libvirt: %v", err)
	}
	if pc.Spec.Image.Repository != repo || pc.Spec.Image.Tag != tag {
		t.Errorf("ProviderClass libvirt image %s:%s, want the edited %s (the kustomization's replacements)", pc.Spec.Image.Repository, pc.Spec.Image.Tag, imageTag)
	}
}
