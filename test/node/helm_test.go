//go:build node

package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/testenv"
)

// systemNS is the release namespace docs/guides/install.md installs into.
const systemNS = "banlieue-system"

var roles = []string{"controller", "operator", "imagebuilder"}

// helmRelease is the chart installed the way docs/guides/install.md does it, on the real node.
type helmRelease struct {
	helm, kubeconfig string
	values           []string
}

// installChart runs the guide's `helm install` of the release's chart tarball (make release) and
// the one `helm upgrade --reuse-values` that creates the ProviderClass, with the release's image
// already in the node (pull policy Never: no registry is reachable). The chart's default image is
// the release's, so no image value is set. It uninstalls the release at the end of t.
func installChart(t *testing.T, n node, extra ...string) helmRelease {
	t.Helper()
	chart := makeRelease(t).chart
	r := helmRelease{helm: helmBinary(t), kubeconfig: filepath.Join(n.dir, "kubeconfig"),
		values: []string{"--set", "image.pullPolicy=Never",
			// One node: ReadWriteOnce, as the single-node values the README's quick start uses.
			"-f", filepath.Join(testenv.RepoRoot(), "examples", "helm", "values-single-node.yaml")}}
	r.values = append(r.values, extra...)
	ctx := t.Context()
	// A control plane that installed the CRDs itself (hack/labcluster --crds, as hack/lab.sh
	// starts it) holds them outside any release; the chart then installs without its own, as
	// the guide's crds.enabled=false describes.
	c := n.client(t)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := c.Get(ctx, client.ObjectKey{Name: "providers.banlieue.io"}, crd)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatalf("reading CRD providers.banlieue.io: %v", err)
	case crd.Labels["app.kubernetes.io/managed-by"] != "Helm":
		r.values = append(r.values, "--set", "crds.enabled=false")
	}
	for _, role := range roles {
		cr, err := n.cs.RbacV1().ClusterRoles().Get(ctx, "banlieue-"+role, metav1.GetOptions{})
		if err == nil && cr.Labels["app.kubernetes.io/managed-by"] != "Helm" {
			testenv.MissingPrerequisite(t, "ClusterRole banlieue-"+role+" exists outside helm (hack/lab.sh up applies config/rbac): "+
				"the chart installs into a control plane without banlieue installed (hack/labcluster --crds '')")
		}
	}

	_, err = n.cs.CoreV1().Namespaces().Get(ctx, systemNS, metav1.GetOptions{})
	createdNamespace := apierrors.IsNotFound(err)
	out := r.run(t, append([]string{"install", "banlieue", chart, "--namespace", systemNS, "--create-namespace"}, r.values...)...)
	t.Cleanup(func() {
		cmd := exec.Command(r.helm, "uninstall", "banlieue", "--namespace", systemNS, "--wait", "--timeout", "2m", "--kubeconfig", r.kubeconfig)
		cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("helm uninstall: %v\n%s", err, out)
		}
		// helm's --create-namespace leaves the namespace behind; the test's own goes with it, and
		// is gone before the next test installs: a namespace still terminating would pass that
		// install's --create-namespace and then refuse its objects ("namespaces not found").
		if createdNamespace {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_ = n.cs.CoreV1().Namespaces().Delete(ctx, systemNS, metav1.DeleteOptions{})
			waitNamespaceGone(ctx, t, n, systemNS)
		}
	})
	if strings.Contains(out, "--reuse-values") {
		r.run(t, "upgrade", "banlieue", chart, "--namespace", systemNS, "--reuse-values")
	}
	return r
}

func (r helmRelease) run(t *testing.T, args ...string) string {
	t.Helper()
	start := time.Now()
	cmd := exec.CommandContext(t.Context(), r.helm, append(args, "--kubeconfig", r.kubeconfig)...)
	home := t.TempDir() // a private helm home: no repositories, cache or config of the user
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache", "HELM_DATA_HOME="+home+"/data")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", args[0], err, out)
	}
	t.Logf("helm %s in %v", args[0], time.Since(start).Round(time.Millisecond))
	return string(out)
}

// helmBinary is the pinned helm of hack/helm.sh.
func helmBinary(t *testing.T) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "helm.sh"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/helm.sh: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return lines[len(lines)-1]
}

// waitRolesReady waits until each role's Deployment has a Ready pod on the node, and checks that
// the pod runs the release's image, pulled by pull (the chart's image.pullPolicy as the tests set
// it, or the kustomize install's default), under its own ServiceAccount with the token the
// admission plugin mounted.
func waitRolesReady(t *testing.T, n node, pull corev1.PullPolicy) {
	t.Helper()
	ctx := t.Context()
	for _, role := range roles {
		name := "banlieue-" + role
		testenv.Eventually(t, 3*time.Minute, "Deployment "+name+" with a Ready pod", func() error {
			d, err := n.cs.AppsV1().Deployments(systemNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			return testenv.Unmet(d.Status.ReadyReplicas >= 1, fmt.Sprintf("ready %d: %s", d.Status.ReadyReplicas, podStates(ctx, n, systemNS)))
		})
		pods, err := n.cs.CoreV1().Pods(systemNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + role})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("listing %s's pods: %v", role, err)
		}
		p := pods.Items[0]
		if p.Spec.NodeName != n.name || p.Spec.ServiceAccountName != name || !mountsServiceAccountToken(p.Spec.Containers[0]) {
			t.Fatalf("%s pod %s: node %q, ServiceAccount %q, token mounted %v; want node %s, ServiceAccount %s and its token",
				role, p.Name, p.Spec.NodeName, p.Spec.ServiceAccountName, mountsServiceAccountToken(p.Spec.Containers[0]), n.name, name)
		}
		if got := p.Spec.Containers[0].Image; got != imageTag {
			t.Fatalf("%s pod runs %s, want the release's image %s", role, got, imageTag)
		}
		if got := p.Spec.Containers[0].ImagePullPolicy; got != pull {
			t.Fatalf("%s pod pulls %s, want %s", role, got, pull)
		}
	}
}

// TestHelmInstallOnTheRealNode installs the chart as docs/guides/install.md does (helm install,
// then helm upgrade --reuse-values for the ProviderClass): the controller, operator and
// imagebuilder Deployments get Ready pods on the real node under their ServiceAccount tokens.
func TestHelmInstallOnTheRealNode(t *testing.T) {
	n := requireNode(t)
	importImage(t)
	installChart(t, n)
	if err := n.client(t).Get(t.Context(), client.ObjectKey{Name: "libvirt"}, &banlieuev1.ProviderClass{}); err != nil {
		t.Fatalf("ProviderClass libvirt after helm install and upgrade: %v", err)
	}
	waitRolesReady(t, n, corev1.PullNever)
}

// client is a controller-runtime client of the node's API server that knows banlieue's kinds
// and CRDs.
func (n node) client(t *testing.T) client.Client {
	t.Helper()
	testenv.SetLogger(t)
	scheme := app.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(n.config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client of %s: %v", n.config.Host, err)
	}
	return c
}

// waitNamespaceGone waits until the namespace ns is deleted: one still terminating would pass the
// next install's --create-namespace (or apply) and then refuse its objects.
func waitNamespaceGone(ctx context.Context, t *testing.T, n node, ns string) {
	t.Helper()
	testenv.WaitGone(ctx, t, n.client(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, 2*time.Minute)
}
