// Package config loads acp-bridge's HCL configuration file: global settings
// and named agent blocks, each saying how to reach one agent (a child process
// or a WebSocket) and which dialect it speaks. It follows hclsimple and the
// HCL diagnostics guide: the schema is declared with gohcl's tags (decoded
// by internal/hcldecode, which behaves as gohcl does), unknown
// arguments and blocks are errors, and every problem comes back as an
// hcl.Diagnostic carrying the source range (file:line:column) it is about.
// A dialect's options block is kept as an hcl.Body and decoded later by the
// dialect itself (translate.Dialect.Configure), so its diagnostics point into
// the same file.
//
// Secrets come from the environment through the env("NAME") function.
// Values derived from env() are never printed: header and agent environment
// values are Secrets, and the String and GoString methods of Config, Agent
// and WebSocket redact URLs and command arguments that used env().
//
// See config.example.hcl at the repository root for every option.
package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// DefaultDialect is the dialect of an agent block without a dialect
// argument: ACP v1 relayed as is.
const DefaultDialect = "acp"

// Config is a loaded configuration file. Zero values mean "not set": the
// caller applies command-line flags over it and built-in defaults under it.
// A Config must not be modified once the bridge uses it.
type Config struct {
	// LogLevel is one of trace, debug, info, warn, error, off; "" = not set.
	LogLevel string
	// LogFile is where logs go; "" = not set (stderr). A relative path in
	// the file is resolved against the file's directory.
	LogFile string
	// MaxMessage is the largest editor message in bytes; 0 = not set.
	MaxMessage int
	// QueueBytes bounds each queue of messages waiting for a slow peer, in
	// bytes; 0 = not set (the engine's 1 MiB).
	QueueBytes int
	// RequestTimeout bounds editor requests other than prompts; 0 = not set,
	// negative = disabled ("0s" or "off" in the file), as bridge.Bridge.
	RequestTimeout time.Duration
	// CancelGrace is the grace period after session/cancel; 0 = not set.
	CancelGrace time.Duration
	// EditorProtocol forces the ACP version spoken to the editor, 1 or 2;
	// 0 = not set (the editor's initialize chooses).
	EditorProtocol int
	// DefaultAgent names the agent used when none is chosen; "" = not set.
	DefaultAgent string
	// Agents are the agent blocks in file order, with unique names.
	Agents []*Agent
	// Dialects are the dialect "name" { … } blocks: rule profiles the
	// user wrote, decoded by package translate/rules (rules.Decode).
	Dialects []*UserDialect
	// Shim is the shim { … } block; nil = not set.
	Shim *Shim
	// Sessions are the durable-session settings (sessions.go).
	Sessions Sessions
	// Serve is the serve { … } block (serve.go); nil = not set.
	Serve *Serve

	// Files holds the parsed source files by name, for WriteDiagnostics.
	// It is set even when loading failed, when it is the only field set.
	Files map[string]*hcl.File
}

// Agent is one agent block: exactly one of Command and WebSocket is set.
type Agent struct {
	// Name is the block's label, unique in the file.
	Name string
	// Dialect names the agent's protocol; DefaultDialect when not given.
	Dialect string
	// Command is the argv of a child process agent; nil for WebSocket agents.
	Command []string
	// Env holds extra environment variables for the child, added to the
	// bridge's own environment.
	Env map[string]Secret
	// Dir is the child's working directory for the control link (links of
	// per-session dialects run in the session's cwd); "" = the bridge's.
	Dir string
	// StopGrace is how long the child gets between SIGTERM and SIGKILL
	// when it is stopped (legacy.Command.StopGrace); 0 = not set.
	StopGrace time.Duration
	// WebSocket is set for an agent reached over a WebSocket.
	WebSocket *WebSocket
	// Options is the body of the dialect's options block, nil when absent.
	// The dialect decodes it (translate.Dialect.Configure).
	Options hcl.Body
	// AgentProtocol is the ACP version an acp agent is spoken to in: 1 or
	// 2; 0 (not set) negotiates it.
	AgentProtocol int

	// DeclRange is the range of the block header (agent "name"), and
	// DialectRange that of the dialect argument (DeclRange when absent):
	// subjects for diagnostics raised after loading.
	DeclRange, DialectRange hcl.Range

	// argvFromEnv[i] reports whether Command[i] was computed with env().
	argvFromEnv []bool
}

// UserDialect is one dialect "name" { … } block, kept undecoded.
type UserDialect struct {
	Name      string
	Body      hcl.Body
	DeclRange hcl.Range
	// Source is the block's text, for `acp-bridge dialects show`; the
	// whole file's for a profile file.
	Source string
	// File is the profile file the dialect was read from (--profile FILE,
	// include); "" for a block that holds the profile itself.
	File string
}

// WebSocket says how to reach an agent over a WebSocket.
type WebSocket struct {
	// URL is the ws:// or wss:// address.
	URL string
	// Headers are sent with the opening handshake.
	Headers map[string]Secret
	// Subprotocols are offered in Sec-WebSocket-Protocol, in order.
	Subprotocols []string
	// CAFile is a PEM file of CA certificates trusted instead of the
	// system's for wss://; "" = system roots. A relative path is resolved
	// against the configuration file's directory.
	CAFile string
	// ConnectTimeout bounds the dial and handshake; 0 = not set.
	ConnectTimeout time.Duration
	// PingPeriod is how often pings are sent; 0 = derived from PongWait,
	// negative = keepalive off ("off"), as legacy.WebSocket.PingPeriod.
	PingPeriod time.Duration
	// PongWait is how long the agent may stay silent (no pong, no message)
	// before the link is considered dead; 0 = not set.
	PongWait time.Duration

	// urlFromEnv reports whether URL was computed with env().
	urlFromEnv bool
}

// rawRoot, rawAgent, rawWebSocket and rawOptions are the schema, in gohcl's tags.
// Every argument is kept as an *hcl.Attribute so that it can be evaluated
// with env() marks tracked and checked against its own range.
type rawRoot struct {
	LogLevel       *hcl.Attribute `hcl:"log_level,optional"`
	LogFile        *hcl.Attribute `hcl:"log_file,optional"`
	MaxMessage     *hcl.Attribute `hcl:"max_message,optional"`
	QueueBytes     *hcl.Attribute `hcl:"queue_bytes,optional"`
	RequestTimeout *hcl.Attribute `hcl:"request_timeout,optional"`
	CancelGrace    *hcl.Attribute `hcl:"cancel_grace,optional"`
	EditorProtocol *hcl.Attribute `hcl:"editor_protocol,optional"`
	DefaultAgent   *hcl.Attribute `hcl:"default_agent,optional"`
	// Durable sessions (sessions.go).
	SessionsOn      *hcl.Attribute `hcl:"sessions,optional"`
	StateDir        *hcl.Attribute `hcl:"state_dir,optional"`
	SessionIdle     *hcl.Attribute `hcl:"session_idle,optional"`
	HistoryPreamble *hcl.Attribute `hcl:"history_preamble,optional"`
	ListAllSessions *hcl.Attribute `hcl:"list_all_sessions,optional"`
	SessionMaxAge   *hcl.Attribute `hcl:"session_max_age,optional"`
	MaxSessions     *hcl.Attribute `hcl:"max_sessions,optional"`
	SessionMaxBytes *hcl.Attribute `hcl:"session_max_bytes,optional"`
	Agents          []*rawAgent    `hcl:"agent,block"`
	Dialects        []*rawDialect  `hcl:"dialect,block"`
	Shim            *rawShim       `hcl:"shim,block"`
	Serve           *rawServe      `hcl:"serve,block"`
}

type rawDialect struct {
	Name     string    `hcl:"name,label"`
	Body     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

type rawAgent struct {
	Name      string         `hcl:"name,label"`
	Dialect   *hcl.Attribute `hcl:"dialect,optional"`
	Command   *hcl.Attribute `hcl:"command,optional"`
	Env       *hcl.Attribute `hcl:"env,optional"`
	Dir       *hcl.Attribute `hcl:"dir,optional"`
	StopGrace *hcl.Attribute `hcl:"stop_grace,optional"`
	Protocol  *hcl.Attribute `hcl:"agent_protocol,optional"`
	WebSocket *rawWebSocket  `hcl:"websocket,block"`
	Options   *rawOptions    `hcl:"options,block"`
	Body      hcl.Body       `hcl:",body"`
}

type rawWebSocket struct {
	URL *hcl.Attribute `hcl:"url,optional"` // required: checked with a range

	Headers        *hcl.Attribute `hcl:"headers,optional"`
	Subprotocols   *hcl.Attribute `hcl:"subprotocols,optional"`
	CAFile         *hcl.Attribute `hcl:"ca_file,optional"`
	ConnectTimeout *hcl.Attribute `hcl:"connect_timeout,optional"`
	PingPeriod     *hcl.Attribute `hcl:"ping_period,optional"`
	PongWait       *hcl.Attribute `hcl:"pong_wait,optional"`
	Body           hcl.Body       `hcl:",body"`
}

// rawOptions keeps the whole options block for the dialect: its remain body
// is the only place where unknown arguments are not an error here.
type rawOptions struct {
	Body hcl.Body `hcl:",remain"`
}

// agentHeader is the block header schema used to find the ranges of agent
// blocks, which the decoder (as gohcl) does not record.
var agentHeader = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "agent", LabelNames: []string{"name"}}},
}

// webSocketHeader finds websocket blocks even when the decoder refused them as
// duplicates, so that the transport check does not pile on.
var webSocketHeader = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "websocket"}},
}

// DefaultPath returns the configuration file used when none is given:
// os.UserConfigDir()/acp-bridge/config.hcl, or "" when the user has no
// configuration directory.
func DefaultPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "acp-bridge", "config.hcl")
}

// Load reads and decodes the configuration file at path. If the returned
// diagnostics have errors, the Config holds only Files (possibly empty, when
// the file could not be read), for WriteDiagnostics.
func Load(path string) (*Config, hcl.Diagnostics) {
	return load(path, false)
}

// Check is Load for checking a file rather than serving it: an environment
// variable that env() reads and that is not set is a warning, not an error,
// and a placeholder stands in for its value.
func Check(path string) (*Config, hcl.Diagnostics) {
	return load(path, true)
}

func load(path string, lenient bool) (*Config, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		// HCL's own message leaves out the cause (missing, a directory,
		// permission denied); the *PathError names the file and the cause.
		return &Config{}, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read file",
			Detail:   fmt.Sprintf("Could not read the configuration file: %v.", err),
		}}
	}
	if diags := checkNesting(src, path); diags.HasErrors() {
		return &Config{}, diags
	}
	p := hclparse.NewParser()
	file, diags := p.ParseHCL(src, path)
	return decodeFile(p, file, filepath.Dir(path), diags, lenient)
}

// Parse decodes configuration source read from filename, which names it in
// diagnostics and anchors relative paths. Errors are as for Load.
func Parse(src []byte, filename string) (*Config, hcl.Diagnostics) {
	if diags := checkNesting(src, filename); diags.HasErrors() {
		return &Config{}, diags
	}
	p := hclparse.NewParser()
	file, diags := p.ParseHCL(src, filename)
	return decodeFile(p, file, filepath.Dir(filename), diags, false)
}

func decodeFile(p *hclparse.Parser, file *hcl.File, dir string, diags hcl.Diagnostics, lenient bool) (*Config, hcl.Diagnostics) {
	partial := &Config{Files: p.Files()}
	if diags.HasErrors() || file == nil {
		return partial, diags
	}
	var raw rawRoot
	diags = append(diags, hcldecode.DecodeBody(file.Body, evalContext(), &raw)...)
	cfg, moreDiags := build(&raw, file.Body, dir, lenient)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return partial, diags
	}
	cfg.Files = partial.Files
	for _, rd := range raw.Dialects {
		ud := &UserDialect{Name: rd.Name, Body: rd.Body, DeclRange: rd.DefRange}
		if r := blockRange(rd.Body, rd.DefRange); r.Start.Byte < r.End.Byte && r.End.Byte <= len(file.Bytes) {
			ud.Source = string(file.Bytes[r.Start.Byte:r.End.Byte])
		}
		if inc, d := includedProfile(p, rd, dir); inc != nil || d.HasErrors() {
			diags = append(diags, d...)
			if inc == nil {
				continue
			}
			ud = inc
		}
		cfg.Dialects = append(cfg.Dialects, ud)
	}
	cfg.Files = p.Files()
	if diags.HasErrors() {
		return &Config{Files: cfg.Files}, diags
	}
	return cfg, diags
}

// includedProfile reads the profile file that dialect "NAME" { include =
// "FILE" } names (relative to the configuration's directory), or returns
// nil when the block holds the profile itself. The file holds what the
// block would; diagnostics point into it.
func includedProfile(p *hclparse.Parser, rd *rawDialect, dir string) (*UserDialect, hcl.Diagnostics) {
	body, ok := rd.Body.(*hclsyntax.Body)
	if !ok {
		return nil, nil
	}
	a := body.Attributes["include"]
	if a == nil {
		return nil, nil
	}
	if len(body.Attributes) != 1 || len(body.Blocks) != 0 {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "include stands alone",
			Detail:  fmt.Sprintf("dialect %q includes its profile from a file; put the profile's other lines in that file, or drop include and write them here.", rd.Name),
			Subject: a.Range().Ptr()}}
	}
	v, d := a.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() || v.Type() != cty.String || v.AsString() == "" {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid include",
			Detail: "include is the path of a profile file, a constant string such as \"tinychat.hcl\" (relative to this file's directory).", Subject: a.Expr.Range().Ptr()}}
	}
	path := v.AsString()
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	ud, diags := loadProfile(p, path, rd.Name)
	if ud == nil {
		for _, d := range diags {
			if d.Subject == nil {
				d.Subject = a.Expr.Range().Ptr()
			}
		}
	}
	return ud, diags
}

// readProfile reads a profile file: a regular file of at most
// maxProfileSize bytes.
func readProfile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", path)
	case fi.Size() > maxProfileSize:
		return nil, fmt.Errorf("%s is %d bytes, more than a profile's %d", path, fi.Size(), maxProfileSize)
	}
	return io.ReadAll(io.LimitReader(f, maxProfileSize+1))
}

// LoadProfile reads a rule profile file (--profile FILE) as a dialect
// block: its name is the file's base name without its extension, as for
// the profiles shipped in the binary. Files holds the parsed file, for
// WriteDiagnostics.
func LoadProfile(path string) (ud *UserDialect, files map[string]*hcl.File, diags hcl.Diagnostics) {
	p := hclparse.NewParser()
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	ud, diags = loadProfile(p, path, name)
	return ud, p.Files(), diags
}

// maxProfileSize bounds a profile file: the largest shipped one is a few
// KiB, and a device or a runaway file must not be read whole.
const maxProfileSize = 1 << 20

func loadProfile(p *hclparse.Parser, path, name string) (*UserDialect, hcl.Diagnostics) {
	src, err := readProfile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Failed to read profile",
			Detail: fmt.Sprintf("Could not read the profile file: %v. `acp-bridge dialects new NAME` writes a starting point.", err)}}
	}
	if diags := checkNesting(src, path); diags.HasErrors() {
		return nil, diags
	}
	f, diags := p.ParseHCL(src, path)
	if diags.HasErrors() {
		return nil, diags
	}
	return &UserDialect{Name: name, Body: f.Body, DeclRange: hcl.Range{Filename: path, Start: hcl.InitialPos, End: hcl.InitialPos},
		Source: string(src), File: path}, diags
}

// blockRange is the source range of a whole block, from its header to its
// closing brace, when the body tells it.
func blockRange(body hcl.Body, def hcl.Range) hcl.Range {
	type ranger interface{ Range() hcl.Range }
	if b, ok := body.(ranger); ok {
		return hcl.RangeBetween(def, b.Range())
	}
	return def
}

// build evaluates and checks the decoded arguments. It keeps going after an
// error so that one run reports every problem in the file.
func build(raw *rawRoot, body hcl.Body, dir string, lenient bool) (*Config, hcl.Diagnostics) {
	e := &evaluator{ctx: evalContext(), dir: dir, lenient: lenient}
	cfg := &Config{}
	if s, ok := e.str(raw.LogLevel); ok {
		level := strings.ToLower(s)
		if !slices.Contains(logLevels, level) {
			e.errorf(raw.LogLevel.Expr.Range(), "Invalid log level",
				"log_level must be one of %s; got %q.", strings.Join(logLevels, ", "), s)
		}
		cfg.LogLevel = level
	}
	cfg.LogFile, _ = e.path(raw.LogFile)
	if n, ok := e.size(raw.MaxMessage, MessageSizeMin, MessageSizeMax); ok {
		cfg.MaxMessage = int(n)
	}
	if n, ok := e.size(raw.QueueBytes, QueueSizeMin, QueueSizeMax); ok {
		cfg.QueueBytes = int(n)
	}
	cfg.RequestTimeout, _ = e.duration(raw.RequestTimeout, ZeroDisables)
	cfg.CancelGrace, _ = e.duration(raw.CancelGrace, Positive)
	if s, ok := e.str(raw.EditorProtocol); ok {
		v, err := ParseProtocol(s)
		if err != nil {
			e.errorf(raw.EditorProtocol.Expr.Range(), "Invalid editor protocol", "editor_protocol %v.", err)
		}
		cfg.EditorProtocol = v
	}
	cfg.Shim = e.shim(raw.Shim)
	cfg.Sessions = e.sessions(raw)
	cfg.Serve = e.serve(raw.Serve)

	// The decoder (as gohcl) records no block ranges; the header schema yields the same
	// blocks in the same order, with them.
	var blocks hcl.Blocks
	if content, _, _ := body.PartialContent(agentHeader); content != nil && len(content.Blocks) == len(raw.Agents) {
		blocks = content.Blocks
	}
	seen := map[string]hcl.Range{}
	for i, ra := range raw.Agents {
		decl := body.MissingItemRange()
		if blocks != nil {
			decl = blocks[i].DefRange
		}
		a := e.agent(ra, decl)
		if first, dup := seen[a.Name]; dup {
			e.errorf(decl, "Duplicate agent",
				"An agent named %q was already defined at %s; agent names must be unique.", a.Name, first)
			continue
		}
		seen[a.Name] = decl
		cfg.Agents = append(cfg.Agents, a)
	}

	if name, ok := e.str(raw.DefaultAgent); ok {
		cfg.DefaultAgent = name
		if _, found := seen[name]; !found {
			e.errorf(raw.DefaultAgent.Expr.Range(), "Unknown default agent",
				"No agent block is named %q; the configured agents are: %s.", name, agentNames(cfg.Agents))
		}
	}
	return cfg, e.diags
}

func (e *evaluator) agent(ra *rawAgent, decl hcl.Range) *Agent {
	a := &Agent{Name: ra.Name, Dialect: DefaultDialect, DeclRange: decl, DialectRange: decl}
	if strings.TrimSpace(ra.Name) == "" {
		e.errorf(decl, "Invalid agent name", "An agent's name must not be empty.")
	}
	if s, ok := e.str(ra.Dialect); ok {
		a.Dialect = s
		a.DialectRange = ra.Dialect.Expr.Range()
	}
	if argv, fromEnv, ok := e.strList(ra.Command); ok {
		if len(argv) == 0 || argv[0] == "" {
			e.errorf(ra.Command.Expr.Range(), "Invalid command",
				"command must be a non-empty list whose first element names the program, such as [\"gemini\", \"--experimental-acp\"].")
		}
		a.Command, a.argvFromEnv = argv, fromEnv
	}
	if env, ok := e.strMap(ra.Env); ok {
		a.Env = make(map[string]Secret, len(env))
		for k, v := range env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				e.errorf(ra.Env.Expr.Range(), "Invalid environment variable name",
					"%q cannot be an environment variable name.", k)
			}
			a.Env[k] = Secret(v)
		}
	}
	a.Dir, _ = e.path(ra.Dir)
	a.StopGrace, _ = e.duration(ra.StopGrace, Positive)
	if v, _, ok := e.value(ra.Protocol, cty.String); ok {
		switch v.AsString() {
		case "1", "2":
			a.AgentProtocol = int(v.AsString()[0] - '0')
		default:
			e.errorf(ra.Protocol.Expr.Range(), "Invalid agent_protocol",
				"agent_protocol is the ACP version to speak to the agent: 1 or 2 (leave it out to take the version the agent answers); got %q.", v.AsString())
		}
	}
	if ra.WebSocket != nil {
		a.WebSocket = e.webSocket(ra.WebSocket)
	}
	if ra.Options != nil {
		a.Options = ra.Options.Body
	}

	hasWebSocket := ra.WebSocket != nil
	if ra.Body != nil {
		if content, _, _ := ra.Body.PartialContent(webSocketHeader); content != nil && len(content.Blocks) > 0 {
			hasWebSocket = true
		}
	}
	switch {
	case ra.Command != nil && hasWebSocket:
		e.errorf(decl, "Conflicting agent transports",
			"Agent %q has both a command and a websocket block; give exactly one.", a.Name)
	case ra.Command == nil && !hasWebSocket:
		e.errorf(decl, "Missing agent transport",
			"Agent %q needs either a command argument (a child process) or a websocket block.", a.Name)
	}
	if a.WebSocket != nil && (ra.Env != nil || ra.Dir != nil || ra.StopGrace != nil) {
		e.errorf(decl, "Child-process arguments on a websocket agent",
			"env, dir and stop_grace apply to command agents only; agent %q uses a websocket.", a.Name)
	}
	return a
}

func (e *evaluator) webSocket(rw *rawWebSocket) *WebSocket {
	ws := &WebSocket{}
	if rw.URL == nil && rw.Body != nil {
		// The decoder (as gohcl) never requires pointer fields; report as HCL itself would.
		e.diags = append(e.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing required argument",
			Detail:   "The argument \"url\" is required, but no definition was found.",
			Subject:  rw.Body.MissingItemRange().Ptr(),
		})
	}
	if s, fromEnv, ok := e.strMarked(rw.URL); ok {
		ws.URL, ws.urlFromEnv = s, fromEnv
		if err := CheckAgentURL(s); err != nil {
			// Never echo a URL that may carry a token from env().
			shown := ""
			if r := redactURL(s); !fromEnv && r != redacted {
				shown = fmt.Sprintf(" %q", r)
			}
			e.errorf(rw.URL.Expr.Range(), "Invalid WebSocket URL",
				"The url%s cannot be dialled: %v.", shown, err)
		}
	}
	if h, ok := e.strMap(rw.Headers); ok {
		ws.Headers = make(map[string]Secret, len(h))
		for k, v := range h {
			if !validHeaderName(k) {
				e.errorf(rw.Headers.Expr.Range(), "Invalid header name", "%q is not a valid HTTP header name.", k)
			}
			if strings.ContainsAny(v, "\r\n\x00") {
				e.errorf(rw.Headers.Expr.Range(), "Invalid header value",
					"The value of header %q contains a line break or NUL.", k)
			}
			ws.Headers[k] = Secret(v)
		}
	}
	ws.Subprotocols, _, _ = e.strList(rw.Subprotocols)
	ws.CAFile, _ = e.path(rw.CAFile)
	ws.ConnectTimeout, _ = e.duration(rw.ConnectTimeout, Positive)
	ws.PingPeriod, _ = e.duration(rw.PingPeriod, ZeroDerives)
	ws.PongWait, _ = e.duration(rw.PongWait, Positive)
	return ws
}

// Validate checks what Load cannot know by itself: that every agent's
// dialect is one of the given names. Each diagnostic points at the
// dialect argument (or at the block header when the default was used).
func (c *Config) Validate(dialects []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, a := range c.Agents {
		if !slices.Contains(dialects, a.Dialect) {
			known := slices.Clone(dialects)
			sort.Strings(known)
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unknown dialect",
				Detail: fmt.Sprintf("Agent %q uses dialect %q; the known dialects are: %s.",
					a.Name, a.Dialect, strings.Join(known, ", ")),
				Subject: a.DialectRange.Ptr(),
			})
		}
	}
	return diags
}

// Agent returns the agent called name. An empty name selects
// DefaultAgent, or the only agent when there is just one.
func (c *Config) Agent(name string) (*Agent, error) {
	if name == "" {
		name = c.DefaultAgent
	}
	if name == "" {
		switch len(c.Agents) {
		case 0:
			return nil, fmt.Errorf("no agent is configured")
		case 1:
			return c.Agents[0], nil
		default:
			return nil, fmt.Errorf("%d agents are configured (%s) and no default_agent is set; choose one with --agent",
				len(c.Agents), agentNames(c.Agents))
		}
	}
	for _, a := range c.Agents {
		if a.Name == name {
			return a, nil
		}
	}
	if len(c.Agents) == 0 {
		return nil, fmt.Errorf("unknown agent %q: no agent is configured", name)
	}
	return nil, fmt.Errorf("unknown agent %q; the configured agents are: %s", name, agentNames(c.Agents))
}

// WriteDiagnostics renders diags with source snippets from files (typically
// Config.Files) to w, which should be os.Stderr: stdout belongs to ACP.
//
// Each diagnostic starts with a file:line:column line, the form editors and
// terminals make clickable, followed by HCL's rendering with the source line.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) error {
	var buf bytes.Buffer
	tw := hcl.NewDiagnosticTextWriter(&buf, files, 0, false)
	for _, d := range diags {
		buf.Reset()
		if err := tw.WriteDiagnostic(d); err != nil {
			return err
		}
		text := buf.String()
		if d.Subject != nil {
			sev := "error"
			if d.Severity == hcl.DiagWarning {
				sev = "warning"
			}
			// The header replaces HCL's own "Error: summary" line.
			_, text, _ = strings.Cut(text, "\n")
			s := d.Subject.Start
			text = fmt.Sprintf("%s:%d:%d: %s: %s\n", d.Subject.Filename, s.Line, s.Column, sev, d.Summary) + text
		}
		if _, err := io.WriteString(w, text); err != nil {
			return err
		}
	}
	return nil
}

var logLevels = []string{"trace", "debug", "info", "warn", "error", "off"}

func agentNames(agents []*Agent) string {
	if len(agents) == 0 {
		return "(none)"
	}
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
