package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"banlieue.io/banlieue/internal/testenv"
)

// commitMsgHook is the hook CONTRIBUTING.md tells contributors to enable.
const commitMsgHook = "hack/git-hooks/commit-msg"

// TestCommitMsgHook runs the hook on messages that follow CONTRIBUTING.md's commit style and on
// messages that break each of its rules.
func TestCommitMsgHook(t *testing.T) {
	hook := filepath.Join(testenv.RepoRoot(), commitMsgHook)
	long := "scheduler: " + strings.Repeat("x", 72-len("scheduler: "))
	accented := "docs: " + strings.Repeat("é", 72-len("docs: ")) // 72 characters, 138 bytes
	for _, c := range []struct {
		name, msg string
		ok        bool
		says      string
	}{
		{"subject and body", "scheduler: place by free memory\n\nThe old order packed one host; measured 3 hosts.\n", true, ""},
		{"subject only", "scheduler: place by free memory\n", true, ""},
		{"72 characters", long + "\n", true, ""},
		{"72 characters, not 72 bytes", accented + "\n", true, ""},
		{"two areas", "README, test/docs: list every kind\n\nbody\n", true, ""},
		{"a path as the area", "internal/provider/libvirt: split by concern\n", true, ""},
		{"git's comments and scissors", "# a comment\n\nci: x\n# Please enter\n\nbody\n# ------------------------ >8 ------------------------\ndiff --git a b\n", true, ""},
		{"a merge", "Merge branch 'house'\n", true, ""},
		{"a fixup", "fixup! scheduler: place by free memory\n", true, ""},
		{"73 characters", long + "y\n", false, "73 characters long"},
		{"no area", "place by free memory\n", false, "area it changes"},
		{"an area with spaces", "the scheduler: place by free memory\n", false, "area it changes"},
		{"no space after the colon", "scheduler:place\n", false, "area it changes"},
		{"body on the second line", "scheduler: place by free memory\nbecause it packed one host\n", false, "second line is not blank"},
		{"empty", "# only a comment\n\n", false, "subject is empty"},
		{"a fixup of a bad subject", "fixup! place by free memory\n", false, "area it changes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "COMMIT_EDITMSG")
			if err := os.WriteFile(file, []byte(c.msg), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(hook, file).CombinedOutput()
			if c.ok && err != nil {
				t.Errorf("refused %q: %v\n%s", c.msg, err, out)
			}
			if !c.ok {
				if err == nil {
					t.Errorf("accepted %q", c.msg)
				} else if !strings.Contains(string(out), c.says) {
					t.Errorf("refused %q without saying %q:\n%s", c.msg, c.says, out)
				}
			}
		})
	}
}

// TestCommitMsgHookEnabledAsDocumented: with core.hooksPath set as CONTRIBUTING.md says, git
// itself refuses a bad message and records a good one.
func TestCommitMsgHookEnabledAsDocumented(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root := testenv.RepoRoot()
	if !strings.Contains(readRepoFile(t, "CONTRIBUTING.md"), "git config core.hooksPath hack/git-hooks") {
		t.Fatal("CONTRIBUTING.md does not say how to enable the hook (git config core.hooksPath hack/git-hooks)")
	}
	repo := t.TempDir()
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Env = append(gitFreeEnv(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := git("init", "-q"); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	// The hook as the clone would have it: the repository's own directory.
	if out, err := git("config", "core.hooksPath", filepath.Join(root, "hack", "git-hooks")); err != nil {
		t.Fatalf("git config: %v\n%s", err, out)
	}
	if out, err := git("commit", "-q", "--allow-empty", "-m", "a subject with no area"); err == nil {
		t.Errorf("git commit accepted a subject with no area:\n%s", out)
	} else if !strings.Contains(out, "area it changes") {
		t.Errorf("git commit refused without the hook's reason: %v\n%s", err, out)
	}
	if out, err := git("commit", "-q", "--allow-empty", "-m", "docs: a subject with its area", "-m", "A body that says why."); err != nil {
		t.Errorf("git commit refused a good message: %v\n%s", err, out)
	}
	if out, err := git("log", "--format=%s"); err != nil || strings.TrimSpace(out) != "docs: a subject with its area" {
		t.Errorf("git log = %q (%v), want the one good commit", out, err)
	}
}

// gitFreeEnv is the environment without GIT_* variables, which a test run from inside a git hook
// would inherit and which would point git at the wrong repository.
func gitFreeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return env
}
