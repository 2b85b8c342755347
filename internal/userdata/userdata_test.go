package userdata

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestSecretName(t *testing.T) {
	long := strings.Repeat("a", 250)
	names := map[string]string{}
	for _, machine := range []string{"web-01", "web-02", "userdata-web-01", long, long + "b"} {
		n := SecretName(machine)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("SecretName(%q) = %q: %v", machine, n, errs)
		}
		if !strings.HasPrefix(n, "userdata-") {
			t.Errorf("SecretName(%q) = %q, want the userdata- prefix", machine, n)
		}
		if other, dup := names[n]; dup {
			t.Errorf("machines %q and %q share the Secret name %q", other, machine, n)
		}
		names[n] = machine
		if SecretName(machine) != n {
			t.Errorf("SecretName(%q) is not stable", machine)
		}
	}
}

func TestHash(t *testing.T) {
	salt, content := []byte("0123456789abcdef"), []byte("#cloud-config\n")
	h := Hash(salt, content)
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		t.Fatalf("Hash = %q, want 64 hex digits", h)
	}
	if !Matches(salt, content, h) {
		t.Error("the hash does not match its own inputs")
	}
	for name, tt := range map[string]struct{ salt, content []byte }{
		"other content": {salt, []byte("#cloud-config\nusers: []\n")},
		"other salt":    {[]byte("fedcba9876543210"), content},
		"no salt":       {nil, content},
	} {
		if Matches(tt.salt, tt.content, h) {
			t.Errorf("%s matches the hash", name)
		}
	}
}
