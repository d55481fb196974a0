package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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
}

// commonFlags are the flags every subcommand accepts after its name too
// (`acp-bridge demo --log-level debug`): the configuration file and the
// logging flags, copied from serveFlags so that usage texts and environment
// twins stay one.
func commonFlags() []cli.Flag {
	return pickFlags(launch.FlagConfig, launch.FlagLogLevel, launch.FlagLogFile, launch.FlagLogFormat)
}

// pickFlags returns the serve flags with the given names, in serveFlags'
// order.
func pickFlags(names ...string) []cli.Flag {
	var out []cli.Flag
	for _, f := range serveFlags() {
		for _, n := range names {
			if f.Names()[0] == n {
				out = append(out, f)
			}
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
		if c.IsSet(name) {
			return c
		}
	}
	return l.c
}

func (l lineage) String(name string) string          { return l.at(name).String(name) }
func (l lineage) StringSlice(name string) []string   { return l.at(name).StringSlice(name) }
func (l lineage) Bool(name string) bool              { return l.at(name).Bool(name) }
func (l lineage) IsSet(name string) bool             { return l.at(name).IsSet(name) }
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
