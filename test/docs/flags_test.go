package docs

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"banlieue.io/banlieue/internal/testenv"
)

// longRunningRoles are the subcommand paths of the roles docs/operations.md's "Common flags"
// apply to.
var longRunningRoles = []string{"controller", "operator", "imagebuilder", "provider libvirt", "provider vsphere"}

var (
	flagName = regexp.MustCompile(`--[a-z][a-z0-9-]*`)
	envName  = regexp.MustCompile("^`([A-Z][A-Z0-9_]*)`$")
)

// flagLines maps each long flag of `banlieue <role> --help` to its help line.
func flagLines(t *testing.T, role string) map[string]string {
	t.Helper()
	out, err := exec.Command(testenv.Banlieue(t), append(strings.Fields(role), "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("banlieue %s --help: %v\n%s", role, err, out)
	}
	lines := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if m := helpFlag.FindStringSubmatch(line); m != nil {
			lines["--"+m[2]] = line
		}
	}
	return lines
}

// checkFlagRow checks one documented flag of role: it exists, and its help names the
// documented environment variable (env is "" for a flag documented without one).
func checkFlagRow(help map[string]string, role, flag, env string) error {
	line, ok := help[flag]
	switch {
	case !ok:
		return fmt.Errorf("banlieue %s has no flag %s", role, flag)
	case env != "" && !strings.Contains(line, "env "+env+")") && !strings.Contains(line, "env "+env+";"):
		return fmt.Errorf("banlieue %s %s: its help does not name the variable %s: %s", role, flag, env, strings.TrimSpace(line))
	case env == "" && strings.Contains(line, "(env "):
		return fmt.Errorf("banlieue %s %s reads a variable the table does not show: %s", role, flag, strings.TrimSpace(line))
	}
	return nil
}

// flagTable returns the rows of the first table under heading in doc, split into cells.
func flagTable(t *testing.T, doc, heading string) [][]string {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/operations.md has no %q section", heading)
	}
	section, _, _ = strings.Cut(section, "\n#")
	var rows [][]string
	for _, line := range strings.Split(section, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		if cells := splitRow(line); cells[0] != "Flag" && cells[0] != "Role" {
			rows = append(rows, cells)
		}
	}
	if len(rows) == 0 {
		t.Fatalf("docs/operations.md, %s: no table rows", heading)
	}
	return rows
}

func envCell(cell string) string {
	if m := envName.FindStringSubmatch(cell); m != nil {
		return m[1]
	}
	return ""
}

// TestOperationsFlagTablesMatchTheCommands: every flag of docs/operations.md's "Common flags"
// table exists on every long-running role, every flag of "Role-specific flags" on its role, and
// each reads the environment variable the table names (and none where it shows –), so a renamed
// flag or variable fails here instead of in someone's Deployment.
func TestOperationsFlagTablesMatchTheCommands(t *testing.T) {
	doc := readRepoFile(t, "docs/operations.md")
	help := map[string]map[string]string{}
	for _, role := range longRunningRoles {
		help[role] = flagLines(t, role)
	}
	checked := 0
	for _, row := range flagTable(t, doc, "### Common flags") {
		for _, flag := range flagName.FindAllString(row[0], -1) {
			for _, role := range longRunningRoles {
				checked++
				if err := checkFlagRow(help[role], role, flag, envCell(row[1])); err != nil {
					t.Errorf("docs/operations.md, Common flags: %v", err)
				}
			}
		}
	}
	for _, row := range flagTable(t, doc, "### Role-specific flags") {
		role := row[0]
		if help[role] == nil {
			t.Errorf("docs/operations.md, Role-specific flags: %q is not a long-running role %v", role, longRunningRoles)
			continue
		}
		for _, flag := range flagName.FindAllString(row[1], -1) {
			checked++
			if err := checkFlagRow(help[role], role, flag, envCell(row[2])); err != nil {
				t.Errorf("docs/operations.md, Role-specific flags: %v", err)
			}
		}
	}
	t.Logf("checked %d role/flag pairs", checked)
}

// TestFlagRowCheckerCatchesBreakage: a missing flag, a wrong variable and an undocumented one
// are each caught.
func TestFlagRowCheckerCatchesBreakage(t *testing.T) {
	help := flagLines(t, "provider libvirt")
	for _, ok := range [][2]string{{"--import-image", "BANLIEUE_IMPORT_IMAGE"}, {"--build-toleration", ""}, {"--leader-election-identity", "BANLIEUE_LEADER_ELECTION_IDENTITY"}} {
		if err := checkFlagRow(help, "provider libvirt", ok[0], ok[1]); err != nil {
			t.Errorf("%v: unexpected %v", ok, err)
		}
	}
	for _, bad := range [][2]string{{"--import-images", "BANLIEUE_IMPORT_IMAGE"}, {"--import-image", "BANLIEUE_IMPORT"}, {"--import-image", ""}} {
		if err := checkFlagRow(help, "provider libvirt", bad[0], bad[1]); err == nil {
			t.Errorf("%v: not caught", bad)
		}
	}
}
