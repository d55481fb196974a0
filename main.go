// Command acp-bridge lets an editor that speaks the Agent Client Protocol
// (ACP v1, newline-delimited JSON-RPC on stdio) use an agent that speaks
// another dialect, over a WebSocket or a child process's stdio. The editor
// spawns acp-bridge as its agent:
//
//	acp-bridge                                  # the configured default agent
//	acp-bridge --agent NAME                     # a configured agent
//	acp-bridge --url ws://127.0.0.1:8765/acp    # an ad-hoc WebSocket agent
//	acp-bridge --dialect acp-v0 -- gemini --experimental-acp
//
// Subcommands: version, config validate|show|init, doctor, dialects, demo, check,
// compare, trace view, replay, completion, man.
//
// This file is the composition root: it reads flags (each with an
// ACP_BRIDGE_* environment twin) and the HCL configuration, builds the logger,
// picks the agent and its dialect, and hands a bridge.Bridge the stdio. Stdout
// carries nothing but ACP while serving: usage errors and logs go to stderr,
// and stray writes to os.Stdout are diverted there too (see reserveStdout).
// Help and version, which are never serving, print to stdout like any other
// command's output.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/bridge/demo"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/rules"
	"github.com/urfave/cli/v2"
)

func main() {
	os.Exit(run(os.Args))
}

// run executes the command line and returns the exit status: 0, 1 for a
// runtime or configuration error, 2 for a usage error.
func run(args []string) int {
	if len(args) == 2 && args[1] == stderrFilterCommand {
		return stderrFilterMain() // see main_crash_unix.go
	}
	defer startCPUProfile()()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal starts the shutdown, restore the default
		// handling so that a second one kills a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	app := newApp()
	// Whether the agent command was given after "--": urfave/cli hands
	// bare words and words after "--" over alike.
	app.Metadata = map[string]any{"dashdash": slices.Contains(args, "--"), "args": args}
	err := app.RunContext(ctx, args)
	removeScratch()
	var ue launch.UsageError
	var re launch.ReportedError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		// Point to the help of the command that was run.
		help := "acp-bridge --help"
		if name, _ := app.Metadata["command"].(string); name != "" {
			help = "acp-bridge " + name + " --help"
		}
		fmt.Fprintf(os.Stderr, "acp-bridge: %v\nRun '%s' for usage.\n", ue.Err, help)
		return 2
	case errors.As(err, &re):
		return 1
	default:
		fmt.Fprintf(os.Stderr, "acp-bridge: %v\n", err)
		return 1
	}
}

// onUsageError turns urfave/cli's usage errors into exit status 2, adding
// the nearest flag to a mistyped one ("--ulr": did you mean "--url"?).
func onUsageError(c *cli.Context, err error, _ bool) error {
	const undefined = "flag provided but not defined: -"
	if c != nil && c.Command != nil && c.App.Metadata != nil {
		if name := commandName(c); name != c.App.Name {
			c.App.Metadata["command"] = name
		}
	}
	if msg := err.Error(); strings.HasPrefix(msg, undefined) {
		// The flag package names the flag with one dash whatever the user
		// typed; say it as people write it.
		name := strings.TrimLeft(strings.TrimPrefix(msg, undefined), "-")
		err = fmt.Errorf("unknown flag --%s", name)
		if c != nil && c.Command != nil {
			var names []string
			for _, f := range c.Command.Flags {
				names = append(names, f.Names()...)
			}
			if s := launch.Nearest(name, names); s != "" {
				return launch.UsageError{Err: fmt.Errorf("%w. Did you mean --%s?", err, s)}
			}
		}
	}
	return launch.UsageError{Err: err}
}

func envTwin(name string) []string {
	return []string{"ACP_BRIDGE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
}

func newApp() *cli.App {
	app := &cli.App{
		Name:      "acp-bridge",
		Usage:     "serve an ACP editor on stdio from an agent that speaks another dialect",
		UsageText: "acp-bridge [flags]\nacp-bridge [flags] --url ws://HOST:PORT/PATH\nacp-bridge [flags] -- COMMAND [ARGS...]\nacp-bridge COMMAND [flags]",
		Version:   versionString(),
		// Help and --version are asked for, never printed while serving, so
		// they go to stdout (`acp-bridge --help | grep url`). Usage errors
		// go to stderr without a help dump (onUsageError), so a mistyped
		// flag in an editor's agent settings writes nothing on the ACP
		// stream (ARCHITECTURE.md habit 15).
		Writer:    os.Stdout,
		ErrWriter: os.Stderr,
		// Exit codes are decided by run, not by urfave/cli calling os.Exit.
		ExitErrHandler:  func(*cli.Context, error) {},
		OnUsageError:    onUsageError,
		HideHelpCommand: true,
		Flags:           serveFlags(),
		Action:          serveAction,
		Commands: []*cli.Command{
			versionCommand(),
			{
				Name:  "config",
				Usage: "work with the configuration file",
				Subcommands: []*cli.Command{{
					Name:  "validate",
					Usage: "check the configuration file; print diagnostics to stderr",
					Flags: append(commonFlagsUsing(launch.FlagConfig), &cli.BoolFlag{
						Name:  "json",
						Usage: "print the result as a JSON object (ok, the file, the agents, the diagnostics), for scripts",
					}),
					Action: validateAction,
				}, {
					Name:  "show",
					Usage: "print the resolved configuration (secrets masked), the files read and what flags or environment overrode",
					Flags: append(serveFlags(), &cli.BoolFlag{
						Name:  "json",
						Usage: "print the resolved configuration as a JSON object, for scripts",
					}),
					Action: configShowAction,
				}, {
					Name:   "init",
					Usage:  "write a commented starter configuration file at --config's path; never overwrites",
					Flags:  commonFlagsUsing(launch.FlagConfig),
					Action: configInitAction,
				}},
			},
			{
				Name:   "dialects",
				Usage:  "list the agent dialects this binary speaks; 'dialects show NAME' prints a profile's HCL, 'dialects doc' the profile language",
				Action: dialectsAction,
				Flags: append(commonFlagsUsing(launch.FlagConfig), &cli.BoolFlag{
					Name:  "json",
					Usage: "print the list as a JSON array, for scripts",
				}),
				Subcommands: []*cli.Command{{
					Name:      "show",
					Usage:     "print the HCL of a shipped or configured rule profile",
					ArgsUsage: "NAME",
					Flags:     commonFlagsUsing(launch.FlagConfig),
					Action:    dialectsShowAction,
				}, dialectsDocCommand()},
			},
			{
				Name:  "demo",
				Usage: "play a scripted session against a built-in legacy agent",
				Flags: append(commonFlags(), &cli.BoolFlag{
					Name:  "raw",
					Usage: "print every ACP line and every agent frame instead of the readable view",
				}),
				Action: demoAction,
			},
			{
				Name:      "doctor",
				Usage:     "dial the agent you would serve, run initialize, session/new and, when the agent has not spoken yet or --prompt asks, one prompt turn; say what works and what to fix",
				UsageText: "acp-bridge doctor [--prompt TEXT] [--json] [--agent NAME | --url URL | -- COMMAND [ARGS...]]",
				ArgsUsage: "[-- COMMAND [ARGS...]]",
				Flags: append(serveFlags(),
					&cli.StringFlag{Name: "prompt", Usage: "run one whole prompt turn with `TEXT` and report its end, the time to the first update and the agent frames the dialect could not place"},
					&cli.BoolFlag{Name: "json", Usage: "print the report as one JSON object, for scripts"},
				),
				Action: doctorAction,
			},
			checkCommand(),
			compareCommand(),
			traceCommand(),
			replayCommand(),
			completionCommand(),
			manCommand(),
		},
	}
	harden(app)
	return app
}

func serveFlags() []cli.Flag {
	str := func(name, usage, value string) cli.Flag {
		return &cli.StringFlag{Name: name, Usage: usage, Value: value, EnvVars: envTwin(name)}
	}
	list := func(name, usage string) cli.Flag {
		return &cli.StringSliceFlag{Name: name, Usage: usage, EnvVars: envTwin(name)}
	}
	return append([]cli.Flag{
		&cli.StringFlag{Name: launch.FlagConfig, Usage: "configuration `FILE`", Value: config.DefaultPath(), EnvVars: envTwin(launch.FlagConfig)},
		str(launch.FlagAgent, "serve the configured agent `NAME` (default: default_agent, or the only one)", ""),
		str(launch.FlagURL, "serve an ad-hoc agent at this ws:// or wss:// `URL`", ""),
		str(launch.FlagDialect, "the agent's `DIALECT` (see 'acp-bridge dialects')", config.DefaultDialect),
		list(launch.FlagHeader, "send the handshake header `NAME=ENVVAR`, its value read from the environment variable ENVVAR (repeatable; websocket agents)"),
		list(launch.FlagSubprotocol, "offer the WebSocket subprotocol `NAME` (repeatable; websocket agents)"),
		str(launch.FlagCAFile, "trust the CA certificates in this PEM `FILE` for wss:// (websocket agents)", ""),
		str(launch.FlagConnectTimeout, "bound the WebSocket dial and handshake to `DURATION` (default 10s)", ""),
		str(launch.FlagPingPeriod, "WebSocket ping interval `DURATION`; 0s derives it from --pong-wait, off disables keepalive", ""),
		str(launch.FlagPongWait, "how long (`DURATION`) a WebSocket agent may stay silent (default 30s)", ""),
		str(launch.FlagLogLevel, "log `LEVEL`: trace, debug, info, warn, error or off (default info)", ""),
		str(launch.FlagLogFile, "append logs to `FILE` instead of stderr", ""),
		str(launch.FlagLogFormat, "log `FORMAT`: text, or json (one JSON object a line, for log collectors)", ""),
		str(launch.FlagMaxMessage, "largest editor message `SIZE`, such as 64MiB (default 64MiB)", ""),
		str(launch.FlagQueueBytes, "budget (`SIZE`) of each queue toward a slow peer; when full, the bridge stops reading the side that fills it (default 1MiB)", ""),
		str(launch.FlagRequestTimeout, "timeout (`DURATION`) of editor requests other than prompts; 0s or off disables (default 60s)", ""),
		str(launch.FlagCancelGrace, "how long (`DURATION`) a cancelled prompt may take to end (default 5s)", ""),
		str(launch.FlagShim, "compliance shim `MODE` for acp agents: on, off, report (per-rule summary on stderr at exit) or report=FILE (JSON)", ""),
		list(launch.FlagShimDisable, "switch off compliance shim rules by `NAME` (comma-separated, repeatable)"),
		str(launch.FlagTrace, "record every message on both hops, and the bridge's decisions, as NDJSON in a new `FILE` (%p in it: the process id; see 'acp-bridge trace view')", ""),
		&cli.BoolFlag{Name: launch.FlagTraceAppend, Usage: "add to an existing --trace FILE instead of refusing it", EnvVars: envTwin(launch.FlagTraceAppend)},
		str(launch.FlagTraceMax, "stop the trace at `SIZE`, such as 100MiB, with a final trace-truncated note (default no cap)", ""),
	}, sessionFlags()...)
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
		Shim:           c.String(launch.FlagShim),
		ShimDisable:    c.StringSlice(launch.FlagShimDisable),
		Argv:           c.Args().Slice(),
		Set:            map[string]bool{},
	}
	// IsSet, unlike FlagNames, also counts a flag given by its env twin.
	for _, fl := range serveFlags() {
		name := fl.Names()[0]
		if c.IsSet(name) {
			f.Set[name] = true
		}
	}
	return f
}

// loadConfig loads the configuration named by --config. A missing file is
// fine when it is the default one; otherwise problems are written to stderr
// and returned as a diagError.
func loadConfig(path string, explicit bool) (*config.Config, error) {
	if path == "" {
		return &config.Config{}, nil
	}
	if !explicit {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return &config.Config{}, nil
		}
	}
	if err := unreadableConfig(path); err != nil {
		return nil, err
	}
	cfg, diags := config.Load(path)
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
	r := resolvedAgent{flags: flagsFrom(c)}
	path, explicit := configPath(c)
	if err := agentWithoutConfig(r.flags, path, explicit); err != nil {
		return r, err
	}
	var err error
	if r.cfg, err = loadConfig(path, explicit); err != nil {
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

	defer scrubStderr(spec.Secrets())() // crash output too: see main_crash_unix.go
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
	sessions, err := setupSessions(c, cfg, spec, b, logger, s.MaxMessage)
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
	logger.Info("serving", "version", versionString(), "agent", spec.Desc)
	err = b.Serve(c.Context, editorInput(), editorOut)
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

func dialectsAction(c *cli.Context) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	if path, explicit := configPath(c); path != "" {
		// The configuration's own dialect blocks are listed too.
		if _, err := loadConfig(path, explicit); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return dialectsJSON(os.Stdout)
	}
	fmt.Fprintln(w, "NAME\tKIND\tLINKS\tSUMMARY")
	for _, name := range launch.DialectNames() {
		d := launch.Dialects()[name]
		links := "shared"
		if d.PerSession {
			links = "per-session"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", d.Name, launch.DialectKind(name), links, d.Summary)
	}
	return w.Flush()
}

func demoAction(c *cli.Context) error {
	// The demo prints to stdout; its logs stay quiet on stderr unless asked.
	s, err := quietSettings(c)
	if err != nil {
		return err
	}
	logger, closeLog, err := launch.NewLogger(s)
	if err != nil {
		return err
	}
	defer closeLog.Close()
	return demo.Run(c.Context, demo.Options{
		Raw:      c.Bool("raw"),
		Out:      os.Stdout,
		Logger:   logger,
		Version:  versionString(),
		Progress: launch.NewProgress(os.Stderr),
	})
}

func dialectsShowAction(c *cli.Context) error {
	name := c.Args().First()
	if name == "" {
		return launch.Usagef("dialects show needs a dialect NAME")
	}
	if src, ok := rules.Source(name); ok {
		_, err := os.Stdout.Write(src)
		return err
	}
	if path, explicit := configPath(c); path != "" {
		if _, err := loadConfig(path, explicit); err != nil {
			return err
		}
	}
	if ud := launch.UserDialects[name]; ud != nil {
		_, err := fmt.Fprintf(os.Stdout, "# from %s\n%s\n", ud.DeclRange, ud.Source)
		return err
	}
	if _, ok := launch.Dialects()[name]; ok {
		return fmt.Errorf("dialect %s is built into acp-bridge in Go; only rule profiles have HCL to show", name)
	}
	return launch.UnknownDialect(name)
}
