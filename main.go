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
// Subcommands: version, config validate, dialects, demo.
//
// This file is the composition root: it reads flags (each with an
// ACP_BRIDGE_* environment twin) and the HCL configuration, builds the logger,
// picks the agent and its dialect, and hands a bridge.Bridge the stdio. Stdout
// carries nothing but ACP while serving: usage errors, help and logs go to
// stderr, and stray writes to os.Stdout are diverted there too (see
// reserveStdout).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/bridge/demo"
	"github.com/acp-bridge/acp-bridge/legacy"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/acpv0"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// dialects are the agent protocols this binary speaks, by name. Nothing
// registers itself: adding a dialect means adding it here.
var dialects = map[string]translate.Dialect{
	acp.Dialect.Name:   acp.Dialect,
	acpv0.Dialect.Name: acpv0.Dialect,
}

func main() {
	os.Exit(run(os.Args))
}

// run executes the command line and returns the exit status: 0, 1 for a
// runtime or configuration error, 2 for a usage error.
func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal starts the shutdown, restore the default
		// handling so that a second one kills a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	err := newApp().RunContext(ctx, args)
	var ue usageError
	var re reportedError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "acp-bridge: %v\nRun 'acp-bridge --help' for usage.\n", ue.err)
		return 2
	case errors.As(err, &re):
		return 1
	default:
		fmt.Fprintf(os.Stderr, "acp-bridge: %v\n", err)
		return 1
	}
}

// usageError is a bad command line: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// reportedError is a failure already reported on stderr (configuration
// diagnostics, or the engine's error in the log): exit status 1.
type reportedError struct{ err error }

func (e reportedError) Error() string { return e.err.Error() }

func onUsageError(_ *cli.Context, err error, _ bool) error { return usageError{err} }

// flag names shared by the root command and subcommands.
const (
	flagConfig         = "config"
	flagAgent          = "agent"
	flagURL            = "url"
	flagDialect        = "dialect"
	flagHeader         = "header"
	flagSubprotocol    = "subprotocol"
	flagCAFile         = "ca-file"
	flagConnectTimeout = "connect-timeout"
	flagPingPeriod     = "ping-period"
	flagPongWait       = "pong-wait"
	flagLogLevel       = "log-level"
	flagLogFile        = "log-file"
	flagMaxMessage     = "max-message"
	flagRequestTimeout = "request-timeout"
	flagCancelGrace    = "cancel-grace"
)

func envTwin(name string) []string {
	return []string{"ACP_BRIDGE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
}

func newApp() *cli.App {
	return &cli.App{
		Name:      "acp-bridge",
		Usage:     "serve an ACP editor on stdio from an agent that speaks another dialect",
		UsageText: "acp-bridge [flags]\nacp-bridge [flags] --url ws://HOST:PORT/PATH\nacp-bridge [flags] -- COMMAND [ARGS...]\nacp-bridge COMMAND [flags]",
		Version:   versionString(),
		// urfave/cli writes help and "Incorrect Usage" to Writer, stdout by
		// default; in an editor's agent settings a mistyped flag would then
		// corrupt the ACP stream (ARCHITECTURE.md habit 15).
		Writer:    os.Stderr,
		ErrWriter: os.Stderr,
		// Exit codes are decided by run, not by urfave/cli calling os.Exit.
		ExitErrHandler:  func(*cli.Context, error) {},
		OnUsageError:    onUsageError,
		HideHelpCommand: true,
		Flags:           serveFlags(),
		Action:          serveAction,
		Commands: []*cli.Command{
			{
				Name:   "version",
				Usage:  "print the version to stdout",
				Action: versionAction,
			},
			{
				Name:  "config",
				Usage: "work with the configuration file",
				Subcommands: []*cli.Command{{
					Name:         "validate",
					Usage:        "check the configuration file; print diagnostics to stderr",
					OnUsageError: onUsageError,
					Flags: []cli.Flag{&cli.StringFlag{
						Name:  flagConfig,
						Usage: "configuration `FILE` (default: the global --config)",
					}},
					Action: validateAction,
				}},
				OnUsageError: onUsageError,
			},
			{
				Name:   "dialects",
				Usage:  "list the agent dialects this binary speaks",
				Action: dialectsAction,
			},
			{
				Name:         "demo",
				Usage:        "play a scripted session against a built-in legacy agent",
				OnUsageError: onUsageError,
				Flags: []cli.Flag{&cli.BoolFlag{
					Name:  "raw",
					Usage: "print every ACP line and every agent frame instead of the readable view",
				}},
				Action: demoAction,
			},
		},
	}
}

func serveFlags() []cli.Flag {
	str := func(name, usage, value string) cli.Flag {
		return &cli.StringFlag{Name: name, Usage: usage, Value: value, EnvVars: envTwin(name)}
	}
	list := func(name, usage string) cli.Flag {
		return &cli.StringSliceFlag{Name: name, Usage: usage, EnvVars: envTwin(name)}
	}
	return []cli.Flag{
		&cli.StringFlag{Name: flagConfig, Usage: "configuration `FILE`", Value: config.DefaultPath(), EnvVars: envTwin(flagConfig)},
		str(flagAgent, "serve the configured agent `NAME` (default: default_agent, or the only one)", ""),
		str(flagURL, "serve an ad-hoc agent at this ws:// or wss:// `URL`", ""),
		str(flagDialect, "the agent's `DIALECT` (see 'acp-bridge dialects')", config.DefaultDialect),
		list(flagHeader, "send the handshake header `NAME=ENVVAR`, its value read from the environment variable ENVVAR (repeatable; websocket agents)"),
		list(flagSubprotocol, "offer the WebSocket subprotocol `NAME` (repeatable; websocket agents)"),
		str(flagCAFile, "trust the CA certificates in this PEM `FILE` for wss:// (websocket agents)", ""),
		str(flagConnectTimeout, "bound the WebSocket dial and handshake (default 10s)", ""),
		str(flagPingPeriod, "WebSocket ping interval; 0s derives it from --pong-wait, off disables keepalive", ""),
		str(flagPongWait, "how long a WebSocket agent may stay silent (default 30s)", ""),
		str(flagLogLevel, "log `LEVEL`: trace, debug, info, warn, error or off (default info)", ""),
		str(flagLogFile, "append logs to `FILE` instead of stderr", ""),
		str(flagMaxMessage, "largest editor message, such as 64MiB (default 64MiB)", ""),
		str(flagRequestTimeout, "timeout of editor requests other than prompts; 0s or off disables (default 60s)", ""),
		str(flagCancelGrace, "how long a cancelled prompt may take to end (default 5s)", ""),
	}
}

// cliFlags are the serving flags in plain form, for the pure resolution
// functions. Set records which were given (on the command line or through
// their environment twin), since flags override the file only when given.
type cliFlags struct {
	Agent, URL, Dialect string
	Headers             []string // NAME=ENVVAR
	Subprotocols        []string
	CAFile              string
	ConnectTimeout      string
	PingPeriod          string
	PongWait            string
	LogLevel, LogFile   string
	MaxMessage          string
	RequestTimeout      string
	CancelGrace         string
	// Argv is the agent command after "--".
	Argv []string
	Set  map[string]bool
}

func flagsFrom(c *cli.Context) cliFlags {
	f := cliFlags{
		Agent:          c.String(flagAgent),
		URL:            c.String(flagURL),
		Dialect:        c.String(flagDialect),
		Headers:        c.StringSlice(flagHeader),
		Subprotocols:   c.StringSlice(flagSubprotocol),
		CAFile:         c.String(flagCAFile),
		ConnectTimeout: c.String(flagConnectTimeout),
		PingPeriod:     c.String(flagPingPeriod),
		PongWait:       c.String(flagPongWait),
		LogLevel:       c.String(flagLogLevel),
		LogFile:        c.String(flagLogFile),
		MaxMessage:     c.String(flagMaxMessage),
		RequestTimeout: c.String(flagRequestTimeout),
		CancelGrace:    c.String(flagCancelGrace),
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
	cfg, diags := config.Load(path)
	if len(diags) > 0 {
		_ = config.WriteDiagnostics(os.Stderr, cfg.Files, diags)
	}
	if diags.HasErrors() {
		return nil, reportedError{diags}
	}
	return cfg, nil
}

// settings are the bridge-wide settings after precedence is applied.
type settings struct {
	LogLevel       hclog.Level
	LogFile        string
	MaxMessage     int
	RequestTimeout time.Duration
	CancelGrace    time.Duration
}

// resolveSettings applies flags over the file over the defaults. Defaults
// that the engine applies to zero values are left zero.
func resolveSettings(cfg *config.Config, f cliFlags) (settings, error) {
	s := settings{
		LogLevel:       hclog.Info,
		LogFile:        cfg.LogFile,
		MaxMessage:     cfg.MaxMessage,
		RequestTimeout: cfg.RequestTimeout,
		CancelGrace:    cfg.CancelGrace,
	}
	level := cfg.LogLevel
	if f.Set[flagLogLevel] {
		level = f.LogLevel
	}
	if level != "" {
		l, err := parseLevel(level)
		if err != nil {
			return s, usagef("--%s: %v", flagLogLevel, err)
		}
		s.LogLevel = l
	}
	if f.Set[flagLogFile] {
		s.LogFile = f.LogFile
	}
	if f.Set[flagMaxMessage] {
		n, err := config.ParseSize(f.MaxMessage)
		if err == nil && (n < config.MessageSizeMin || n > config.MessageSizeMax) {
			err = fmt.Errorf("%s is outside the accepted range %s to %s", f.MaxMessage,
				config.FormatSize(config.MessageSizeMin), config.FormatSize(config.MessageSizeMax))
		}
		if err != nil {
			return s, usagef("--%s: %v", flagMaxMessage, err)
		}
		s.MaxMessage = int(n)
	}
	var err error
	if s.RequestTimeout, err = durationFlag(f, flagRequestTimeout, f.RequestTimeout, config.ZeroDisables, s.RequestTimeout); err != nil {
		return s, err
	}
	if s.CancelGrace, err = durationFlag(f, flagCancelGrace, f.CancelGrace, config.Positive, s.CancelGrace); err != nil {
		return s, err
	}
	return s, nil
}

func parseLevel(s string) (hclog.Level, error) {
	if strings.EqualFold(s, "off") {
		return hclog.Off, nil
	}
	l := hclog.LevelFromString(s)
	if l == hclog.NoLevel {
		return l, fmt.Errorf("%q is not one of trace, debug, info, warn, error, off", s)
	}
	return l, nil
}

// durationFlag returns the flag's duration when it was given, else fallback.
func durationFlag(f cliFlags, name, value string, rule config.DurationRule, fallback time.Duration) (time.Duration, error) {
	if !f.Set[name] {
		return fallback, nil
	}
	d, err := config.ParseDuration(value, rule)
	if err != nil {
		return 0, usagef("--%s: %v", name, err)
	}
	return d, nil
}

// agentSpec is the agent to serve after precedence is applied: exactly one
// of Command and WebSocket is set. Their Logger and, for per-session
// links, Dir are filled in by the Dial closure.
type agentSpec struct {
	Name    string
	Dialect string
	// Options is the dialect's options block; nil for ad-hoc agents.
	Options   hcl.Body
	Command   *legacy.Command
	WebSocket *legacy.WebSocket
	// Desc describes the agent for logs, without secrets.
	Desc string
	// Ignored lists WebSocket flags that were given for a command agent.
	Ignored []string
}

// webSocketFlags apply to WebSocket agents only.
var webSocketFlags = []string{flagHeader, flagSubprotocol, flagCAFile, flagConnectTimeout, flagPingPeriod, flagPongWait}

// resolveAgent picks the agent to serve: an ad-hoc one from --url or a
// command after "--", else the configured one --agent names (or the default
// agent). Flags override the configured agent's settings. lookupEnv reads the
// values of --header variables. It does no I/O.
func resolveAgent(cfg *config.Config, f cliFlags, lookupEnv func(string) (string, bool)) (agentSpec, error) {
	var spec agentSpec
	adHoc := f.URL != "" || len(f.Argv) > 0
	switch {
	case f.URL != "" && len(f.Argv) > 0:
		return spec, usagef("give either --%s or a command after --, not both", flagURL)
	case adHoc && f.Agent != "":
		return spec, usagef("--%s selects a configured agent; it cannot be combined with --%s or a command after --", flagAgent, flagURL)
	}

	var agent *config.Agent
	if adHoc {
		spec.Dialect = config.DefaultDialect
	} else {
		a, err := cfg.Agent(f.Agent)
		if err != nil {
			if len(cfg.Agents) == 0 {
				return spec, usagef("no agent to serve: give --%s URL, a command after --, or an agent block in the configuration file (--%s)", flagURL, flagConfig)
			}
			return spec, usageError{err}
		}
		agent = a
		spec.Name, spec.Dialect, spec.Options = a.Name, a.Dialect, a.Options
	}
	if f.Set[flagDialect] {
		spec.Dialect = f.Dialect
	}

	isWebSocket := f.URL != "" || agent != nil && agent.WebSocket != nil
	if !isWebSocket {
		cmd := &legacy.Command{}
		if adHoc {
			if f.Argv[0] == "" {
				return spec, usagef("the agent command after -- is empty")
			}
			cmd.Path, cmd.Args = f.Argv[0], f.Argv[1:]
			spec.Name = filepath.Base(f.Argv[0])
			spec.Desc = fmt.Sprintf("agent %q (dialect %s, command %s)", spec.Name, spec.Dialect, strings.Join(f.Argv, " "))
		} else {
			cmd.Path, cmd.Args = agent.Command[0], agent.Command[1:]
			cmd.Dir, cmd.StopGrace = agent.Dir, agent.StopGrace
			for k, v := range agent.Env {
				cmd.Env = append(cmd.Env, k+"="+string(v))
			}
			sort.Strings(cmd.Env)
			spec.Desc = agent.String()
		}
		spec.Command = cmd
		for _, name := range webSocketFlags {
			if f.Set[name] {
				spec.Ignored = append(spec.Ignored, "--"+name)
			}
		}
		return spec, nil
	}

	ws := &legacy.WebSocket{Header: http.Header{}}
	if adHoc {
		u, err := url.Parse(f.URL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			return spec, usagef("--%s must be a ws:// or wss:// URL", flagURL)
		}
		ws.URL = f.URL
		spec.Name = u.Host
	} else {
		c := agent.WebSocket
		ws.URL, ws.Subprotocols, ws.CAFile = c.URL, c.Subprotocols, c.CAFile
		ws.DialTimeout, ws.PingPeriod, ws.PongWait = c.ConnectTimeout, c.PingPeriod, c.PongWait
		for k, v := range c.Headers {
			ws.Header.Set(k, string(v))
		}
	}
	for _, h := range f.Headers {
		name, envVar, ok := strings.Cut(h, "=")
		name, envVar = strings.TrimSpace(name), strings.TrimSpace(envVar)
		if !ok || name == "" || envVar == "" {
			return spec, usagef("--%s %q: want NAME=ENVVAR, the header's value being read from the environment variable ENVVAR", flagHeader, h)
		}
		value, set := lookupEnv(envVar)
		if !set {
			return spec, usagef("--%s %s: environment variable %s is not set", flagHeader, name, envVar)
		}
		ws.Header.Set(name, value)
	}
	if f.Set[flagSubprotocol] {
		ws.Subprotocols = f.Subprotocols
	}
	if f.Set[flagCAFile] {
		ws.CAFile = f.CAFile
	}
	var err error
	if ws.DialTimeout, err = durationFlag(f, flagConnectTimeout, f.ConnectTimeout, config.Positive, ws.DialTimeout); err != nil {
		return spec, err
	}
	if ws.PingPeriod, err = durationFlag(f, flagPingPeriod, f.PingPeriod, config.ZeroDerives, ws.PingPeriod); err != nil {
		return spec, err
	}
	if ws.PongWait, err = durationFlag(f, flagPongWait, f.PongWait, config.Positive, ws.PongWait); err != nil {
		return spec, err
	}
	spec.WebSocket = ws
	if adHoc {
		spec.Desc = fmt.Sprintf("agent %q (dialect %s, websocket %s)", spec.Name, spec.Dialect, config.WebSocket{URL: f.URL}.RedactedURL())
	} else {
		spec.Desc = agent.String()
	}
	if len(f.Headers) > 0 {
		names := make([]string, 0, len(ws.Header))
		for k := range ws.Header {
			names = append(names, k)
		}
		sort.Strings(names)
		spec.Desc += ", headers " + strings.Join(names, ",")
	}
	return spec, nil
}

// newLogger builds the root logger: text with timestamps, to stderr or the
// log file (opened for appending; the caller closes it).
func newLogger(s settings) (hclog.Logger, io.Closer, error) {
	var out io.Writer = os.Stderr
	var closer io.Closer = nopCloser{}
	if s.LogFile != "" {
		f, err := os.OpenFile(s.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("log file: %w", err)
		}
		out, closer = f, f
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:   "acp-bridge",
		Level:  s.LogLevel,
		Output: out,
		Color:  hclog.ColorOff,
	}), closer, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// configure finds the dialect and decodes the agent's options with it,
// writing its diagnostics to stderr.
func configure(spec agentSpec, files map[string]*hcl.File) (translate.Dialect, func() translate.Translator, error) {
	d, ok := dialects[spec.Dialect]
	if !ok {
		return d, nil, usagef("unknown dialect %q; the known dialects are: %s", spec.Dialect, strings.Join(dialectNames(), ", "))
	}
	newTranslator, diags := d.Configure(spec.Options)
	if len(diags) > 0 {
		_ = config.WriteDiagnostics(os.Stderr, files, diags)
	}
	if diags.HasErrors() {
		return d, nil, reportedError{diags}
	}
	if newTranslator == nil {
		return d, nil, fmt.Errorf("dialect %s returned no translator", d.Name)
	}
	return d, newTranslator, nil
}

func serveAction(c *cli.Context) error {
	f := flagsFrom(c)
	cfg, err := loadConfig(c.String(flagConfig), c.IsSet(flagConfig))
	if err != nil {
		return err
	}
	s, err := resolveSettings(cfg, f)
	if err != nil {
		return err
	}
	spec, err := resolveAgent(cfg, f, os.LookupEnv)
	if err != nil {
		return err
	}
	dialect, newTranslator, err := configure(spec, cfg.Files)
	if err != nil {
		return err
	}
	if spec.Command != nil {
		// Fail now, in the terminal or the editor's log, rather than at
		// the editor's initialize.
		if _, err := exec.LookPath(spec.Command.Path); err != nil {
			return fmt.Errorf("agent command: %w", err)
		}
	}

	logger, closeLog, err := newLogger(s)
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

	maxMessage := s.MaxMessage
	if maxMessage == 0 {
		maxMessage = config.DefaultMaxMessage
	}
	dial := func(ctx context.Context, sp bridge.Spawn) (bridge.Link, error) {
		if spec.WebSocket != nil {
			w := *spec.WebSocket
			w.ReadLimit = int64(maxMessage)
			w.Logger = logger.Named("ws")
			if sp.Session != "" {
				w.Logger = w.Logger.With("session", sp.Session)
			}
			conn, err := w.Dial(ctx)
			if err != nil {
				return nil, err
			}
			return conn, nil
		}
		cmd := *spec.Command
		if sp.Cwd != "" {
			cmd.Dir = sp.Cwd
		}
		cmd.MaxLine = maxMessage
		// The child's stderr is logged line by line under the agent's name.
		cmd.Logger = logger.Named(spec.Name)
		if sp.Session != "" {
			cmd.Logger = cmd.Logger.With("session", sp.Session)
		}
		p, err := cmd.Start(ctx)
		if err != nil {
			return nil, err
		}
		return p, nil
	}

	b := &bridge.Bridge{
		Dialect:        dialect,
		NewTranslator:  newTranslator,
		Dial:           dial,
		AgentName:      spec.Name,
		Version:        versionString(),
		Logger:         logger,
		MaxMessage:     s.MaxMessage,
		RequestTimeout: s.RequestTimeout,
		CancelGrace:    s.CancelGrace,
	}
	logger.Info("serving", "version", versionString(), "agent", spec.Desc)
	err = b.Serve(c.Context, editorInput(), editorOut)
	if err != nil && c.Context.Err() == nil {
		logger.Error("bridge stopped", "error", err)
		return reportedError{err}
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

func versionAction(c *cli.Context) error {
	// Human-facing: stdout explicitly (App.Writer is stderr).
	_, err := fmt.Fprintf(os.Stdout, "acp-bridge %s\n", versionString())
	return err
}

func validateAction(c *cli.Context) error {
	path, explicit := c.String(flagConfig), c.IsSet(flagConfig)
	if path == "" {
		// The local flag shadows the global one; ask the parent context,
		// whose lookup reaches the root's flags (and their env twins).
		parent := c.Lineage()[1]
		path, explicit = parent.String(flagConfig), parent.IsSet(flagConfig)
	}
	if path == "" {
		return usagef("no configuration file: give --%s FILE", flagConfig)
	}
	if !explicit {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no configuration file at %s (give --%s FILE)", path, flagConfig)
		}
	}
	cfg, diags := config.Load(path)
	if !diags.HasErrors() {
		diags = append(diags, cfg.Validate(dialectNames())...)
	}
	if !diags.HasErrors() {
		for _, a := range cfg.Agents {
			_, moreDiags := dialects[a.Dialect].Configure(a.Options)
			diags = append(diags, moreDiags...)
		}
	}
	if len(diags) > 0 {
		_ = config.WriteDiagnostics(os.Stderr, cfg.Files, diags)
	}
	if diags.HasErrors() {
		return reportedError{diags}
	}
	noun := "agents"
	if len(cfg.Agents) == 1 {
		noun = "agent"
	}
	_, err := fmt.Fprintf(os.Stdout, "ok: %d %s\n", len(cfg.Agents), noun)
	return err
}

func dialectsAction(c *cli.Context) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tLINKS\tSUMMARY")
	for _, name := range dialectNames() {
		d := dialects[name]
		links := "shared"
		if d.PerSession {
			links = "per-session"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", d.Name, links, d.Summary)
	}
	return w.Flush()
}

func demoAction(c *cli.Context) error {
	// The demo prints to stdout; its logs stay quiet on stderr unless asked.
	s := settings{LogLevel: hclog.Warn}
	if c.IsSet(flagLogLevel) {
		l, err := parseLevel(c.String(flagLogLevel))
		if err != nil {
			return usagef("--%s: %v", flagLogLevel, err)
		}
		s.LogLevel = l
	}
	if c.IsSet(flagLogFile) {
		s.LogFile = c.String(flagLogFile)
	}
	logger, closeLog, err := newLogger(s)
	if err != nil {
		return err
	}
	defer closeLog.Close()
	return demo.Run(c.Context, demo.Options{
		Raw:     c.Bool("raw"),
		Out:     os.Stdout,
		Logger:  logger,
		Version: versionString(),
	})
}

func dialectNames() []string {
	names := make([]string, 0, len(dialects))
	for name := range dialects {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// versionString is the -ldflags version, else the module version recorded
// by `go install module@version`, else "dev".
func versionString() string {
	if version != "dev" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return version
}
