package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
)

func init() {
	// `acp-bridge --version` prints what `acp-bridge version` prints.
	cli.VersionPrinter = func(c *cli.Context) {
		fmt.Fprintln(c.App.Writer, versionLine())
	}
	// Every command has these two: their names are looked up as often as
	// the others' (see stringFlag).
	if f, ok := cli.HelpFlag.(*cli.BoolFlag); ok {
		cli.HelpFlag = cachedBoolNames(f)
	}
	if f, ok := cli.VersionFlag.(*cli.BoolFlag); ok {
		cli.VersionFlag = cachedBoolNames(f)
	}
}

// commonFlags are the flags every subcommand accepts after its name too
// (`acp-bridge demo --log-level debug`): the configuration file and the
// logging flags, copied from serveFlags so that usage texts and environment
// twins stay one.
func commonFlags() []cli.Flag {
	return pickFlags(launch.FlagConfig, flagProfile, launch.FlagLogLevel, launch.FlagLogFile, launch.FlagLogFormat)
}

// commonFlagsUsing is commonFlags with only the named ones listed in the
// command's help: the others are accepted after every subcommand alike
// (scripts pass --config everywhere) but do nothing for this one, so its
// help does not offer them.
func commonFlagsUsing(names ...string) []cli.Flag {
	flags := commonFlags()
	for _, f := range flags {
		if sf, ok := f.(*stringFlag); ok && !slices.Contains(names, sf.Name) {
			sf.Hidden = true
		}
	}
	return flags
}

// pickFlags returns new flags for the serve flags with the given names, in
// serveFlags' order.
func pickFlags(names ...string) []cli.Flag {
	var out []cli.Flag
	for _, s := range serveFlagSpecs {
		if slices.Contains(names, s.name) {
			out = append(out, s.build())
		}
	}
	return out
}

// lineage reads a flag where it was given: on the subcommand or on any
// command above it. urfave/cli's own lookup stops at the nearest command
// that defines the flag, set or not, so a flag defined on both the root and
// a subcommand would otherwise lose the root's value.
type lineage struct{ c *cli.Context }

// at returns the innermost context in which name was set (on its command
// line or by its environment twin), else the current one: the nearest
// definition's default applies, and every copy has the same default.
func (l lineage) at(name string) *cli.Context {
	for _, c := range l.c.Lineage() {
		if isSet(c, name) {
			return c
		}
	}
	return l.c
}

// isSet is c.IsSet(name) at a fraction of its cost. IsSet, when the
// command line did not give name, looks the flag up among every flag of
// c's lineage by Names(), which runs a regexp over each flag's names (a
// urfave/cli v1 migration check): some forty flags for each of the dozens
// of lookups a start makes came to half the instructions the bridge runs
// from its spawn to its first answer. isSet takes, as IsSet does, the
// first definition of name in c's lineage, and reports whether its
// command line gave it (LocalFlagNames, the flag set's own record) or its
// environment twin did (the flag's IsSet).
func isSet(c *cli.Context, name string) bool {
	for _, cc := range c.Lineage() {
		if cc.Command == nil {
			continue
		}
		for _, f := range cc.Command.Flags {
			n, aliased := flagName(f)
			switch {
			case n != name:
				continue
			case aliased:
				return cc.IsSet(name) // given maybe by an alias: IsSet knows
			case f.IsSet():
				return true
			}
			return slices.Contains(cc.LocalFlagNames(), name)
		}
	}
	return false
}

// stringFlag, stringSliceFlag and boolFlag are urfave/cli's flags with
// their Names worked out once. urfave/cli works them out at every call (a
// regular expression over each name), and its IsSet looks a flag up by
// scanning every flag's Names: before running a command it asks IsSet of
// each of its flags (runFlagActions), which for the relay's 40-odd flags
// made about 800 Names calls, 2% of a start's samples (perf, 40 spawns).
// The names are the flag's Name and Aliases, which FlagNames would return
// for names without commas or spaces (TestFlags_CachedNamesAreFlagNames).
// Every other method is the embedded flag's, so help, completion and
// parsing see the flag they always did.
type stringFlag struct {
	*cli.StringFlag
	names []string
}

func (f *stringFlag) Names() []string { return f.names }

func cachedNames(f *cli.StringFlag) *stringFlag {
	return &stringFlag{f, append([]string{f.Name}, f.Aliases...)}
}

type stringSliceFlag struct {
	*cli.StringSliceFlag
	names []string
}

func (f *stringSliceFlag) Names() []string { return f.names }

func cachedSliceNames(f *cli.StringSliceFlag) *stringSliceFlag {
	return &stringSliceFlag{f, append([]string{f.Name}, f.Aliases...)}
}

type boolFlag struct {
	*cli.BoolFlag
	names []string
}

func (f *boolFlag) Names() []string { return f.names }

func cachedBoolNames(f *cli.BoolFlag) *boolFlag {
	return &boolFlag{f, append([]string{f.Name}, f.Aliases...)}
}

// flagName returns f's name, read from the field rather than by Names()
// (see isSet), and whether f has aliases.
func flagName(f cli.Flag) (name string, aliased bool) {
	switch f := f.(type) {
	case *stringFlag:
		return f.Name, len(f.Aliases) > 0
	case *stringSliceFlag:
		return f.Name, len(f.Aliases) > 0
	case *boolFlag:
		return f.Name, len(f.Aliases) > 0
	case *cli.StringFlag:
		return f.Name, len(f.Aliases) > 0
	case *cli.BoolFlag:
		return f.Name, len(f.Aliases) > 0
	case *cli.StringSliceFlag:
		return f.Name, len(f.Aliases) > 0
	case *cli.DurationFlag:
		return f.Name, len(f.Aliases) > 0
	case *cli.IntFlag:
		return f.Name, len(f.Aliases) > 0
	}
	names := f.Names()
	return names[0], len(names) > 1
}

func (l lineage) String(name string) string          { return l.at(name).String(name) }
func (l lineage) StringSlice(name string) []string   { return l.at(name).StringSlice(name) }
func (l lineage) Bool(name string) bool              { return l.at(name).Bool(name) }
func (l lineage) IsSet(name string) bool             { return isSet(l.at(name), name) }
func (l lineage) Args() cli.Args                     { return l.c.Args() }
func (l lineage) Int(name string) int                { return l.at(name).Int(name) }
func (l lineage) Duration(name string) time.Duration { return l.at(name).Duration(name) }

// quietSettings are the logging settings of a command that prints for a
// person (demo, doctor): warnings and errors only unless --log-level asks
// for more, in --log-format, to stderr or --log-file.
func quietSettings(c *cli.Context) (launch.Settings, error) {
	l := lineage{c}
	s := launch.Settings{LogLevel: hclog.Warn}
	if l.IsSet(launch.FlagLogLevel) {
		lv, err := launch.ParseLevel(l.String(launch.FlagLogLevel))
		if err != nil {
			return s, launch.Usagef("--%s: %v", launch.FlagLogLevel, err)
		}
		s.LogLevel = lv
	}
	if l.IsSet(launch.FlagLogFile) {
		s.LogFile = l.String(launch.FlagLogFile)
	}
	if l.IsSet(launch.FlagLogFormat) {
		if err := launch.CheckLogFormat(l.String(launch.FlagLogFormat)); err != nil {
			return s, err
		}
		s.LogFormat = strings.ToLower(l.String(launch.FlagLogFormat))
	}
	return s, nil
}

// dialectsJSON writes the dialects as a JSON array for scripts: name, kind
// (go, profile, user), links (shared or per-session) and summary.
func dialectsJSON(w io.Writer) error {
	type entry struct {
		Name    string `json:"name"`
		Kind    string `json:"kind"`
		Links   string `json:"links"`
		Summary string `json:"summary"`
	}
	out := []entry{}
	for _, name := range launch.DialectNames() {
		d := launch.Dialects()[name]
		links := "shared"
		if d.PerSession {
			links = "per-session"
		}
		out = append(out, entry{d.Name, launch.DialectKind(name), links, d.Summary})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// agentWithoutConfig is the error for --agent NAME when there is no
// configuration file at the default path, which it names: otherwise the
// user is told only that no agent is configured, not where one was sought.
func agentWithoutConfig(f launch.Flags, path string, explicit bool) error {
	// With --url or a command the usage error that they cannot be
	// combined says more.
	if f.Agent == "" || f.URL != "" || len(f.Argv) > 0 || explicit || path == "" {
		return nil
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("--%s %s: no configuration file at %s, the default path (give --%s FILE, or create it with 'acp-bridge config init')",
		launch.FlagAgent, f.Agent, path, launch.FlagConfig)
}

// harden gives every command and subcommand of app the top level's
// behaviour, in one walk of the tree rather than a patch per command:
// usage errors on stderr with a suggestion and exit status 2
// (onUsageError), a mistyped subcommand named as such with the nearest
// one, and arguments refused where a command takes none. A command takes
// arguments when its ArgsUsage says so; "[-- COMMAND [ARGS...]]" means
// only an agent command after "--". And the runtime's default number of
// Ps: only the stdio relay, the app's own action, runs on one
// (package procs).
func harden(app *cli.App) {
	for _, cmd := range app.Commands {
		hardenCommand(cmd)
	}
}

func hardenCommand(cmd *cli.Command) {
	cmd.OnUsageError = onUsageError
	// "help" as a word is handled below, like the root's: a help
	// subcommand would list itself among the subcommands.
	cmd.HideHelpCommand = true
	inner := cmd.Action
	switch {
	case len(cmd.Subcommands) > 0:
		// The words after a command with subcommands name one of them:
		// any other is a mistyped subcommand, not an argument.
		cmd.Action = func(c *cli.Context) error {
			c.App.Metadata["command"] = commandName(c)
			if c.Args().Present() {
				return subcommandWord(c, cmd)
			}
			if inner == nil {
				return cli.ShowSubcommandHelp(c)
			}
			return inner(c)
		}
		for _, sub := range cmd.Subcommands {
			hardenCommand(sub)
		}
	case inner != nil:
		cmd.Action = func(c *cli.Context) error {
			c.App.Metadata["command"] = commandName(c)
			if err := checkArgs(c, cmd); err != nil {
				return err
			}
			return inner(c)
		}
	}
}

// subcommandWord answers a word after a command with subcommands that
// names none of them: help, or a usage error with the nearest name.
func subcommandWord(c *cli.Context, cmd *cli.Command) error {
	word := c.Args().First()
	if word == "help" {
		if name := c.Args().Get(1); name != "" && cmd.Command(name) != nil {
			return cli.ShowCommandHelp(c, name)
		}
		return cli.ShowSubcommandHelp(c)
	}
	var names []string
	for _, sub := range cmd.Subcommands {
		if !sub.Hidden {
			names = append(names, sub.Names()...)
		}
	}
	hint := ""
	if s := launch.Nearest(word, names); s != "" {
		hint = fmt.Sprintf(" Did you mean %q?", s)
	}
	return launch.Usagef("%q is not a subcommand of %s.%s Its subcommands are: %s", word, commandName(c), hint, strings.Join(names, ", "))
}

// checkArgs refuses the arguments a command does not take.
func checkArgs(c *cli.Context, cmd *cli.Command) error {
	if !c.Args().Present() {
		return nil
	}
	switch {
	case strings.HasPrefix(cmd.ArgsUsage, "[-- "):
		if c.App.Metadata["dashdash"] == true {
			return nil
		}
		return launch.Usagef("%q is not an argument of %s. An agent command goes after --: acp-bridge %s -- %s",
			c.Args().First(), commandName(c), commandName(c), strings.Join(c.Args().Slice(), " "))
	case cmd.ArgsUsage != "":
		return nil
	case strings.HasSuffix(c.Args().First(), ".hcl"):
		return launch.Usagef("%s takes no arguments; give the file with --%s %s", commandName(c), launch.FlagConfig, c.Args().First())
	}
	return launch.Usagef("%s takes no arguments; got %q", commandName(c), strings.Join(c.Args().Slice(), " "))
}
