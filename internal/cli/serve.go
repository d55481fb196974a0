package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/hcl/v2"
	"github.com/urfave/cli/v2"
)

// serveFlags returns new flags for all of serveFlagSpecs: the relay's
// flags, which the root command, config show, doctor and serve take whole
// (other commands pick a few: pickFlags).
func serveFlags() []cli.Flag {
	flags := make([]cli.Flag, len(serveFlagSpecs))
	for i, s := range serveFlagSpecs {
		flags[i] = s.build()
	}
	return flags
}

// A flagSpec is one of serveFlags, as data: each command that takes the
// flag gets a flag of its own, built from it (urfave/cli records on a flag
// whether it was set, and commonFlagsUsing hides some per command), and
// pickFlags builds only the flags asked for. Building every serve flag for
// each of the dozen commands that take a few of them made half of a
// start's command-line work (about 650 flags, 2,000 allocations), which
// an editor waits for before the bridge starts its agent.
type flagSpec struct {
	name, usage string
	kind        flagKind
	value       func() string // a string flag's default (nil: none)
}

type flagKind int

const (
	kindString flagKind = iota // --name VALUE
	kindList                   // --name VALUE, repeatable
	kindSwitch                 // --name, true or false
)

// build returns a new flag of s, its environment twin set.
func (s flagSpec) build() cli.Flag {
	switch s.kind {
	case kindList:
		return cachedSliceNames(&cli.StringSliceFlag{Name: s.name, Usage: s.usage, EnvVars: envTwin(s.name)})
	case kindSwitch:
		return cachedBoolNames(&cli.BoolFlag{Name: s.name, Usage: s.usage, EnvVars: envTwin(s.name)})
	}
	value := ""
	if s.value != nil {
		value = s.value()
	}
	return cachedNames(&cli.StringFlag{Name: s.name, Usage: s.usage, Value: value, EnvVars: envTwin(s.name)})
}

// serveFlagSpecs are serveFlags, in the order help lists them: the
// relay's own, then the session store's.
var serveFlagSpecs = slices.Concat(relayFlagSpecs, sessionFlagSpecs)

var relayFlagSpecs = []flagSpec{
	{name: launch.FlagConfig, usage: "configuration `FILE`", value: config.DefaultPath},
	{name: launch.FlagAgent, usage: "serve the configured agent `NAME` (default: default_agent, or the only one)"},
	{name: launch.FlagURL, usage: "serve an ad-hoc agent at this ws://, wss://, or (ACP remote transport) http:// or https:// `URL`"},
	{name: launch.FlagDialect, usage: "the agent's `DIALECT` (see 'acp-bridge dialects')", value: func() string { return config.DefaultDialect }},
	{name: flagProfile, usage: "add the rule profile in this `FILE` as a dialect named by the file's base name, and select it unless --dialect or --agent is given ('acp-bridge dialects new NAME' writes one)"},
	{name: launch.FlagHeader, usage: "send the handshake header `NAME=ENVVAR`, its value read from the environment variable ENVVAR (repeatable; URL agents: ws://, and every request to http://)", kind: kindList},
	{name: launch.FlagSubprotocol, usage: "offer the WebSocket subprotocol `NAME` (repeatable; websocket agents)", kind: kindList},
	{name: launch.FlagCAFile, usage: "trust the CA certificates in this PEM `FILE` for wss:// and https:// (URL agents)"},
	{name: launch.FlagConnectTimeout, usage: "bound the WebSocket dial and handshake to `DURATION` (default 10s)"},
	{name: launch.FlagPingPeriod, usage: "WebSocket ping interval `DURATION`; 0s derives it from --pong-wait, off disables keepalive"},
	{name: launch.FlagPongWait, usage: "how long (`DURATION`) a WebSocket agent may stay silent (default 30s)"},
	{name: launch.FlagLogLevel, usage: "log `LEVEL`: trace, debug, info, warn, error or off (default info)"},
	{name: launch.FlagLogFile, usage: "append logs to `FILE` instead of stderr"},
	{name: launch.FlagLogFormat, usage: "log `FORMAT`: text, or json (one JSON object a line, for log collectors)"},
	{name: launch.FlagMaxMessage, usage: "largest editor message `SIZE`, such as 64MiB (default 64MiB)"},
	{name: launch.FlagQueueBytes, usage: "budget (`SIZE`) of each queue toward a slow peer; when full, the bridge stops reading the side that fills it (default 128KiB)"},
	{name: launch.FlagRequestTimeout, usage: "timeout (`DURATION`) of editor requests other than prompts; 0s or off disables (default 60s)"},
	{name: launch.FlagCancelGrace, usage: "how long (`DURATION`) a cancelled prompt may take to end (default 5s)"},
	{name: launch.FlagAgentProtocol, usage: "ACP `VERSION` to speak to an acp agent: 1 or 2 (default: ask for 2, take what the agent answers)"},
	{name: launch.FlagEditorProtocol, usage: "ACP `VERSION` spoken to the editor: 1, 2 or auto (default auto: the editor's initialize chooses)"},
	{name: launch.FlagShim, usage: "compliance shim `MODE` for acp agents: on, off, report (per-rule summary on stderr at exit) or report=FILE (JSON)"},
	{name: launch.FlagShimDisable, usage: "switch off compliance shim rules by `NAME` (comma-separated, repeatable)", kind: kindList},
	{name: launch.FlagTrace, usage: "record every message on both hops, and the bridge's decisions, as NDJSON in a new `FILE` (%p in it: the process id; see 'acp-bridge trace view')"},
	{name: launch.FlagTraceAppend, usage: "add to an existing --trace FILE instead of refusing it", kind: kindSwitch},
	{name: launch.FlagTraceMax, usage: "stop the trace at `SIZE`, such as 100MiB, with a final trace-truncated note (default no cap)"},
}

func flagsFrom(ctx *cli.Context) launch.Flags {
	// Flags may be given before or after a subcommand (doctor, config
	// show): read each where it was set.
	c := lineage{ctx}
	f := launch.Flags{
		Agent:          c.String(launch.FlagAgent),
		URL:            c.String(launch.FlagURL),
		Dialect:        c.String(launch.FlagDialect),
		Headers:        c.StringSlice(launch.FlagHeader),
		Subprotocols:   c.StringSlice(launch.FlagSubprotocol),
		CAFile:         c.String(launch.FlagCAFile),
		ConnectTimeout: c.String(launch.FlagConnectTimeout),
		PingPeriod:     c.String(launch.FlagPingPeriod),
		PongWait:       c.String(launch.FlagPongWait),
		LogLevel:       c.String(launch.FlagLogLevel),
		LogFile:        c.String(launch.FlagLogFile),
		LogFormat:      c.String(launch.FlagLogFormat),
		MaxMessage:     c.String(launch.FlagMaxMessage),
		QueueBytes:     c.String(launch.FlagQueueBytes),
		RequestTimeout: c.String(launch.FlagRequestTimeout),
		CancelGrace:    c.String(launch.FlagCancelGrace),
		AgentProtocol:  c.String(launch.FlagAgentProtocol),
		EditorProtocol: c.String(launch.FlagEditorProtocol),
		Shim:           c.String(launch.FlagShim),
		ShimDisable:    c.StringSlice(launch.FlagShimDisable),
		Argv:           c.Args().Slice(),
		Set:            map[string]bool{},
	}
	// IsSet, unlike FlagNames, also counts a flag given by its env twin.
	for _, spec := range serveFlagSpecs {
		if c.IsSet(spec.name) {
			f.Set[spec.name] = true
		}
	}
	if path := c.String(flagProfile); path != "" && !f.Set[launch.FlagDialect] && f.Agent == "" {
		f.Dialect, f.Set[launch.FlagDialect] = profileName(path), true
	}
	return f
}

// flagProfile is --profile FILE: a rule profile kept in a file of its own,
// next to the agent it describes, rather than in the configuration.
const flagProfile = "profile"

// profileName is the dialect name of a profile file: its base name without
// the extension, as for the profiles shipped in the binary.
func profileName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// loadConfig loads the configuration named by --config. A missing file is
// fine when it is the default one; otherwise problems are written to stderr
// and returned as a diagError.
// profile, when not "", is a --profile FILE added to the configuration's
// dialects.
func loadConfig(path string, explicit bool, profile string) (*config.Config, error) {
	cfg := &config.Config{Files: map[string]*hcl.File{}}
	var diags hcl.Diagnostics
	if path != "" && !explicit {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			path = ""
		}
	}
	if path != "" {
		if err := unreadableConfig(path); err != nil {
			return nil, err
		}
		cfg, diags = config.Load(path)
	}
	if profile != "" && !diags.HasErrors() {
		diags = append(diags, addProfile(cfg, profile)...)
	}
	if !diags.HasErrors() {
		diags = append(diags, launch.AddUserDialects(cfg)...)
	}
	if len(diags) > 0 {
		_ = config.WriteDiagnostics(os.Stderr, cfg.Files, diags)
	}
	if diags.HasErrors() {
		return nil, launch.ReportedError{Err: diags}
	}
	return cfg, nil
}

// addProfile adds the rule profile file path (--profile) to cfg's
// dialects, as every command that takes --profile does; the caller compiles
// it with the others (launch.AddUserDialects).
func addProfile(cfg *config.Config, path string) hcl.Diagnostics {
	ud, files, diags := config.LoadProfile(path)
	if cfg.Files == nil {
		cfg.Files = map[string]*hcl.File{}
	}
	maps.Copy(cfg.Files, files)
	if ud == nil {
		return diags
	}
	for _, other := range cfg.Dialects {
		if other.Name == ud.Name {
			return append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Dialect declared twice",
				Detail:  fmt.Sprintf("--profile %s is dialect %q, which the configuration declares too (%s); rename the file or drop one.", path, ud.Name, other.DeclRange),
				Subject: ud.DeclRange.Ptr()})
		}
	}
	cfg.Dialects = append(cfg.Dialects, ud)
	return diags
}

// resolvedAgent is what serving and doctor both derive from the command
// line and the configuration: the agent, its dialect and the settings.
type resolvedAgent struct {
	flags         launch.Flags
	cfg           *config.Config
	settings      launch.Settings
	spec          launch.Agent
	dialect       translate.Dialect
	newTranslator func() translate.Translator
}

// resolveAgent resolves the agent the command line names, the same way for
// every command that talks to it, so that doctor checks exactly what
// serving would run.
func resolveAgent(c *cli.Context) (resolvedAgent, error) {
	return resolveAgentFlags(c, flagsFrom(c))
}

// resolveAgentFlags is resolveAgent from flags already read, for a command
// whose arguments are not all the agent's command (prompt's TEXT).
func resolveAgentFlags(c *cli.Context, f launch.Flags) (resolvedAgent, error) {
	r := resolvedAgent{flags: f}
	path, explicit := configPath(c)
	if err := agentWithoutConfig(r.flags, path, explicit); err != nil {
		return r, err
	}
	var err error
	if r.cfg, err = loadConfig(path, explicit, lineage{c}.String(flagProfile)); err != nil {
		return r, err
	}
	if r.settings, err = launch.ResolveSettings(r.cfg, r.flags); err != nil {
		return r, err
	}
	if r.spec, err = launch.ResolveAgent(r.cfg, r.flags, os.LookupEnv); err != nil {
		return r, err
	}
	r.dialect, r.newTranslator, err = launch.Configure(r.spec, r.cfg.Files, os.Stderr)
	return r, err
}

func serveAction(c *cli.Context) error {
	if c.Args().Len() > 0 && c.App.Metadata["dashdash"] != true {
		// A bare word is a mistyped subcommand far more often than an
		// agent command, and running it would start whatever program it
		// names.
		word := c.Args().First()
		if word == "help" {
			return cli.ShowAppHelp(c)
		}
		var names []string
		for _, cmd := range c.App.Commands {
			names = append(names, cmd.Names()...)
		}
		hint := ""
		if s := launch.Nearest(word, names); s != "" {
			hint = fmt.Sprintf(" Did you mean %q?", s)
		}
		return launch.Usagef("%q is not a subcommand.%s An agent command goes after --: acp-bridge [flags] -- %s",
			word, hint, strings.Join(c.Args().Slice(), " "))
	}
	r, err := resolveAgent(c)
	if err != nil {
		if launch.IsTerminal(os.Stdin) && strings.HasPrefix(err.Error(), "no agent to serve") {
			return launch.Usagef("%v. acp-bridge is started by an editor as its agent; to try it by hand run 'acp-bridge demo', to check an agent 'acp-bridge doctor'", err)
		}
		return err
	}
	f, cfg, s, spec, dialect, newTranslator := r.flags, r.cfg, r.settings, r.spec, r.dialect, r.newTranslator
	shim, err := launch.ResolveShim(cfg, f)
	if err != nil {
		return err
	}
	newTranslator, report := shim.ApplyShim(&spec, dialect, newTranslator)
	if spec.Command != nil {
		// Fail now, in the terminal or the editor's log, rather than at
		// the editor's initialize.
		if _, err := exec.LookPath(spec.Command.Path); err != nil {
			return fmt.Errorf("agent command: %w", err)
		}
	}

	defer scrubStderr(spec.Secrets())() // crash output too: see crash_unix.go
	scrubber := launch.NewScrubber(spec.Secrets()...)
	logger, closeLog, err := launch.NewScrubbedLogger(s, scrubber)
	if err != nil {
		return err
	}
	defer closeLog.Close()
	for _, name := range spec.Ignored {
		logger.Warn("flag applies to websocket agents only; ignored", "flag", name)
	}

	// From here on fd 1 is the ACP stream's alone.
	editorOut, err := reserveStdout()
	if err != nil {
		logger.Warn("could not divert stray stdout writes to stderr; serving on stdout as is", "error", err)
		editorOut = os.Stdout
	}

	b := launch.NewBridge(spec, dialect, newTranslator, s, logger, versionString())
	if spec.Command != nil && !dialect.NoControlLink {
		// The child agent starts up while the bridge does, rather than
		// after the editor's initialize (launch.Prestart).
		var stopEarly func()
		b.Dial, stopEarly = launch.Prestart(c.Context, b.Dial)
		defer stopEarly()
	}
	sessions, err := setupSessions(c, cfg, spec, b, logger, s.MaxMessage, nil)
	if err != nil {
		return err
	}
	defer sessions.Close()
	story := &bridge.StoryLog{Logger: logger}
	story.Attach(b)
	shim.Hook(b, report)
	closeTrace, err := startTrace(c, b, scrubber)
	if err != nil {
		return err
	}
	defer closeTrace(logger)
	if launch.IsTerminal(os.Stdin) {
		// A person ran it by hand: nothing will happen until they type ACP.
		fmt.Fprintln(os.Stderr, "acp-bridge: waiting for ACP messages on stdin: an editor starts acp-bridge as its agent; to try it by hand run 'acp-bridge demo', to check an agent 'acp-bridge doctor' (Ctrl-D ends)")
	}
	in, polled := editorInput()
	logger.Info("serving", "version", versionString(), "agent", spec.Desc, "procs", relayProcs(polled))
	err = b.Serve(c.Context, in, editorOut)
	story.End(stopReason(c.Context, err))
	if rerr := report.Finish(os.Stderr); rerr != nil {
		logger.Error("could not write the compliance shim report", "error", rerr)
	}
	if err != nil && c.Context.Err() == nil {
		logger.Error("bridge stopped", "error", err)
		return launch.ReportedError{Err: err}
	}
	logger.Debug("bridge stopped", "reason", stopReason(c.Context, err))
	return nil
}

func stopReason(ctx context.Context, err error) string {
	switch {
	case ctx.Err() != nil:
		return "signal"
	case err == nil:
		return "editor closed stdin"
	default:
		return err.Error()
	}
}
