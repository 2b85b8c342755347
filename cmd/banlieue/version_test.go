package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"banlieue.io/banlieue/internal/testenv"
)

func TestResolveVersion(t *testing.T) {
	vcs := func(revision, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: revision}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name                    string
		stampedVersion, stamped string
		info                    *debug.BuildInfo
		wantVersion, wantCommit string
	}{
		{name: "stamped by make build", stampedVersion: "v0.1.0", stamped: "abc123",
			info:        &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("fff", "true")},
			wantVersion: "v0.1.0", wantCommit: "abc123"},
		{name: "go build in a checkout records the revision", info: &debug.BuildInfo{
			Main: debug.Module{Version: "(devel)"}, Settings: vcs("abc123", "false")},
			wantVersion: "dev", wantCommit: "abc123"},
		{name: "a modified checkout is dirty", info: &debug.BuildInfo{Settings: vcs("abc123", "true")},
			wantVersion: "dev", wantCommit: "abc123-dirty"},
		{name: "go install at a version", info: &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}},
			wantVersion: "v0.2.0", wantCommit: "unknown"},
		{name: "-buildvcs=false and no stamp", info: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			wantVersion: "dev", wantCommit: "unknown"},
		{name: "no build info", wantVersion: "dev", wantCommit: "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolveVersion(tc.stampedVersion, tc.stamped, tc.info)
			if got.Version != tc.wantVersion || got.Commit != tc.wantCommit || got.GoVersion == "" {
				t.Errorf("got %+v, want version %q commit %q and a Go version", got, tc.wantVersion, tc.wantCommit)
			}
		})
	}
}

// TestBuiltBinaryReportsItsCommit runs the binary as every test, the lab and the image build it
// (make build, through testenv.Banlieue): it names this checkout's commit, not "unknown", and its
// JSON form parses.
func TestBuiltBinaryReportsItsCommit(t *testing.T) {
	if os.Getenv("BANLIEUE_TEST_BINARY") != "" {
		t.Skip("BANLIEUE_TEST_BINARY names a binary built elsewhere, perhaps from another commit")
	}
	head, err := exec.Command("git", "-C", testenv.RepoRoot(), "rev-parse", "HEAD").Output()
	if err != nil {
		testenv.MissingPrerequisite(t, "a git checkout: git rev-parse HEAD: "+err.Error())
	}
	bin := testenv.Banlieue(t)

	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("banlieue version -o json: %v", err)
	}
	var got buildVersion
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("banlieue version -o json printed %q: %v", out, err)
	}
	if want := strings.TrimSpace(string(head)); got.Commit != want {
		t.Errorf("commit %q, want HEAD %q", got.Commit, want)
	}
	if got.Version == "" || got.Version == "dev" || got.GoVersion != runtime.Version() {
		t.Errorf("got %+v, want git describe's version and Go %s", got, runtime.Version())
	}

	text, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("banlieue version: %v", err)
	}
	if want := "banlieue " + got.Version + " (commit " + got.Commit + ", " + got.GoVersion + ")\n"; string(text) != want {
		t.Errorf("banlieue version printed %q, want %q", text, want)
	}

	if out, err := exec.Command(bin, "version", "-o", "yaml").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), `--output "yaml"`) {
		t.Errorf("banlieue version -o yaml: err %v, output %q; want a refusal naming the value", err, out)
	}
}
