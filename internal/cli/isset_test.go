package cli

import (
	"fmt"
	"testing"

	"github.com/urfave/cli/v2"
)

// isSet answers what urfave/cli's IsSet answers, for a flag given on the
// command line (by name or alias), by its environment variable, on a
// parent command, or not at all.
func TestIsSetAgreesWithUrfave(t *testing.T) {
	flags := func() []cli.Flag {
		return []cli.Flag{
			&cli.StringFlag{Name: "plain", EnvVars: []string{"ACP_BRIDGE_TEST_PLAIN"}},
			&cli.StringFlag{Name: "aliased", Aliases: []string{"a"}},
			&cli.BoolFlag{Name: "flag"},
			&cli.StringSliceFlag{Name: "list"},
			&cli.DurationFlag{Name: "wait"},
			&cli.IntFlag{Name: "count"},
		}
	}
	names := []string{"plain", "aliased", "flag", "list", "wait", "count", "unknown"}
	for _, tc := range []struct {
		args []string
		env  string
	}{
		{args: []string{"app", "sub"}},
		{args: []string{"app", "sub"}, env: "x"},
		{args: []string{"app", "sub", "--plain", "x", "-a", "y", "--flag", "--list", "l", "--wait", "1s", "--count", "2"}},
		{args: []string{"app", "--plain", "x", "--aliased", "y", "--count", "2", "sub", "--flag"}},
		{args: []string{"app", "--list", "l", "sub", "--wait", "1s"}},
	} {
		t.Run(fmt.Sprint(tc.args, tc.env), func(t *testing.T) {
			t.Setenv("ACP_BRIDGE_TEST_PLAIN", tc.env)
			check := func(c *cli.Context) error {
				for _, cc := range c.Lineage() {
					for _, n := range names {
						if got, want := isSet(cc, n), cc.IsSet(n); got != want {
							t.Errorf("isSet(%q) = %v on %q, IsSet says %v", n, got, cc.Command.Name, want)
						}
					}
				}
				for _, n := range names {
					if got, want := (lineage{c}).IsSet(n), (lineage{c}).at(n).IsSet(n); got != want {
						t.Errorf("lineage.IsSet(%q) = %v, IsSet says %v", n, got, want)
					}
				}
				return nil
			}
			app := &cli.App{Name: "app", Flags: flags(), Action: check,
				Commands: []*cli.Command{{Name: "sub", Flags: flags(), Action: check}}}
			if err := app.Run(tc.args); err != nil {
				t.Fatal(err)
			}
		})
	}
}
