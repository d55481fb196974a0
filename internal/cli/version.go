package cli

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/acp-bridge/acp-bridge/internal/buildinfo"
	"github.com/urfave/cli/v2"
)

// versionCommand is `acp-bridge version [--json]`: which build this is, in
// one line a bug report can quote, or as JSON for scripts.
func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, VCS revision, build time, Go version and platform to stdout (as --version does)",
		// The shared flags are accepted but hidden: none does anything here.
		Flags: append(commonFlagsUsing(), &cli.BoolFlag{
			Name:  "json",
			Usage: "print the same as a JSON object, for scripts",
		}),
		Action: versionAction,
	}
}

func versionAction(c *cli.Context) error {
	// Human-facing: stdout explicitly, never the serving streams.
	if c.Bool("json") {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(buildinfo.Read())
	}
	_, err := fmt.Fprintln(os.Stdout, versionLine())
	return err
}

// versionLine is what `acp-bridge version` and `acp-bridge --version` print.
func versionLine() string {
	return "acp-bridge " + buildinfo.Read().String()
}

// versionString is the bare version the bridge reports itself with to
// editors and agents (agentInfo, clientInfo): v1.2.3, or "dev".
func versionString() string {
	return buildinfo.Read().Short()
}
