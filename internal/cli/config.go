package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/hashicorp/hcl/v2"
	"github.com/urfave/cli/v2"
)

// configPath returns the configuration file the command line names (or
// the default one) and whether it was given explicitly.
func configPath(c *cli.Context) (path string, explicit bool) {
	l := lineage{c}
	return l.String(launch.FlagConfig), l.IsSet(launch.FlagConfig)
}

// unreadableConfig returns the error for a --config FILE that cannot be
// read, in the bridge's words rather than HCL's, or nil.
func unreadableConfig(path string) error {
	f, err := os.Open(path)
	if err == nil {
		f.Close()
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is said once, below
	}
	fix := "give the right path"
	if errors.Is(err, fs.ErrNotExist) {
		fix = fmt.Sprintf("create it with 'acp-bridge config init --%s %s', or give another file", launch.FlagConfig, path)
	}
	return fmt.Errorf("--%s %s: cannot read the configuration file: %v; %s", launch.FlagConfig, path, err, fix)
}

// checkConfig loads path for checking (config.Check: an unset environment
// variable is a warning) and the rule profile file profile (--profile),
// either of which may be "", and runs every check serving would, writing
// the diagnostics to stderr.
func checkConfig(path, profile string) (*config.Config, error) {
	cfg, diags, err := checkConfigDiags(path, profile)
	if err != nil {
		return nil, err
	}
	if len(diags) > 0 {
		_ = config.WriteDiagnostics(os.Stderr, cfg.Files, diags)
	}
	if diags.HasErrors() {
		return nil, launch.ReportedError{Err: diags}
	}
	return cfg, nil
}

// checkConfigDiags is checkConfig returning the diagnostics rather than
// writing them; err is for a file that cannot be read at all.
func checkConfigDiags(path, profile string) (*config.Config, hcl.Diagnostics, error) {
	cfg := &config.Config{Files: map[string]*hcl.File{}}
	var diags hcl.Diagnostics
	if path != "" {
		if err := unreadableConfig(path); err != nil {
			return nil, nil, err
		}
		cfg, diags = config.Check(path)
	}
	if profile != "" && !diags.HasErrors() {
		diags = append(diags, addProfile(cfg, profile)...)
	}
	if !diags.HasErrors() {
		diags = append(diags, launch.AddUserDialects(cfg)...)
	}
	if !diags.HasErrors() {
		diags = append(diags, cfg.Validate(launch.DialectNames())...)
	}
	if !diags.HasErrors() {
		for _, a := range cfg.Agents {
			_, moreDiags := launch.Dialects()[a.Dialect].Configure(a.Options)
			diags = append(diags, moreDiags...)
		}
	}
	return cfg, diags, nil
}

// validateReport is config validate's result for scripts (--json).
type validateReport struct {
	OK          bool         `json:"ok"`
	File        string       `json:"file"`
	Profile     string       `json:"profile,omitempty"` // --profile FILE
	Agents      []string     `json:"agents"`
	Diagnostics []diagReport `json:"diagnostics"`
}

type diagReport struct {
	Severity string `json:"severity"` // error or warning
	Summary  string `json:"summary"`
	Detail   string `json:"detail,omitempty"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
}

// validateAction checks the configuration file and the --profile file,
// either alone when only it is there.
func validateAction(c *cli.Context) error {
	path, explicit := configPath(c)
	profile := lineage{c}.String(flagProfile)
	if path == "" && profile == "" {
		return launch.Usagef("no configuration file: give --%s FILE (or --%s FILE)", launch.FlagConfig, flagProfile)
	}
	if path != "" && !explicit {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			if profile == "" {
				return fmt.Errorf("no configuration file at %s (give --%s FILE, or create one with 'acp-bridge config init')", path, launch.FlagConfig)
			}
			path = ""
		}
	}
	if c.Bool("json") {
		return validateJSON(path, profile)
	}
	cfg, err := checkConfig(path, profile)
	if err != nil {
		return err
	}
	noun := "agents"
	if len(cfg.Agents) == 1 {
		noun = "agent"
	}
	if profile == "" {
		_, err = fmt.Fprintf(os.Stdout, "ok: %d %s\n", len(cfg.Agents), noun)
	} else {
		_, err = fmt.Fprintf(os.Stdout, "ok: %d %s, profile %s\n", len(cfg.Agents), noun, profileName(profile))
	}
	return err
}

// validateJSON prints config validate's result as one JSON object; the
// exit status is 1 when the files have errors, as without --json.
func validateJSON(path, profile string) error {
	cfg, diags, err := checkConfigDiags(path, profile)
	if err != nil {
		return err
	}
	r := validateReport{OK: !diags.HasErrors(), File: path, Profile: profile, Agents: []string{}, Diagnostics: []diagReport{}}
	for _, a := range cfg.Agents {
		r.Agents = append(r.Agents, a.Name)
	}
	for _, d := range diags {
		dr := diagReport{Severity: "warning", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagError {
			dr.Severity = "error"
		}
		if d.Subject != nil {
			dr.File, dr.Line, dr.Column = d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column
		}
		r.Diagnostics = append(r.Diagnostics, dr)
	}
	if err := writeJSON(r); err != nil {
		return err
	}
	if !r.OK {
		return launch.ReportedError{Err: diags}
	}
	return nil
}

// writeJSON prints v on stdout as indented JSON, the form of every --json.
func writeJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// configShowAction prints the configuration as the bridge would serve it:
// the files read, every setting with where its value came from, the
// configured agents and the one that would be served. Secrets are masked:
// values computed by env(), header and agent environment values, and
// whatever --header reads from the environment.
func configShowAction(c *cli.Context) error {
	path, explicit := configPath(c)
	profile := lineage{c}.String(flagProfile)
	if _, err := os.Stat(path); path != "" && !explicit && errors.Is(err, os.ErrNotExist) {
		path = ""
	}
	cfg := &config.Config{}
	var read []string
	if path != "" || profile != "" {
		var err error
		if cfg, err = checkConfig(path, profile); err != nil {
			return err
		}
		for _, f := range []string{path, profile} {
			if f != "" {
				read = append(read, f)
			}
		}
	}
	f := flagsFrom(c)
	s, err := launch.ResolveSettings(cfg, f)
	if err != nil {
		return err
	}
	args, _ := c.App.Metadata["args"].([]string)
	origin := func(flag string, inFile bool) string {
		switch {
		case f.Set[flag] && givenOnCommandLine(args, flag):
			return "flag --" + flag
		case f.Set[flag]:
			return "env " + envTwin(flag)[0]
		case inFile:
			return "file"
		}
		return "default"
	}

	var secrets []string
	r := showReport{Files: []string{}, Agents: []showAgent{}, Overrides: []showOverride{}}
	for _, p := range read {
		abs, _ := filepath.Abs(p)
		r.Files = append(r.Files, abs)
	}
	if len(read) == 0 {
		r.LookedFor = orNone(path)
	}
	logFile := s.LogFile
	if logFile == "" {
		logFile = "stderr"
	}
	logFormat := s.LogFormat
	if logFormat == "" {
		logFormat = "text"
	}
	orDefault := func(v, def string) string {
		if v == "0s" || v == "0" || v == "" {
			return def
		}
		return v
	}
	// Each row: setting, value, flag, the file's value ("" when unset).
	rows := [][4]string{
		{"log_level", strings.ToLower(s.LogLevel.String()), launch.FlagLogLevel, cfg.LogLevel},
		{"log_file", logFile, launch.FlagLogFile, cfg.LogFile},
		{"log_format", logFormat, launch.FlagLogFormat, ""},
		{"max_message", orDefault(sizeOr0(s.MaxMessage), "64MiB"), launch.FlagMaxMessage, sizeOr0(cfg.MaxMessage)},
		{"queue_bytes", orDefault(sizeOr0(s.QueueBytes), "128KiB"), launch.FlagQueueBytes, sizeOr0(cfg.QueueBytes)},
		{"request_timeout", requestTimeout(s.RequestTimeout.String()), launch.FlagRequestTimeout, durOr0(cfg.RequestTimeout.String())},
		{"cancel_grace", orDefault(s.CancelGrace.String(), "5s"), launch.FlagCancelGrace, durOr0(cfg.CancelGrace.String())},
		{"editor_protocol", protocolSetting(s.EditorProtocol), launch.FlagEditorProtocol, protocolOr0(cfg.EditorProtocol)},
	}
	for _, row := range rows {
		from := origin(row[2], row[3] != "")
		if f.Set[row[2]] && row[3] != "" {
			from += ", over the file's " + row[3]
		}
		r.Settings = append(r.Settings, showSetting{Name: row[0], Value: row[1], From: from})
	}
	for _, a := range cfg.Agents {
		r.Agents = append(r.Agents, showAgent{Name: a.Name, Desc: a.String(), Default: a.Name == cfg.DefaultAgent})
		for _, v := range a.Env {
			secrets = append(secrets, string(v))
		}
		if a.WebSocket != nil {
			for _, v := range a.WebSocket.Headers {
				secrets = append(secrets, string(v))
				if _, token, ok := strings.Cut(string(v), " "); ok {
					secrets = append(secrets, token)
				}
			}
		}
	}
	spec, err := launch.ResolveAgent(cfg, f, os.LookupEnv)
	switch {
	case err != nil:
		r.WouldServe.Nothing = err.Error()
	default:
		secrets = append(secrets, spec.Secrets()...)
		how := "the only agent"
		switch {
		case f.URL != "":
			how = "--" + launch.FlagURL
		case len(f.Argv) > 0:
			how = "the command after --"
		case f.Agent != "":
			how = origin(launch.FlagAgent, false)
		case cfg.DefaultAgent != "":
			how = "default_agent in the file"
		}
		r.WouldServe.Agent, r.WouldServe.ChosenBy, r.WouldServe.Ignored = spec.Desc, how, spec.Ignored
	}
	for _, spec := range serveFlagSpecs {
		name := spec.name
		if !f.Set[name] || name == launch.FlagConfig {
			continue
		}
		value := lineage{c}.String(name)
		if sl := (lineage{c}).StringSlice(name); len(sl) > 0 {
			value = strings.Join(sl, ",")
		}
		r.Overrides = append(r.Overrides, showOverride{Flag: "--" + name, Value: value, From: origin(name, false)})
	}

	var out strings.Builder
	if c.Bool("json") {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		out.Write(b)
		out.WriteByte('\n')
	} else {
		r.writeText(&out)
	}
	// Everything above is built from redacting String methods; the
	// scrubber is the second line of defence for a value quoted elsewhere.
	_, err = io.WriteString(os.Stdout, launch.NewScrubber(secrets...).Scrub(out.String()))
	return err
}

// showReport is what config show prints, as text or, with --json, as one
// JSON object.
type showReport struct {
	Files      []string      `json:"files_read"`
	LookedFor  string        `json:"looked_for,omitempty"`
	Settings   []showSetting `json:"settings"`
	Agents     []showAgent   `json:"agents"`
	WouldServe struct {
		Agent    string   `json:"agent,omitempty"`
		ChosenBy string   `json:"chosen_by,omitempty"`
		Ignored  []string `json:"ignored_flags,omitempty"`
		Nothing  string   `json:"nothing,omitempty"` // why nothing would be served
	} `json:"would_serve"`
	Overrides []showOverride `json:"overrides"`
}

type showSetting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	From  string `json:"from"`
}

type showAgent struct {
	Name    string `json:"name"`
	Desc    string `json:"description"`
	Default bool   `json:"default_agent"`
}

type showOverride struct {
	Flag  string `json:"flag"`
	Value string `json:"value"`
	From  string `json:"from"`
}

func (r *showReport) writeText(out *strings.Builder) {
	fmt.Fprintln(out, "files read:")
	if len(r.Files) == 0 {
		fmt.Fprintf(out, "  none (looked for %s)\n", r.LookedFor)
	}
	for _, p := range r.Files {
		fmt.Fprintf(out, "  %s\n", p)
	}
	fmt.Fprintln(out, "settings:")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, s := range r.Settings {
		fmt.Fprintf(w, "  %s\t%s\t(%s)\n", s.Name, s.Value, s.From)
	}
	w.Flush()
	fmt.Fprintln(out, "agents:")
	if len(r.Agents) == 0 {
		fmt.Fprintln(out, "  none configured")
	}
	for _, a := range r.Agents {
		mark := ""
		if a.Default {
			mark = " [default_agent]"
		}
		fmt.Fprintf(out, "  %s%s\n", a.Desc, mark)
	}
	fmt.Fprintln(out, "would serve:")
	if r.WouldServe.Nothing != "" {
		fmt.Fprintf(out, "  nothing: %s\n", r.WouldServe.Nothing)
	} else {
		fmt.Fprintf(out, "  %s (chosen by %s)\n", r.WouldServe.Agent, r.WouldServe.ChosenBy)
		for _, name := range r.WouldServe.Ignored {
			fmt.Fprintf(out, "  %s is ignored: it applies to websocket agents only\n", name)
		}
	}
	fmt.Fprintln(out, "overrides:")
	for _, o := range r.Overrides {
		fmt.Fprintf(out, "  %s %s (%s)\n", o.Flag, o.Value, o.From)
	}
	if len(r.Overrides) == 0 {
		fmt.Fprintln(out, "  none")
	}
}

func orNone(path string) string {
	if path == "" {
		return "no configuration directory"
	}
	return path
}

func sizeOr0(n int) string {
	if n == 0 {
		return ""
	}
	return config.FormatSize(int64(n))
}

func requestTimeout(d string) string {
	switch {
	case d == "0s":
		return "60s"
	case strings.HasPrefix(d, "-"):
		return "off"
	}
	return d
}

// givenOnCommandLine reports whether --name (or -name) is among args.
func givenOnCommandLine(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// configInitAction writes the starter configuration at --config's path (by
// default the default path), creating its directory, and never overwrites
// an existing file.
func configInitAction(c *cli.Context) error {
	path, _ := configPath(c)
	if path == "" {
		return launch.Usagef("no user configuration directory; give --%s FILE", launch.FlagConfig)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("config init: %w", err)
	}
	// O_EXCL: the check and the creation are one step, so that a file
	// created meanwhile is not overwritten either.
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("config init: %s already exists; not overwriting it (check it with 'acp-bridge config validate --%s %s')", path, launch.FlagConfig, path)
	}
	if err != nil {
		return fmt.Errorf("config init: %w", err)
	}
	if _, err := io.WriteString(file, starterConfig); err != nil {
		file.Close()
		return fmt.Errorf("config init: %w", err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("config init: %w", err)
	}
	_, err = fmt.Fprintf(os.Stdout, "wrote %s\nedit it, then: acp-bridge config validate --%s %s\n", path, launch.FlagConfig, path)
	return err
}

// starterConfig is what config init writes: every agent commented out, so
// that it validates as it is, with one example per kind of user.
const starterConfig = `# acp-bridge configuration (written by 'acp-bridge config init').
# Every option, with comments: config.example.hcl in the acp-bridge sources.
# Check this file with:  acp-bridge config validate
# See what it resolves to: acp-bridge config show
#
# Secrets come from the environment: env("NAME"). Serving fails when NAME is
# unset; 'config validate' only warns.

# log_level = "info"     # trace, debug, info, warn, error, off
# log_file  = ""         # default: stderr

# The agent served when the editor runs plain 'acp-bridge'.
# default_agent = "my-agent"

# A WebSocket agent with its own JSON format (see 'acp-bridge dialects'):
# agent "my-agent" {
#   dialect = "open-interpreter"
#   websocket {
#     url = "ws://127.0.0.1:8000/"
#     headers = {
#       Authorization = "Bearer ${env("AGENT_TOKEN")}"
#     }
#   }
# }

# Gemini CLI, which speaks the older ACP (acp-v0), as a child process:
# agent "gemini" {
#   dialect = "acp-v0"
#   command = ["gemini", "--experimental-acp"]
#   env = {
#     GEMINI_API_KEY = env("GEMINI_API_KEY")
#   }
# }

# An ACP v1 agent relayed as it is (for logs and protocol testing):
# agent "relay" {
#   command = ["my-acp-agent", "--stdio"]
# }
`

// commandName is the subcommand as typed: "config validate".
func commandName(c *cli.Context) string {
	return strings.TrimPrefix(c.Command.HelpName, c.App.Name+" ")
}

func durOr0(d string) string {
	if d == "0s" {
		return ""
	}
	return requestTimeout(d)
}

// protocolSetting shows an ACP version setting; 0 is "auto".
func protocolSetting(v int) string {
	if v == 0 {
		return "auto"
	}
	return strconv.Itoa(v)
}

// protocolOr0 is the file's version setting, "" when unset.
func protocolOr0(v int) string {
	if v == 0 {
		return ""
	}
	return strconv.Itoa(v)
}
