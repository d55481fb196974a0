package cli

import (
	"fmt"
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
)

// isSet answers what urfave/cli's IsSet answers, for a flag given on the
// command line (by name or alias), by its environment variable, on a
// parent command, or not at all.
// The flags with cached names (stringFlag and its kin) answer alike.
func TestIsSetAgreesWithUrfave(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprint("cached names ", cached), func(t *testing.T) { testIsSetAgreesWithUrfave(t, cached) })
	}
}

func testIsSetAgreesWithUrfave(t *testing.T, cached bool) {
	flags := func() []cli.Flag {
		plain := &cli.StringFlag{Name: "plain", EnvVars: []string{"ACP_BRIDGE_TEST_PLAIN"}}
		aliased := &cli.StringFlag{Name: "aliased", Aliases: []string{"a"}}
		flag := &cli.BoolFlag{Name: "flag"}
		list := &cli.StringSliceFlag{Name: "list"}
		fs := []cli.Flag{plain, aliased, flag, list}
		if cached {
			fs = []cli.Flag{cachedNames(plain), cachedNames(aliased), cachedBoolNames(flag), cachedSliceNames(list)}
		}
		return append(fs, &cli.DurationFlag{Name: "wait"}, &cli.IntFlag{Name: "count"})
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

// A flag's cached names are what urfave/cli's FlagNames makes of its Name
// and Aliases, for every flag of every command: FlagNames strips commas
// and white space, which no name here has.
func TestFlags_CachedNamesAreFlagNames(t *testing.T) {
	cached := 0
	var walk func(path string, flags []cli.Flag, cmds []*cli.Command)
	walk = func(path string, flags []cli.Flag, cmds []*cli.Command) {
		for _, f := range flags {
			var name string
			var aliases []string
			switch f := f.(type) {
			case *stringFlag:
				name, aliases = f.Name, f.Aliases
			case *stringSliceFlag:
				name, aliases = f.Name, f.Aliases
			case *boolFlag:
				name, aliases = f.Name, f.Aliases
			default:
				continue
			}
			cached++
			if got, want := f.Names(), cli.FlagNames(name, aliases); !slices.Equal(got, want) {
				t.Errorf("%s: flag %q has names %q, FlagNames says %q", path, name, got, want)
			}
		}
		for _, c := range cmds {
			walk(path+" "+c.Name, c.Flags, c.Subcommands)
		}
	}
	app := newApp()
	walk("acp-bridge", append(app.Flags, cli.HelpFlag, cli.VersionFlag), app.Commands)
	if cached < 40 {
		t.Errorf("only %d flags have cached names; the relay's alone have more", cached)
	}
}
