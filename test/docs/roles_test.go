package docs

import (
	"regexp"
	"sort"
	"strings"
	"testing"
)

// rolesDoc is the design document of the contract between the roles.
const rolesDoc = "docs/design/roles.md"

var (
	// contractKey is the shape of banlieue's own finalizers, labels, annotations and field
	// managers: banlieue.io/<lower-case words>.
	contractKey = regexp.MustCompile(`^banlieue\.io/[a-z][a-z0-9-]*$`)
	// groupVersion is an API group/version, not a key of the contract.
	groupVersion = regexp.MustCompile(`/v[0-9]+((alpha|beta)[0-9]+)?$`)
	// docKey is a banlieue.io/… key quoted in the document, a trailing /<placeholder> aside.
	docKey = regexp.MustCompile(`banlieue\.io/[a-z][a-z0-9-]*`)
)

// codeContractKeys are the banlieue.io/… string literals of the non-test code under internal/,
// api/ and pkg/ (wherever the constants live), group/versions left out.
func codeContractKeys(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for lit := range literals(t, "internal", "api", "pkg") {
		if contractKey.MatchString(lit) && !groupVersion.MatchString(lit) {
			out[lit] = true
		}
	}
	return out
}

// docContractKeys are the banlieue.io/… keys the document quotes in backticks.
func docContractKeys(doc string) map[string]bool {
	out := map[string]bool{}
	for _, m := range backticked.FindAllStringSubmatch(doc, -1) {
		for _, k := range docKey.FindAllString(m[1], -1) {
			if !groupVersion.MatchString(k) && k != "banlieue.io/banlieue" {
				out[k] = true
			}
		}
	}
	return out
}

// TestRolesContractNamesWhatTheCodeSets: every finalizer, label, annotation and field manager
// the code spells as banlieue.io/… is in docs/design/roles.md, and everything of that shape the
// document names is one the code spells. A new finalizer nobody documented, or a renamed label
// the document still promises, fails here.
func TestRolesContractNamesWhatTheCodeSets(t *testing.T) {
	code := codeContractKeys(t)
	doc := docContractKeys(readRepoFile(t, rolesDoc))
	if len(code) == 0 || len(doc) == 0 {
		t.Fatalf("found %d keys in the code and %d in %s: is the extraction broken?", len(code), len(doc), rolesDoc)
	}
	for _, k := range sortedKeys(code) {
		if !doc[k] {
			t.Errorf("the code sets %s, which %s does not name", k, rolesDoc)
		}
	}
	for _, k := range sortedKeys(doc) {
		if !code[k] {
			t.Errorf("%s names %s, which no code under internal/, api/ or pkg/ spells", rolesDoc, k)
		}
	}
	t.Logf("%d keys: %s", len(code), strings.Join(sortedKeys(code), " "))
}

// TestRolesContractKeysExtraction: the document side reads keys in backticks only, drops a
// trailing placeholder and ignores group/versions and the module path.
func TestRolesContractKeysExtraction(t *testing.T) {
	got := sortedKeys(docContractKeys("`banlieue.io/provider-libvirt/<provider>` and `banlieue.io/v1alpha1`, " +
		"`banlieue.io/banlieue/internal`, `banlieue.io/pool`, `banlieue.io/claim-subject-issuer`, banlieue.io/unquoted"))
	want := []string{"banlieue.io/claim-subject-issuer", "banlieue.io/pool", "banlieue.io/provider-libvirt"}
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %v, want %v", got, want)
	}
}
