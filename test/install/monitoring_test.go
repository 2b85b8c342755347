package install

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

var monitoringValues = []string{
	"--set", "monitoring.service.enabled=true",
	"--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.serviceMonitor.interval=15s",
	"--set", "monitoring.serviceMonitor.labels.release=kps",
	"--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.prometheusRule.labels.release=kps",
	"--set", "monitoring.dashboard.enabled=true", "--set", "monitoring.dashboard.labels.team=infra",
}

func fromUnstructured(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("%s: %v", objectKey(o), err)
	}
}

// TestChartMonitoring renders the monitoring kit (docs/guides/monitoring.md) and checks that
// it is wired to the Deployments: each metrics Service selects its role's pods and their
// metrics port, the ServiceMonitor selects the three Services and scrapes as the roles require,
// and the rule and dashboard are the files test/monitoring checks against the binary.
func TestChartMonitoring(t *testing.T) {
	helm := helmBinary(t)
	objs := parseObjects(t, renderChart(t, helm, monitoringValues...))
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKey[objectKey(o)] = o
	}
	const ns = "banlieue-system"
	var services []corev1.Service
	for _, role := range []string{"controller", "operator", "imagebuilder"} {
		svcObj, ok := byKey["Service "+ns+"/banlieue-"+role+"-metrics"]
		if !ok {
			t.Errorf("no Service banlieue-%s-metrics", role)
			continue
		}
		var svc corev1.Service
		fromUnstructured(t, svcObj, &svc)
		services = append(services, svc)
		var d appsv1.Deployment
		fromUnstructured(t, byKey["Deployment.apps "+ns+"/banlieue-"+role], &d)
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Service %s selects %v, not the pods of Deployment %s (%v)", svc.Name, svc.Spec.Selector, d.Name, d.Spec.Template.Labels)
		}
		for _, other := range []string{"controller", "operator", "imagebuilder"} {
			if other != role && svc.Spec.Selector["app.kubernetes.io/component"] == other {
				t.Errorf("Service %s selects the %s pods", svc.Name, other)
			}
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
			t.Errorf("Service %s ports %+v, want one port metrics -> metrics", svc.Name, svc.Spec.Ports)
		}
		found := false
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			found = found || p.Name == "metrics"
		}
		if !found {
			t.Errorf("Deployment %s has no container port named metrics", d.Name)
		}
	}

	sm, ok := byKey["ServiceMonitor.monitoring.coreos.com "+ns+"/banlieue"]
	if !ok {
		t.Fatal("no ServiceMonitor banlieue")
	}
	if sm.GetLabels()["release"] != "kps" {
		t.Errorf("ServiceMonitor labels %v lack monitoring.serviceMonitor.labels", sm.GetLabels())
	}
	selMap, _, _ := unstructured.NestedMap(sm.Object, "spec", "selector")
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(selMap, &ls); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range services {
		if !sel.Matches(labels.Set(svc.Labels)) {
			t.Errorf("ServiceMonitor selector %s misses Service %s (%v)", sel, svc.Name, svc.Labels)
		}
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	want := map[string]any{
		"port": "metrics", "path": "/metrics", "scheme": "https", "interval": "15s",
		"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
		"tlsConfig": map[string]any{
			"ca":         map[string]any{"secret": map[string]any{"name": "banlieue-metrics-serving", "key": "ca.crt"}},
			"serverName": "banlieue-metrics." + ns + ".svc",
		},
	}
	if len(endpoints) != 1 || !reflect.DeepEqual(endpoints[0], want) {
		t.Errorf("ServiceMonitor endpoints %v, want [%v]", endpoints, want)
	}
	checkMetricsCertificate(t, byKey, ns)

	rule, ok := byKey["PrometheusRule.monitoring.coreos.com "+ns+"/banlieue"]
	if !ok {
		t.Fatal("no PrometheusRule banlieue")
	}
	var file map[string]any
	if err := yaml.Unmarshal(readChartFile(t, "files/prometheus/rules.yaml"), &file); err != nil {
		t.Fatal(err)
	}
	if spec, _, _ := unstructured.NestedMap(rule.Object, "spec"); !reflect.DeepEqual(spec, file) {
		t.Errorf("PrometheusRule spec is not files/prometheus/rules.yaml:\n%v", spec)
	}
	if rule.GetLabels()["release"] != "kps" {
		t.Errorf("PrometheusRule labels %v lack monitoring.prometheusRule.labels", rule.GetLabels())
	}

	cm, ok := byKey["ConfigMap "+ns+"/banlieue-dashboard"]
	if !ok {
		t.Fatal("no ConfigMap banlieue-dashboard")
	}
	if l := cm.GetLabels(); l["grafana_dashboard"] != "1" || l["team"] != "infra" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard=1 and monitoring.dashboard.labels", l)
	}
	got, _, _ := unstructured.NestedString(cm.Object, "data", "banlieue.json")
	if string(bytes.TrimSpace(readChartFile(t, "files/dashboards/banlieue.json"))) != got {
		t.Errorf("ConfigMap banlieue-dashboard's banlieue.json is not files/dashboards/banlieue.json")
	}

	// Off by default: the default rendering has none of it (TestChartMatchesKustomize holds the
	// rest), and a ServiceMonitor without the Services it selects is refused.
	for _, o := range parseObjects(t, renderChart(t, helm)) {
		if strings.HasSuffix(o.GetName(), "-metrics") || o.GetName() == "banlieue-dashboard" || o.GroupVersionKind().Group == "monitoring.coreos.com" {
			t.Errorf("the default rendering has %s", objectKey(o))
		}
	}
	var errOut bytes.Buffer
	cmd := exec.Command(helm, "template", "banlieue", chartDir(), "--set", "monitoring.serviceMonitor.enabled=true")
	cmd.Stderr = &errOut
	if err := cmd.Run(); err == nil || !strings.Contains(errOut.String(), "monitoring.serviceMonitor.enabled needs monitoring.service.enabled") {
		t.Errorf("a ServiceMonitor without the Services: err %v, stderr %q", err, errOut.String())
	}
}

func readChartFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkMetricsCertificate: the Secret the chart generates holds a certificate that verifies
// against its own ca.crt for the ServiceMonitor's serverName (what Prometheus checks), with a
// key that matches it; every role mounts it where --metrics-cert-dir points.
func checkMetricsCertificate(t *testing.T, byKey map[string]*unstructured.Unstructured, ns string) {
	t.Helper()
	obj, ok := byKey["Secret "+ns+"/banlieue-metrics-serving"]
	if !ok {
		t.Fatal("no Secret banlieue-metrics-serving")
	}
	var secret corev1.Secret
	fromUnstructured(t, obj, &secret)
	pair, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
	if err != nil {
		t.Fatalf("banlieue-metrics-serving: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		t.Fatal("banlieue-metrics-serving's ca.crt holds no certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "banlieue-metrics." + ns + ".svc"}); err != nil {
		t.Errorf("the metrics certificate does not verify for the ServiceMonitor's serverName: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "kubernetes.default.svc"}); err == nil {
		t.Error("the metrics certificate verifies for kubernetes.default.svc")
	}
	for _, role := range []string{"controller", "operator", "imagebuilder"} {
		var d appsv1.Deployment
		fromUnstructured(t, byKey["Deployment.apps "+ns+"/banlieue-"+role], &d)
		spec := d.Spec.Template.Spec
		mounted := false
		for _, m := range spec.Containers[0].VolumeMounts {
			for _, v := range spec.Volumes {
				if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "banlieue-metrics-serving" && m.MountPath == "/etc/banlieue/metrics" {
					mounted = true
				}
			}
		}
		if !mounted || !slices.Contains(spec.Containers[0].Args, "--metrics-cert-dir=/etc/banlieue/metrics") {
			t.Errorf("Deployment banlieue-%s: metrics certificate mounted %v, args %v", role, mounted, spec.Containers[0].Args)
		}
	}
}
