//go:build node

// Package node checks that the lab's real node (hack/node.sh) runs banlieue's image, built without
// a container engine (hack/image.sh), with a real kubelet and containerd: a pod runs to
// completion and a Deployment of the controller role gets a Ready pod.
//
// Build-tagged so `go test ./...` (and CI, which does not start the node yet) leaves it out:
//
//	hack/lab.sh up && hack/node.sh up && go test -tags node -count=1 -v ./test/node/
//
// With the tag, a node that is not up skips the test (fails it under CI, like every lab test).
package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"banlieue.io/banlieue/internal/testenv"
)

// releaseVersion is fixed so repeated runs retag one image in the node's containerd instead of
// piling up one per commit; hack/release.sh tags the image with it.
const (
	releaseVersion = "v0.0.0-node-test"
	imageTag       = "registry.example/banlieue:" + releaseVersion
)

type node struct {
	cs     kubernetes.Interface
	config *rest.Config
	name   string
	dir    string
}

// requireNode returns the running node of hack/node.sh, or skips t.
func requireNode(t *testing.T) node {
	t.Helper()
	dir, name := testenv.RealNode()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if _, err := os.Stat(kubeconfig); err != nil {
		testenv.MissingPrerequisite(t, "the real node is not up (no "+kubeconfig+"): run hack/lab.sh up && hack/node.sh up")
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("reading %s: %v", kubeconfig, err)
	}
	cs := kubernetes.NewForConfigOrDie(config)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		testenv.MissingPrerequisite(t, fmt.Sprintf("the real node %s is not registered (%v): run hack/node.sh up", name, err))
	}
	if !nodeReady(n) {
		testenv.MissingPrerequisite(t, "the real node "+name+" is not Ready: see hack/node.sh status")
	}
	return node{cs: cs, config: config, name: name, dir: dir}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// release is what `make release` writes (hack/release.sh), made once per test binary: the
// chart tarball and the image tarball the suite installs, so the release artifacts themselves
// go into the real cluster.
type release struct {
	dir, chart, image string
}

var (
	releaseOnce sync.Once
	releaseMade release
	releaseErr  error
)

func makeRelease(t *testing.T) release {
	t.Helper()
	releaseOnce.Do(func() {
		dir := filepath.Join(testenv.RepoRoot(), "bin", "node-test-release")
		cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "release.sh"))
		cmd.Dir = testenv.RepoRoot()
		cmd.Env = append(os.Environ(), "VERSION="+releaseVersion, "IMAGE="+imageTag, "DIST="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			releaseErr = fmt.Errorf("hack/release.sh: %w\n%s", err, stderr.String())
			return
		}
		releaseMade = release{dir: dir, chart: filepath.Join(dir, "banlieue-"+strings.TrimPrefix(releaseVersion, "v")+".tgz"),
			image: filepath.Join(dir, "banlieue-image.tar")}
	})
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	return releaseMade
}

// importImage loads the release's image tarball into the node (hack/node.sh import) and returns
// its reference, the chart's default image.
func importImage(t *testing.T) string {
	t.Helper()
	rel := makeRelease(t)
	cmd := exec.CommandContext(t.Context(), filepath.Join(testenv.RepoRoot(), "hack", "node.sh"), "import", rel.image)
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/node.sh import %s: %v\n%s", rel.image, err, out)
	}
	return imageTag
}

func createNamespace(t *testing.T, n node) string {
	t.Helper()
	ns := "node-test-" + testenv.RunID()
	ctx := t.Context()
	if _, err := n.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = n.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	// The controller-manager's service account controller creates "default"; pods need it.
	testenv.Eventually(t, 60*time.Second, "ServiceAccount default in "+ns, func() error {
		_, err := n.cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	return ns
}

// restricted is the pod security the installed roles run with (config/manager).
func restricted(spec corev1.PodSpec) corev1.PodSpec {
	spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for i := range spec.Containers {
		spec.Containers[i].ImagePullPolicy = corev1.PullNever
		spec.Containers[i].SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
	return spec
}

func TestVersionPodSucceedsOnTheRealNode(t *testing.T) {
	n := requireNode(t)
	image := importImage(t)
	ns := createNamespace(t, n)
	ctx := t.Context()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "banlieue-version", Namespace: ns},
		Spec: restricted(corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "banlieue", Image: image, Args: []string{"version"}}},
		}),
	}
	if _, err := n.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	var got *corev1.Pod
	testenv.Eventually(t, 2*time.Minute, "pod banlieue-version Succeeded", func() error {
		var err error
		if got, err = n.cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			return err
		}
		if got.Status.Phase == corev1.PodFailed {
			t.Fatalf("pod failed: %+v", got.Status.ContainerStatuses)
		}
		return testenv.Unmet(got.Status.Phase == corev1.PodSucceeded, fmt.Sprintf("phase %s, %+v", got.Status.Phase, got.Status.ContainerStatuses))
	})
	if got.Spec.NodeName != n.name {
		t.Fatalf("pod ran on %q, want the real node %q", got.Spec.NodeName, n.name)
	}
	if got.Status.PodIP == "" {
		t.Fatal("pod has no IP: the CNI bridge did not give it one")
	}
	// Read as `kubectl logs` does: through the API server and the kubelet.
	logs := containerLog(t, n, got, "banlieue")
	if !strings.HasPrefix(logs, "banlieue ") {
		t.Fatalf("banlieue version printed %q, want it to start with \"banlieue \"", logs)
	}
	t.Logf("pod %s/%s on %s (%s): %s", ns, pod.Name, got.Spec.NodeName, got.Status.PodIP, logs)
}

// TestControllerDeploymentReadyOnTheRealNode runs the controller role from banlieue's image as a
// Deployment under its installed ClusterRole, until its readiness probe passes.
func TestControllerDeploymentReadyOnTheRealNode(t *testing.T) {
	n := requireNode(t)
	image := importImage(t)
	ns := createNamespace(t, n)
	ctx := t.Context()

	const sa = "banlieue-controller"
	if _, err := n.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ServiceAccount: %v", err)
	}
	role := installedClusterRole(t, n, "config/rbac/controller/role.yaml", ns)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-controller"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}
	if _, err := n.cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ClusterRoleBinding: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.cs.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
	})

	// Nothing here points the pod at the API server or mounts its token: as in a user's cluster,
	// the ServiceAccount admission plugin adds the token volume, the kubelet sets
	// KUBERNETES_SERVICE_HOST to the kubernetes Service's ClusterIP and kube-proxy forwards it
	// to the API server's advertised address, so rest.InClusterConfig is all the role uses.
	labels := map[string]string{"app.kubernetes.io/name": "banlieue", "app.kubernetes.io/component": "controller"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "banlieue-controller", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: restricted(corev1.PodSpec{
					ServiceAccountName: sa,
					Containers: []corev1.Container{{
						Name:  "controller",
						Image: image,
						Args:  []string{"controller", "--no-leader-elect", "--log-format=json", "--metrics-secure=false"},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("health")}},
							PeriodSeconds: 2,
						},
						Ports: []corev1.ContainerPort{{Name: "health", ContainerPort: 8081}},
					}},
				}),
			},
		},
	}
	if _, err := n.cs.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Deployment: %v", err)
	}
	testenv.Eventually(t, 3*time.Minute, "Deployment banlieue-controller with a Ready pod", func() error {
		d, err := n.cs.AppsV1().Deployments(ns).Get(ctx, deploy.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return testenv.Unmet(d.Status.ReadyReplicas == 1, fmt.Sprintf("ready %d/1: %s", d.Status.ReadyReplicas, podStates(ctx, n, ns)))
	})
	pods, err := n.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("listing the controller's pods: %v (%d pods)", err, len(pods.Items))
	}
	pod := pods.Items[0]
	if got := pod.Spec.NodeName; got != n.name {
		t.Fatalf("controller pod runs on %q, want the real node %q", got, n.name)
	}
	if pod.Spec.HostNetwork || pod.Status.PodIP == pod.Status.HostIP {
		t.Fatalf("controller pod %s shares the host's network (pod IP %s, host IP %s): the test must go through the pod network", pod.Name, pod.Status.PodIP, pod.Status.HostIP)
	}
	if !mountsServiceAccountToken(pod.Spec.Containers[0]) {
		t.Fatalf("controller pod has no ServiceAccount token mount (the ServiceAccount admission plugin is off?): %+v", pod.Spec.Containers[0].VolumeMounts)
	}
	// Ready alone could pass before the role ever reached the API server: its workers start only
	// once its caches synced, under the ServiceAccount token the kubelet mounted (which may be a
	// moment after the readiness probe first passes).
	testenv.Eventually(t, time.Minute, "the controller pod's workers started", func() error {
		logs := containerLog(t, n, &pod, "controller")
		return testenv.Unmet(strings.Contains(logs, `"msg":"Starting workers"`), "its log:\n"+logs)
	})
}

// containerLog returns what a container wrote to stdout and stderr, through the API server as
// `kubectl logs` reads it (the API server reaches the kubelet with its client certificate).
func containerLog(t *testing.T, n node, pod *corev1.Pod, container string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	data, err := n.cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("kubectl logs %s -c %s: %v", pod.Name, container, err)
	}
	return strings.TrimSpace(string(data))
}

func podStates(ctx context.Context, n node, ns string) string {
	pods, err := n.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "%s %s %+v; ", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
	}
	return b.String()
}

// installedClusterRole creates the ClusterRole the repository installs from path, under a name
// of the test's own (suffix: namespace ns) so that it never collides with an install's
// (TestHelmInstallOnTheRealNode), deletes it at the end and returns its name.
func installedClusterRole(t *testing.T, n node, path, ns string) string {
	t.Helper()
	role, _ := testenv.GeneratedRoles(t, path)
	role.Name += "-" + ns
	if _, err := n.cs.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("installing ClusterRole %s: %v", role.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.cs.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	return role.Name
}

// mountsServiceAccountToken reports whether c mounts the token volume the ServiceAccount
// admission plugin adds, where rest.InClusterConfig reads it.
func mountsServiceAccountToken(c corev1.Container) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" && strings.HasPrefix(m.Name, "kube-api-access-") {
			return true
		}
	}
	return false
}
