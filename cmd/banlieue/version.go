package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are stamped by `make build` (-ldflags "-X main.version=… -X main.commit=…"),
// the one build every script, test and image uses; see the Makefile's VERSION and COMMIT.
var (
	version string
	commit  string
)

// buildVersion is what `banlieue version` reports.
type buildVersion struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
}

// resolveVersion prefers the stamped values. Without them (a plain `go build` or `go install`) it
// falls back to what the Go toolchain recorded: the module version `go install …@vX.Y.Z` sets,
// and the VCS revision `go build` records inside a checkout unless -buildvcs=false.
func resolveVersion(stampedVersion, stampedCommit string, info *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: stampedVersion, Commit: stampedCommit, GoVersion: runtime.Version()}
	if info != nil {
		if info.GoVersion != "" {
			v.GoVersion = info.GoVersion
		}
		if v.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v.Version = info.Main.Version
		}
		if v.Commit == "" {
			revision, modified := "", false
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision":
					revision = s.Value
				case "vcs.modified":
					modified = s.Value == "true"
				}
			}
			if revision != "" && modified {
				revision += "-dirty"
			}
			v.Commit = revision
		}
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

// currentVersion is this binary's version, commit and Go version.
func currentVersion() buildVersion {
	info, _ := debug.ReadBuildInfo()
	return resolveVersion(version, commit, info)
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the banlieue version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersion()
			out := cmd.OutOrStdout()
			switch output {
			case "text":
				_, err := fmt.Fprintf(out, "banlieue %s (commit %s, %s)\n", v.Version, v.Commit, v.GoVersion)
				return err
			case "json":
				return json.NewEncoder(out).Encode(v)
			default:
				return fmt.Errorf("--output %q: must be text or json", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
