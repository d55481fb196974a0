// Package launch turns the configuration file and the command line into a
// bridge ready to serve: it applies flag-over-file-over-default precedence,
// picks the agent and its dialect, and builds the dialer that opens agent
// links (a WebSocket, or a child process per link). It is the one place
// that composes an engine, so that serving, the demo and the protocol tools
// build theirs the same way; main only parses the command line and prints.
package launch

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/legacy"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/acpv0"
	"github.com/acp-bridge/acp-bridge/translate/acpv2"
	"github.com/acp-bridge/acp-bridge/translate/claude"
	"github.com/acp-bridge/acp-bridge/translate/codexapp"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
)

// Dialects returns the agent protocols this binary speaks, by name: the Go
// dialects, the rule profiles shipped in the binary and the configuration's
// own (AddUserDialects). Nothing registers itself: adding a dialect means
// adding it here. The profiles are compiled on first use, not at start-up,
// which a bridge serving another dialect never pays for.
func Dialects() map[string]translate.Dialect { return dialects() }

var dialects = sync.OnceValue(func() map[string]translate.Dialect {
	return withProfiles(maps.Clone(goDialects))
})

// lookupDialect finds dialect name, compiling the rule profiles only when
// it is not one of the Go dialects: compiling them all takes some 10 ms of
// a start-up an editor waits for.
func lookupDialect(name string) (translate.Dialect, bool) {
	if d, ok := goDialects[name]; ok {
		return d, true
	}
	d, ok := Dialects()[name]
	return d, ok
}

// goDialects are the dialects written in Go: serving one of them needs no
// rule profile compiled.
var goDialects = map[string]translate.Dialect{
	acp.Dialect.Name:      acp.Dialect,
	acpv0.Dialect.Name:    acpv0.Dialect,
	acpv2.Dialect.Name:    acpv2.Dialect,
	claude.Dialect.Name:   claude.Dialect,
	codexapp.Dialect.Name: codexapp.Dialect,
}

// defaultCommands are the agent commands of dialects that name their own
// program: `acp-bridge --dialect claude-stream-json` runs `claude` when
// neither the command line nor the configuration names an agent.
var defaultCommands = map[string][]string{
	codexapp.Dialect.Name: {codexapp.DefaultExecutable, "app-server"},
	claude.Dialect.Name:   {claude.DefaultExecutable},
}

// UsageError is a bad command line (the caller exits with status 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// ReportedError is a failure already reported on stderr (configuration
// diagnostics, or the engine's error in the log): exit status 1.
type ReportedError struct{ Err error }

func (e ReportedError) Error() string { return e.Err.Error() }
func (e ReportedError) Unwrap() error { return e.Err }

// Flag names, shared by the command line and the messages that name flags.
const (
	FlagConfig         = "config"
	FlagAgent          = "agent"
	FlagURL            = "url"
	FlagDialect        = "dialect"
	FlagHeader         = "header"
	FlagSubprotocol    = "subprotocol"
	FlagCAFile         = "ca-file"
	FlagConnectTimeout = "connect-timeout"
	FlagPingPeriod     = "ping-period"
	FlagPongWait       = "pong-wait"
	FlagLogLevel       = "log-level"
	FlagLogFile        = "log-file"
	FlagLogFormat      = "log-format"
	FlagMaxMessage     = "max-message"
	FlagQueueBytes     = "queue-bytes"
	FlagRequestTimeout = "request-timeout"
	FlagCancelGrace    = "cancel-grace"
	FlagAgentProtocol  = "agent-protocol"
	FlagEditorProtocol = "editor-protocol"
)

// Flags are the serving flags in plain form, for the pure resolution
// functions. Set records which were given (on the command line or through
// their environment twin), since flags override the file only when given.
type Flags struct {
	Agent, URL, Dialect string
	Headers             []string // NAME=ENVVAR
	Subprotocols        []string
	CAFile              string
	ConnectTimeout      string
	PingPeriod          string
	PongWait            string
	LogLevel, LogFile   string
	LogFormat           string
	MaxMessage          string
	QueueBytes          string
	RequestTimeout      string
	CancelGrace         string
	// AgentProtocol is --agent-protocol: "1", "2", or "" to negotiate.
	AgentProtocol  string
	EditorProtocol string
	// Shim is --shim (on, off, report, report=FILE) and ShimDisable the
	// --shim-disable lists of rule names.
	Shim        string
	ShimDisable []string
	// Argv is the agent command after "--".
	Argv []string
	Set  map[string]bool
}

// Settings are the bridge-wide Settings after precedence is applied.
type Settings struct {
	LogLevel hclog.Level
	LogFile  string
	// LogFormat is "text" (the default) or "json": hclog's JSON format,
	// one object a line, for log collectors.
	LogFormat      string
	MaxMessage     int
	QueueBytes     int
	RequestTimeout time.Duration
	CancelGrace    time.Duration
	// EditorProtocol is the ACP version forced toward the editor; 0 lets
	// its initialize choose.
	EditorProtocol int
}

// ResolveSettings applies flags over the file over the defaults. Defaults
// that the engine applies to zero values are left zero.
func ResolveSettings(cfg *config.Config, f Flags) (Settings, error) {
	s := Settings{
		LogLevel:       hclog.Info,
		LogFile:        cfg.LogFile,
		MaxMessage:     cfg.MaxMessage,
		RequestTimeout: cfg.RequestTimeout,
		CancelGrace:    cfg.CancelGrace,
		EditorProtocol: cfg.EditorProtocol,
	}
	level := cfg.LogLevel
	if f.Set[FlagLogLevel] {
		level = f.LogLevel
	}
	if level != "" {
		l, err := ParseLevel(level)
		if err != nil {
			return s, Usagef("--%s: %v", FlagLogLevel, err)
		}
		s.LogLevel = l
	}
	if f.Set[FlagLogFile] {
		s.LogFile = f.LogFile
	}
	if f.Set[FlagLogFormat] {
		if err := CheckLogFormat(f.LogFormat); err != nil {
			return s, err
		}
		s.LogFormat = strings.ToLower(f.LogFormat)
	}
	if f.Set[FlagMaxMessage] {
		n, err := config.ParseSize(f.MaxMessage)
		if err == nil && (n < config.MessageSizeMin || n > config.MessageSizeMax) {
			err = fmt.Errorf("%s is outside the accepted range %s to %s", f.MaxMessage,
				config.FormatSize(config.MessageSizeMin), config.FormatSize(config.MessageSizeMax))
		}
		if err != nil {
			return s, Usagef("--%s: %v", FlagMaxMessage, err)
		}
		s.MaxMessage = int(n)
	}
	s.QueueBytes = cfg.QueueBytes
	if f.Set[FlagQueueBytes] {
		n, err := config.ParseSize(f.QueueBytes)
		if err == nil && (n < config.QueueSizeMin || n > config.QueueSizeMax) {
			err = fmt.Errorf("%s is outside the accepted range %s to %s", f.QueueBytes,
				config.FormatSize(config.QueueSizeMin), config.FormatSize(config.QueueSizeMax))
		}
		if err != nil {
			return s, Usagef("--%s: %v", FlagQueueBytes, err)
		}
		s.QueueBytes = int(n)
	}
	var err error
	if s.RequestTimeout, err = durationFlag(f, FlagRequestTimeout, f.RequestTimeout, config.ZeroDisables, s.RequestTimeout); err != nil {
		return s, err
	}
	if s.CancelGrace, err = durationFlag(f, FlagCancelGrace, f.CancelGrace, config.Positive, s.CancelGrace); err != nil {
		return s, err
	}
	if f.Set[FlagEditorProtocol] {
		if s.EditorProtocol, err = config.ParseProtocol(f.EditorProtocol); err != nil {
			return s, Usagef("--%s: %v", FlagEditorProtocol, err)
		}
	}
	return s, nil
}

func ParseLevel(s string) (hclog.Level, error) {
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
func durationFlag(f Flags, name, value string, rule config.DurationRule, fallback time.Duration) (time.Duration, error) {
	if !f.Set[name] {
		return fallback, nil
	}
	d, err := config.ParseDuration(value, rule)
	if err != nil {
		return 0, Usagef("--%s: %v", name, err)
	}
	return d, nil
}

// Agent is the agent to serve after precedence is applied: exactly one
// of Command and WebSocket is set. Their Logger and, for per-session
// links, Dir are filled in by the Dial closure.
type Agent struct {
	Name    string
	Dialect string
	// Options is the dialect's options block; nil for ad-hoc agents.
	Options   hcl.Body
	Command   *legacy.Command
	WebSocket *legacy.WebSocket
	// AgentProtocol forces the ACP version of an acp agent: 1 or 2; 0
	// negotiates (see acpv2.Negotiator).
	AgentProtocol int
	// Desc describes the agent for logs, without secrets.
	Desc string
	// Ignored lists WebSocket flags that were given for a command agent.
	Ignored []string
}

// WebSocketFlags apply to WebSocket agents only.
var WebSocketFlags = []string{FlagHeader, FlagSubprotocol, FlagCAFile, FlagConnectTimeout, FlagPingPeriod, FlagPongWait}

// ResolveAgent picks the agent to serve: an ad-hoc one from --url or a
// command after "--", else the configured one --agent names (or the default
// agent). Flags override the configured agent's Settings. lookupEnv reads the
// values of --header variables. It does no I/O.
func ResolveAgent(cfg *config.Config, f Flags, lookupEnv func(string) (string, bool)) (Agent, error) {
	var spec Agent
	if f.URL == "" && len(f.Argv) == 0 && f.Agent == "" && len(cfg.Agents) == 0 && f.Set[FlagDialect] {
		f.Argv = defaultCommands[f.Dialect] // e.g. claude-stream-json runs claude
	}
	adHoc := f.URL != "" || len(f.Argv) > 0
	switch {
	case f.URL != "" && len(f.Argv) > 0:
		return spec, Usagef("give either --%s or a command after --, not both", FlagURL)
	case adHoc && f.Agent != "":
		return spec, Usagef("--%s selects a configured agent; it cannot be combined with --%s or a command after --", FlagAgent, FlagURL)
	}

	var agent *config.Agent
	if adHoc {
		spec.Dialect = config.DefaultDialect
	} else {
		a, err := cfg.Agent(f.Agent)
		if err != nil {
			if f.Agent != "" {
				return spec, unknownAgent(cfg, f.Agent)
			}
			if len(cfg.Agents) == 0 {
				return spec, Usagef("no agent to serve: give --%s URL, a command after --, or an agent block in the configuration file (--%s)", FlagURL, FlagConfig)
			}
			return spec, UsageError{Err: err}
		}
		agent = a
		spec.Name, spec.Dialect, spec.Options = a.Name, a.Dialect, a.Options
		spec.AgentProtocol = a.AgentProtocol
	}
	if f.Set[FlagDialect] {
		spec.Dialect = f.Dialect
	}
	if f.Set[FlagAgentProtocol] {
		switch f.AgentProtocol {
		case "1", "2":
			spec.AgentProtocol = int(f.AgentProtocol[0] - '0')
		default:
			return spec, Usagef("--%s takes 1 or 2 (the ACP version to speak to the agent); got %q", FlagAgentProtocol, f.AgentProtocol)
		}
	}
	switch {
	case spec.AgentProtocol == 0:
	case spec.Dialect == acpv2.Dialect.Name && spec.AgentProtocol != 2:
		return spec, Usagef("dialect %s speaks ACP v2 to the agent; --%s %d contradicts it: use dialect %s", spec.Dialect, FlagAgentProtocol, spec.AgentProtocol, acp.Dialect.Name)
	case spec.Dialect != acp.Dialect.Name && spec.Dialect != acpv2.Dialect.Name:
		return spec, Usagef("--%s (agent_protocol) applies to ACP agents (dialect %s), not to dialect %s", FlagAgentProtocol, acp.Dialect.Name, spec.Dialect)
	}

	isWebSocket := f.URL != "" || agent != nil && agent.WebSocket != nil
	if !isWebSocket {
		cmd := &legacy.Command{}
		if adHoc {
			if f.Argv[0] == "" {
				return spec, Usagef("the agent command after -- is empty")
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
		for _, name := range WebSocketFlags {
			if f.Set[name] {
				spec.Ignored = append(spec.Ignored, "--"+name)
			}
		}
		return spec, nil
	}

	ws := &legacy.WebSocket{Header: http.Header{}}
	if adHoc {
		if err := config.CheckAgentURL(f.URL); err != nil {
			return spec, Usagef("--%s: %v", FlagURL, err)
		}
		u, _ := url.Parse(f.URL)
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
			return spec, Usagef("--%s %q: want NAME=ENVVAR, the header's value being read from the environment variable ENVVAR", FlagHeader, h)
		}
		value, set := lookupEnv(envVar)
		if !set {
			return spec, Usagef("--%s %s: environment variable %s is not set", FlagHeader, name, envVar)
		}
		ws.Header.Set(name, value)
	}
	if f.Set[FlagSubprotocol] {
		ws.Subprotocols = f.Subprotocols
	}
	if f.Set[FlagCAFile] {
		ws.CAFile = f.CAFile
	}
	var err error
	if ws.DialTimeout, err = durationFlag(f, FlagConnectTimeout, f.ConnectTimeout, config.Positive, ws.DialTimeout); err != nil {
		return spec, err
	}
	if ws.PingPeriod, err = durationFlag(f, FlagPingPeriod, f.PingPeriod, config.ZeroDerives, ws.PingPeriod); err != nil {
		return spec, err
	}
	if ws.PongWait, err = durationFlag(f, FlagPongWait, f.PongWait, config.Positive, ws.PongWait); err != nil {
		return spec, err
	}
	spec.WebSocket = ws
	if adHoc {
		transport := "websocket"
		if isHTTPURL(f.URL) {
			transport = "streamable http"
		}
		spec.Desc = fmt.Sprintf("agent %q (dialect %s, %s %s)", spec.Name, spec.Dialect, transport, config.WebSocket{URL: f.URL}.RedactedURL())
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

// NewLogger builds the root logger: text with timestamps, to stderr or the
// log file (opened for appending; the caller closes it).
func NewLogger(s Settings) (hclog.Logger, io.Closer, error) {
	return NewScrubbedLogger(s, nil)
}

// NewScrubbedLogger is NewLogger with every line passed through sc, so that
// nothing the bridge logs (a child's stderr, an agent's error body) carries
// a configured secret.
func NewScrubbedLogger(s Settings, sc *Scrubber) (hclog.Logger, io.Closer, error) {
	var out io.Writer = os.Stderr
	var closer io.Closer = nopCloser{}
	if s.LogFile != "" {
		f, err := os.OpenFile(s.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("log file: %w", err)
		}
		out, closer = f, f
	}
	scrubbed := sc.Writer(out)
	if s.LogFormat == "json" {
		scrubbed = sc.JSONWriter(out)
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:   "acp-bridge",
		Level:  s.LogLevel,
		Output: scrubbed,
		Color:  hclog.ColorOff,
		// A JSON line's values are escaped by encoding/json, after which
		// the scrubber still sees every secret whole unless it holds a
		// character JSON escapes; NewScrubber adds the escaped forms.
		JSONFormat: s.LogFormat == "json",
	}), closer, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// Configure finds the agent's dialect and decodes the agent's options with
// it, writing its diagnostics to diagOut (stderr for the command line).
func Configure(spec Agent, files map[string]*hcl.File, diagOut io.Writer) (translate.Dialect, func() translate.Translator, error) {
	d, ok := lookupDialect(spec.Dialect)
	if !ok {
		return d, nil, UnknownDialect(spec.Dialect)
	}
	newTranslator, diags := d.Configure(spec.Options)
	if len(diags) > 0 {
		_ = config.WriteDiagnostics(diagOut, files, diags)
	}
	if diags.HasErrors() {
		return d, nil, ReportedError{Err: diags}
	}
	if newTranslator == nil {
		return d, nil, fmt.Errorf("dialect %s returned no translator", d.Name)
	}
	if _, builds := newTranslator().(translate.SpawnBuilder); builds && spec.WebSocket != nil {
		// Its translator writes the agent's command line: there is no
		// program at a URL to give it to.
		run := ""
		if argv := defaultCommands[d.Name]; len(argv) > 0 {
			run = " (acp-bridge --dialect " + d.Name + " runs " + strings.Join(argv, " ") + ")"
		}
		return d, nil, Usagef("dialect %s starts the agent as a child process, one per session; it cannot reach an agent over a WebSocket: drop --%s and give the agent's command after --%s",
			d.Name, FlagURL, run)
	}
	return d, newTranslator, nil
}

// DialectNames lists the known dialects, sorted.
func DialectNames() []string {
	names := make([]string, 0, len(Dialects()))
	for name := range Dialects() {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Dialer returns the function the engine opens agent links with: a
// WebSocket dial, or a child process started in the session's directory.
// maxMessage bounds the frames read from the agent. A dialect that builds
// its own command line (translate.SpawnBuilder) has its arguments appended
// to, or put in place of, the configured ones.
func (spec Agent) Dialer(logger hclog.Logger, maxMessage int) func(context.Context, bridge.Spawn) (bridge.Link, error) {
	if maxMessage <= 0 {
		maxMessage = config.DefaultMaxMessage
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	// One cookie jar for every link to the agent: the affinity a load
	// balancer in front of a remote endpoint sets survives a reconnect.
	jar, _ := cookiejar.New(nil)
	return func(ctx context.Context, sp bridge.Spawn) (bridge.Link, error) {
		if spec.WebSocket != nil && sp.Command.Argv != nil {
			return nil, fmt.Errorf("dialect %s starts its agent as a child process and cannot reach it over a WebSocket: configure a command instead", spec.Dialect)
		}
		if spec.WebSocket != nil && isHTTPURL(spec.WebSocket.URL) {
			w := spec.WebSocket
			h := legacy.HTTPStream{URL: w.URL, Header: w.Header, CAFile: w.CAFile, DialTimeout: w.DialTimeout,
				PongWait: w.PongWait, ReadLimit: int64(maxMessage), Jar: jar, Logger: logger.Named("http")}
			if sp.Session != "" {
				h.Logger = h.Logger.With("session", sp.Session)
			}
			conn, err := h.Dial(ctx)
			if err != nil {
				return nil, err
			}
			return conn, nil
		}
		if spec.WebSocket != nil {
			w := *spec.WebSocket
			w.ReadLimit = int64(maxMessage)
			w.Jar = jar
			w.Logger = logger.Named("ws")
			if sp.Session != "" {
				w.Logger = w.Logger.With("session", sp.Session)
			}
			conn, err := w.Dial(ctx)
			if err != nil {
				return nil, err // not a nil *WSConn in a non-nil Link
			}
			return conn, nil
		}
		cmd := sessionCommand(*spec.Command, sp)
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
}

// isHTTPURL reports whether an agent URL names a Streamable HTTP endpoint
// (http:// or https://) rather than a WebSocket.
func isHTTPURL(raw string) bool {
	scheme, _, _ := strings.Cut(raw, "://")
	return strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https")
}

// NewBridge composes the engine for spec: its dialect, the dialer, and the
// settings. Every caller that serves an editor builds its engine here.
func NewBridge(spec Agent, dialect translate.Dialect, newTranslator func() translate.Translator, s Settings, logger hclog.Logger, version string) *bridge.Bridge {
	newTranslator = Negotiate(spec, dialect, newTranslator)
	var redact func([]byte) []byte
	if sc := NewScrubber(spec.Secrets()...); len(sc.Values()) > 0 {
		redact = sc.ScrubJSON // nil without secrets: no cost per message
	}
	return &bridge.Bridge{
		Redact:         redact,
		Dialect:        dialect,
		NewTranslator:  newTranslator,
		Dial:           spec.Dialer(logger, s.MaxMessage),
		AgentName:      spec.Name,
		Version:        version,
		Logger:         logger,
		MaxMessage:     s.MaxMessage,
		QueueBytes:     s.QueueBytes,
		RequestTimeout: s.RequestTimeout,
		CancelGrace:    s.CancelGrace,
		EditorProtocol: s.EditorProtocol,
	}
}

// Negotiate returns the translators of an acp agent's links: each asks the
// agent for ACP v2 and takes the version it answers, v2 translated for the
// engine and v1 through newTranslator (the relay, or the compliance shim),
// unless spec forces a version. Other dialects' are returned as they are.
func Negotiate(spec Agent, dialect translate.Dialect, newTranslator func() translate.Translator) func() translate.Translator {
	if dialect.Name != acp.Dialect.Name {
		return newTranslator
	}
	v1, force := newTranslator, spec.AgentProtocol
	return func() translate.Translator { return acpv2.NewNegotiator(force, v1) }
}

// sessionCommand is the configured command adapted to one link: the
// arguments a dialect built (translate.SpawnBuilder) after the configured
// ones or instead of them, its extra environment, and its working directory
// or else the session's. base's slices are not modified: links share them.
func sessionCommand(base legacy.Command, sp bridge.Spawn) legacy.Command {
	cmd := base
	if c := sp.Command; c.Argv != nil {
		if c.Append {
			cmd.Args = slices.Concat(base.Args, c.Argv)
		} else {
			cmd.Args = slices.Clone(c.Argv)
		}
	}
	if len(sp.Command.Env) > 0 {
		cmd.Env = slices.Concat(base.Env, sp.Command.Env)
	}
	switch {
	case sp.Command.Cwd != "":
		cmd.Dir = sp.Command.Cwd
	case sp.Cwd != "":
		cmd.Dir = sp.Cwd
	}
	return cmd
}

// CheckLogFormat accepts the values of --log-format: text or json.
func CheckLogFormat(s string) error {
	switch strings.ToLower(s) {
	case "", "text", "json":
		return nil
	}
	return Usagef("--%s: %q is not one of text, json", FlagLogFormat, s)
}

// unknownAgent is the usage error for --agent NAME that names no
// configured agent: the nearest name, or what to do when there is none.
func unknownAgent(cfg *config.Config, name string) error {
	if len(cfg.Agents) == 0 {
		return Usagef("--%s %s: the configuration defines no agents: add an agent %q { … } block (see 'acp-bridge config init'), or serve an ad-hoc agent with --%s URL or a command after --",
			FlagAgent, name, name, FlagURL)
	}
	names := make([]string, len(cfg.Agents))
	for i, a := range cfg.Agents {
		names[i] = a.Name
	}
	hint := ""
	if s := Nearest(name, names); s != "" {
		hint = fmt.Sprintf(" Did you mean %q?", s)
	}
	return Usagef("--%s %s: no such agent in the configuration.%s The configured agents are: %s", FlagAgent, name, hint, strings.Join(names, ", "))
}
