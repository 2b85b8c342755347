package install

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChartConsole: console.enabled renders the relay's APIService with a caBundle that vouches
// for the serving certificate's Service name in the release namespace, the Secret the controller
// mounts, and the controller's console flags; off, none of it.
func TestChartConsole(t *testing.T) {
	helm := helmBinary(t)
	const ns = "vm-infra"
	objs := parseObjects(t, renderChart(t, helm, "--namespace", ns, "--set", "console.enabled=true"))
	byKind := map[string]*unstructured.Unstructured{}
	var controllerArgs []string
	for _, o := range objs {
		switch {
		case o.GetKind() == "APIService" || o.GetName() == "banlieue-console-serving" || o.GetName() == "banlieue-vm-console":
			byKind[o.GetKind()] = o
		case o.GetKind() == "Deployment" && o.GetName() == "banlieue-controller":
			ctrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(ctrs[0].(map[string]any), "args")
			controllerArgs = args
		}
	}
	if !slices.Contains(controllerArgs, "--console-port=9443") || !slices.Contains(controllerArgs, "--console-cert-dir=/etc/banlieue/console") {
		t.Errorf("controller args %q lack the console flags", controllerArgs)
	}
	api, secret := byKind["APIService"], byKind["Secret"]
	if api == nil || secret == nil || byKind["ClusterRole"] == nil {
		t.Fatalf("rendered %v, want the APIService, the serving Secret and ClusterRole banlieue-vm-console", byKind)
	}
	caB64, _, _ := unstructured.NestedString(api.Object, "spec", "caBundle")
	svcNS, _, _ := unstructured.NestedString(api.Object, "spec", "service", "namespace")
	crtB64, _, _ := unstructured.NestedString(secret.Object, "data", "tls.crt")
	if svcNS != ns {
		t.Errorf("APIService service namespace %q, want the release namespace %q", svcNS, ns)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(decodeB64(t, caB64)) {
		t.Fatal("caBundle holds no certificate")
	}
	block, _ := pem.Decode(decodeB64(t, crtB64))
	if block == nil {
		t.Fatal("tls.crt holds no certificate")
	}
	crt, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crt.Verify(x509.VerifyOptions{Roots: roots, DNSName: "banlieue-console." + ns + ".svc"}); err != nil {
		t.Errorf("the serving certificate does not verify as the Service's name against caBundle: %v", err)
	}

	for _, o := range parseObjects(t, renderChart(t, helm, "--namespace", ns)) {
		if o.GetKind() == "APIService" || o.GetName() == "banlieue-console" {
			t.Errorf("console off renders %s %s", o.GetKind(), o.GetName())
		}
	}
}

func decodeB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
