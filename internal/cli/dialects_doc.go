package cli

import (
	"fmt"
	"os"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/docs"
	"github.com/urfave/cli/v2"
)

// dialectsDocCommand is `acp-bridge dialects doc`: the rule language's
// reference (docs/profiles.md, embedded), so that a user with only the
// binary can write a profile for it.
func dialectsDocCommand() *cli.Command {
	return &cli.Command{
		Name:         "doc",
		Usage:        "print the rule profile language's reference (docs/profiles.md) as Markdown",
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return launch.Usagef("dialects doc takes no arguments; got %q (the reference covers every profile: 'acp-bridge dialects show NAME' prints one)", c.Args().First())
			}
			_, err := fmt.Fprint(os.Stdout, docs.Profiles)
			return err
		},
	}
}
