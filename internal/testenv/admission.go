package testenv

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InstallAdmission creates every object of config/admission/<file> (a ValidatingAdmissionPolicy
// and its binding), exactly as the install ships them, so the tests hold the code to the file.
func InstallAdmission(ctx context.Context, t testing.TB, admin client.Client, file string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "config", "admission", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("decoding config/admission/%s: %v", file, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := admin.Create(ctx, &obj); err != nil {
			t.Fatalf("installing %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}
