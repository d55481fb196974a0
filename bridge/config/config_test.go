package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/hashicorp/hcl/v2"
)

// setTestEnv sets the variables testdata/good.hcl reads.
func setTestEnv(t *testing.T) {
	t.Setenv("TEST_ACP_BRIDGE_KEY", "sekrit-key")
	t.Setenv("TEST_ACP_BRIDGE_TOKEN", "sekrit-token")
	t.Setenv("TEST_ACP_BRIDGE_URL", "wss://env.example/acp?k=sekrit-url")
}

func TestLoad_good(t *testing.T) {
	setTestEnv(t)
	cfg, diags := Load("testdata/good.hcl")
	if diags.HasErrors() {
		t.Fatalf("Load: %s", diags.Error())
	}
	if got := cfg.Validate([]string{"acp", "acp-v0"}); got.HasErrors() {
		t.Fatalf("Validate: %s", got.Error())
	}

	if cfg.LogLevel != "debug" {
		t.Errorf("LogLevel = %q, want debug (lower-cased)", cfg.LogLevel)
	}
	if want := filepath.Join("testdata", "logs", "bridge.log"); cfg.LogFile != want {
		t.Errorf("LogFile = %q, want %q (relative to the file)", cfg.LogFile, want)
	}
	if cfg.MaxMessage != 2<<20 {
		t.Errorf("MaxMessage = %d, want %d", cfg.MaxMessage, 2<<20)
	}
	if cfg.RequestTimeout != -1 {
		t.Errorf("RequestTimeout = %v, want -1 (off)", cfg.RequestTimeout)
	}
	if cfg.CancelGrace != 1500*time.Millisecond {
		t.Errorf("CancelGrace = %v, want 1.5s", cfg.CancelGrace)
	}
	if cfg.DefaultAgent != "remote" || len(cfg.Agents) != 4 {
		t.Fatalf("DefaultAgent = %q, %d agents; want remote, 4", cfg.DefaultAgent, len(cfg.Agents))
	}
	if _, ok := cfg.Files["testdata/good.hcl"]; !ok {
		t.Errorf("Files = %v, want the loaded file", cfg.Files)
	}

	g := cfg.Agents[0]
	if g.Name != "gemini" || g.Dialect != "acp-v0" {
		t.Errorf("agent 0 = %q dialect %q", g.Name, g.Dialect)
	}
	if want := []string{"gemini", "--experimental-acp", "--key=sekrit-key"}; !reflect.DeepEqual(g.Command, want) {
		t.Errorf("Command = %q, want %q", g.Command, want)
	}
	if want := map[string]Secret{"GEMINI_API_KEY": "sekrit-key", "PLAIN": "plain-value"}; !reflect.DeepEqual(g.Env, want) {
		t.Errorf("Env differs") // values are secrets: do not print them
	}
	if want := filepath.Join("testdata", "work"); g.Dir != want {
		t.Errorf("Dir = %q, want %q", g.Dir, want)
	}
	if g.StopGrace != 3*time.Second {
		t.Errorf("StopGrace = %v", g.StopGrace)
	}
	if g.Options == nil {
		t.Fatal("Options = nil, want the options block body")
	}
	var opts struct {
		ProtocolVersion string `hcl:"protocol_version"`
	}
	if d := hcldecode.DecodeBody(g.Options, nil, &opts); d.HasErrors() || opts.ProtocolVersion != "0.0.9" {
		t.Errorf("options decoded to %+v, %v", opts, d)
	}
	if g.DialectRange.Start.Line != 10 {
		t.Errorf("DialectRange = %v, want line 10", g.DialectRange)
	}

	r := cfg.Agents[1]
	if r.Dialect != DefaultDialect || r.Command != nil || r.WebSocket == nil || r.Options != nil {
		t.Fatalf("agent remote = %+v", *r)
	}
	if r.DeclRange.Start.Line != 20 || r.DialectRange != r.DeclRange {
		t.Errorf("DeclRange = %v, DialectRange = %v; want line 20 for both", r.DeclRange, r.DialectRange)
	}
	ws := r.WebSocket
	if ws.URL != "wss://user:pw@agent.example/acp?token=t0k" {
		t.Errorf("URL = %q", ws.URL)
	}
	if string(ws.Headers["Authorization"]) != "Bearer sekrit-token" || string(ws.Headers["X-Plain"]) != "dflt" {
		t.Errorf("Headers differ")
	}
	if !reflect.DeepEqual(ws.Subprotocols, []string{"acp", "v1"}) || ws.CAFile != "/etc/ssl/ca.pem" {
		t.Errorf("Subprotocols = %q, CAFile = %q", ws.Subprotocols, ws.CAFile)
	}
	if ws.ConnectTimeout != 7*time.Second || ws.PingPeriod != -1 || ws.PongWait != 45*time.Second {
		t.Errorf("ConnectTimeout, PingPeriod, PongWait = %v, %v, %v; want 7s, -1, 45s",
			ws.ConnectTimeout, ws.PingPeriod, ws.PongWait)
	}

	m := cfg.Agents[2]
	if m.Name != "minimal" || m.Dialect != "acp" || len(m.Command) != 1 || m.Env != nil || m.StopGrace != 0 {
		t.Errorf("agent minimal = %+v", *m)
	}
	d := cfg.Agents[3]
	if d.WebSocket.URL != "wss://env.example/acp?k=sekrit-url" || d.WebSocket.PingPeriod != 0 {
		t.Errorf("agent derived: URL %q PingPeriod %v", d.WebSocket.URL, d.WebSocket.PingPeriod)
	}
}

func TestLoad_example(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "k")
	t.Setenv("AGENT_TOKEN", "t")
	cfg, diags := Load(filepath.Join("..", "..", "config.example.hcl"))
	if diags.HasErrors() {
		var b strings.Builder
		WriteDiagnostics(&b, cfg.Files, diags)
		t.Fatalf("config.example.hcl:\n%s", b.String())
	}
	if d := cfg.Validate([]string{"acp", "acp-v0"}); d.HasErrors() {
		t.Fatalf("Validate: %s", d.Error())
	}
	if len(cfg.Agents) != 2 || cfg.DefaultAgent != "gemini" {
		t.Errorf("agents = %d, default %q", len(cfg.Agents), cfg.DefaultAgent)
	}
}

// diag is the part of a diagnostic a bad file pins: its summary and where
// its subject starts.
type diag struct {
	summary string
	at      string // line:column
}

func TestLoad_bad(t *testing.T) {
	tests := []struct {
		file string
		want []diag
	}{
		{"bad_syntax.hcl", []diag{{"Missing item separator", "4:1"}}},
		{"bad_unknown.hcl", []diag{
			{"Unsupported argument", "2:1"},
			{"Unsupported argument", "6:3"},
			{"Unsupported block type", "7:3"},
		}},
		{"bad_values.hcl", []diag{
			{"Invalid log level", "1:19"},
			{"Invalid size", "2:19"},
			{"Invalid duration", "3:19"},
			{"Invalid duration", "4:19"},
			{"Invalid command", "7:16"},
			{"Invalid environment variable name", "9:16"},
			{"Invalid duration", "8:16"},
			{"Invalid WebSocket URL", "14:23"},
			{"Invalid header name", "15:23"},
			{"Invalid duration", "16:23"},
			{"Invalid duration", "17:23"},
			{"Invalid duration", "18:23"},
		}},
		{"bad_sizes.hcl", []diag{{"Invalid size", "1:15"}}},
		{"bad_agents.hcl", []diag{
			{"Conflicting agent transports", "3:1"},
			{"Missing agent transport", "10:1"},
			{"Duplicate agent", "14:1"},
			{"Missing required argument", "20:13"},
			{"Child-process arguments on a websocket agent", "18:1"},
			{"Unknown default agent", "1:17"},
		}},
		{"bad_env.hcl", []diag{
			{"Invalid function argument", "3:28"},
			{"Not enough function arguments", "6:18"},
			{"Invalid function argument", "9:34"},
			{"Call to unknown function", "13:19"},
		}},
		{"bad_types.hcl", []diag{
			{"Duplicate options block", "9:3"},
			{"Duplicate websocket block", "23:3"},
			{"Incorrect attribute value type", "1:13"},
			{"Incorrect attribute value type", "3:13"},
			{"Incorrect attribute value type", "16:20"},
			{"Incorrect attribute value type", "15:20"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", tt.file)
			cfg, diags := Load(path)
			var got []diag
			for _, d := range diags {
				if d.Subject == nil {
					t.Errorf("diagnostic %q has no source range", d.Summary)
					continue
				}
				if d.Subject.Filename != path {
					t.Errorf("diagnostic %q is in %q, want %q", d.Summary, d.Subject.Filename, path)
				}
				got = append(got, diag{d.Summary, fmt.Sprintf("%d:%d", d.Subject.Start.Line, d.Subject.Start.Column)})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("diagnostics =\n%s\nwant\n%s", fmtDiags(got), fmtDiags(tt.want))
			}
			if cfg == nil || cfg.Files[path] == nil || cfg.Agents != nil || cfg.LogLevel != "" {
				t.Errorf("on error Load returned %v, want only Files set", cfg)
			}
		})
	}
}

func fmtDiags(ds []diag) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "\t%s %s\n", d.at, d.summary)
	}
	return b.String()
}

func TestLoad_missingFile(t *testing.T) {
	cfg, diags := Load(filepath.Join(t.TempDir(), "nope.hcl"))
	if !diags.HasErrors() || cfg == nil {
		t.Fatalf("Load(missing) = %v, %v; want an error and a Config with Files", cfg, diags)
	}
}

// A file that cannot be read is named with the OS's cause.
func TestLoad_unreadableNamesCause(t *testing.T) {
	dir := t.TempDir() // a directory is not a readable file
	_, diags := Load(dir)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), dir) || !strings.Contains(diags.Error(), "is a directory") {
		t.Errorf("Load(directory) = %v; want the path and the cause", diags)
	}
}

// Check makes an unset env() variable a warning at its position, with a
// placeholder standing in, and still reports the file's real errors; Load
// keeps it an error.
func TestCheck_unsetEnvIsAWarning(t *testing.T) {
	src := "agent \"a\" {\n  command = [\"x\"]\n  env = { KEY = env(\"ACP_BRIDGE_TEST_UNSET_VAR\") }\n}\n"
	path := filepath.Join(t.TempDir(), "c.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Check(path)
	if diags.HasErrors() || len(diags) != 1 || diags[0].Severity != hcl.DiagWarning {
		t.Fatalf("Check = %v; want one warning", diags)
	}
	if d := diags[0]; d.Subject == nil || d.Subject.Start.Line != 3 || !strings.Contains(d.Detail, "ACP_BRIDGE_TEST_UNSET_VAR") {
		t.Errorf("warning = %+v", d)
	}
	if len(cfg.Agents) != 1 {
		t.Errorf("Check's config has %d agents", len(cfg.Agents))
	}
	if _, diags := Load(path); !diags.HasErrors() {
		t.Error("Load accepted an unset env() variable")
	}
	bad := filepath.Join(t.TempDir(), "bad.hcl")
	if err := os.WriteFile(bad, []byte(src+"log_level = \"loud\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, diags := Check(bad); !diags.HasErrors() {
		t.Error("Check hid a real error behind the warning")
	}
}

func TestWriteDiagnostics(t *testing.T) {
	cfg, diags := Load("testdata/bad_values.hcl")
	var b strings.Builder
	if err := WriteDiagnostics(&b, cfg.Files, diags[:1]); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"testdata/bad_values.hcl:1:19: error: Invalid log level\n", "on testdata/bad_values.hcl line 1:", `log_level       = "loud"`} {
		if !strings.Contains(out, want) {
			t.Errorf("WriteDiagnostics output lacks %q:\n%s", want, out)
		}
	}
}

func TestValidate(t *testing.T) {
	cfg, diags := Parse([]byte(`
agent "a" {
  command = ["x"]
}
agent "b" {
  dialect = "klingon"
  command = ["x"]
}
`), "v.hcl")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	got := cfg.Validate([]string{"acp-v0", "acp"})
	if len(got) != 1 || got[0].Summary != "Unknown dialect" || got[0].Subject.Start.Line != 6 || got[0].Subject.Start.Column != 13 {
		t.Fatalf("Validate = %v, want one Unknown dialect at 6:13", got)
	}
	if !strings.Contains(got[0].Detail, `"klingon"`) || !strings.Contains(got[0].Detail, "acp, acp-v0") {
		t.Errorf("detail = %q, want the dialect and the sorted known names", got[0].Detail)
	}
	if got := cfg.Validate([]string{"acp", "klingon"}); got.HasErrors() {
		t.Errorf("Validate with klingon known = %v", got)
	}
}

func TestEnvFunction(t *testing.T) {
	t.Setenv("TEST_ACP_BRIDGE_SET", "value")
	t.Setenv("TEST_ACP_BRIDGE_EMPTY", "")
	tests := []struct {
		expr    string
		want    string
		wantErr string
	}{
		{`env("TEST_ACP_BRIDGE_SET")`, "value", ""},
		{`env("TEST_ACP_BRIDGE_SET", "d")`, "value", ""},
		{`env("TEST_ACP_BRIDGE_EMPTY", "d")`, "", ""},
		{`env("TEST_ACP_BRIDGE_UNSET_X", "d")`, "d", ""},
		{`"a-${env("TEST_ACP_BRIDGE_SET")}-b"`, "a-value-b", ""},
		{`env("TEST_ACP_BRIDGE_UNSET_X")`, "", "TEST_ACP_BRIDGE_UNSET_X is not set"},
		{`env("A", "b", "c")`, "", "at most one default"},
		{`env(["x"])`, "", "string required"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			cfg, diags := Parse([]byte("agent \"a\" {\n  command = [\"x\", "+tt.expr+"]\n}\n"), "env.hcl")
			if tt.wantErr != "" {
				if !diags.HasErrors() || !strings.Contains(diags.Error(), tt.wantErr) {
					t.Fatalf("diags = %v, want an error containing %q", diags, tt.wantErr)
				}
				if diags[0].Subject == nil || diags[0].Subject.Start.Line != 2 {
					t.Errorf("subject = %v, want line 2", diags[0].Subject)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			a := cfg.Agents[0]
			if a.Command[1] != tt.want {
				t.Errorf("value = %q, want %q", a.Command[1], tt.want)
			}
			if got := a.Argv(); got[0] != "x" || got[1] != redacted {
				t.Errorf("Argv() = %q, want the env() argument redacted", got)
			}
		})
	}
}

// TestRedaction prints a loaded Config every way a log line might and
// checks that no env() value, header value or agent environment value, nor
// the URL's credentials, shows up.
func TestRedaction(t *testing.T) {
	setTestEnv(t)
	cfg, diags := Load("testdata/good.hcl")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	secrets := []string{"sekrit", "plain-value", "dflt", "t0k", ":pw@"}
	var outputs []string
	for _, v := range []any{cfg, *cfg, cfg.Agents, cfg.Agents[0], *cfg.Agents[0], cfg.Agents[1].WebSocket,
		*cfg.Agents[1].WebSocket, cfg.Agents[0].Env, cfg.Agents[1].WebSocket.Headers, cfg.Agents[3]} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			outputs = append(outputs, fmt.Sprintf(verb, v))
		}
	}
	b, err := json.Marshal(map[string]any{"env": cfg.Agents[0].Env, "headers": cfg.Agents[1].WebSocket.Headers})
	if err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, string(b))
	for _, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("output leaks %q: %s", s, out)
			}
		}
	}
	// Redaction must not hide what is not secret.
	desc := cfg.Agents[0].String() + " " + cfg.Agents[1].String()
	for _, want := range []string{`agent "gemini"`, "acp-v0", "gemini --experimental-acp <redacted>",
		"GEMINI_API_KEY=<redacted>", "wss://<redacted>@agent.example/acp?<redacted>", "Authorization=<redacted>"} {
		if !strings.Contains(desc, want) {
			t.Errorf("description %q lacks %q", desc, want)
		}
	}
	if got := cfg.Agents[3].WebSocket.RedactedURL(); got != redacted {
		t.Errorf("RedactedURL of an env() URL = %q, want %q", got, redacted)
	}
}

// TestBadURL_notEchoedFromEnv checks that an invalid URL computed by env()
// is not quoted in the diagnostic.
func TestBadURL_notEchoedFromEnv(t *testing.T) {
	t.Setenv("TEST_ACP_BRIDGE_BADURL", "ftp://h/?token=sekrit")
	_, diags := Parse([]byte(`agent "a" {
  websocket {
    url = env("TEST_ACP_BRIDGE_BADURL")
  }
}
`), "u.hcl")
	if !diags.HasErrors() || diags[0].Summary != "Invalid WebSocket URL" {
		t.Fatalf("diags = %v", diags)
	}
	if strings.Contains(diags.Error(), "sekrit") || strings.Contains(diags.Error(), "ftp://h") {
		t.Errorf("diagnostic echoes the env() value: %s", diags.Error())
	}
}

func TestAgent(t *testing.T) {
	one := &Config{Agents: []*Agent{{Name: "a"}}}
	two := &Config{Agents: []*Agent{{Name: "a"}, {Name: "b"}}}
	twoDefault := &Config{Agents: two.Agents, DefaultAgent: "b"}
	tests := []struct {
		cfg     *Config
		name    string
		want    string
		wantErr string
	}{
		{one, "", "a", ""},
		{one, "a", "a", ""},
		{one, "z", "", `unknown agent "z"; the configured agents are: a`},
		{two, "", "", "2 agents are configured (a, b) and no default_agent"},
		{two, "b", "b", ""},
		{twoDefault, "", "b", ""},
		{twoDefault, "a", "a", ""},
		{&Config{}, "", "", "no agent is configured"},
		{&Config{}, "x", "", `unknown agent "x": no agent is configured`},
	}
	for _, tt := range tests {
		a, err := tt.cfg.Agent(tt.name)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Agent(%q) error = %v, want %q", tt.name, err, tt.wantErr)
			}
		case err != nil || a.Name != tt.want:
			t.Errorf("Agent(%q) = %v, %v; want %q", tt.name, a, err, tt.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0", 0, false},
		{"1048576", 1 << 20, false},
		{"512B", 512, false},
		{"64MiB", 64 << 20, false},
		{"64 MiB", 64 << 20, false},
		{"64mib", 64 << 20, false},
		{"2KiB", 2048, false},
		{"1GiB", 1 << 30, false},
		{"1KB", 1000, false},
		{"64MB", 64_000_000, false},
		{"2GB", 2_000_000_000, false},
		{"", 0, true},
		{"MiB", 0, true},
		{"1.5MiB", 0, true},
		{"-1MiB", 0, true},
		{"64 parsecs", 0, true},
		{"99999999999999999999", 0, true},
		{"9999999999999GiB", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	for n, want := range map[int64]string{1024: "1KiB", 64 << 20: "64MiB", 1 << 30: "1GiB", 1000: "1000B", 0: "0B"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestMaxMessage(t *testing.T) {
	tests := []struct {
		src     string
		want    int
		wantErr string
	}{
		{`max_message = 4096`, 4096, ""},
		{`max_message = "1KiB"`, 1024, ""},
		{`max_message = "1GiB"`, 1 << 30, ""},
		{`max_message = "1023"`, 0, "outside the accepted range"},
		{`max_message = "2GiB"`, 0, "outside the accepted range"},
		{`max_message = 1.5`, 0, "not a whole number"},
		{`max_message = -4096`, 0, "not a whole number"},
		{`max_message = true`, 0, "a size such as"},
	}
	for _, tt := range tests {
		cfg, diags := Parse([]byte(tt.src), "m.hcl")
		if tt.wantErr != "" {
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tt.wantErr) {
				t.Errorf("%s: diags = %v, want %q", tt.src, diags, tt.wantErr)
			}
			continue
		}
		if diags.HasErrors() || cfg.MaxMessage != tt.want {
			t.Errorf("%s: MaxMessage = %d, %v; want %d", tt.src, cfg.MaxMessage, diags, tt.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		rule    DurationRule
		want    time.Duration
		wantErr bool
	}{
		{"30s", Positive, 30 * time.Second, false},
		{"1m30s", Positive, 90 * time.Second, false},
		{"500ms", Positive, 500 * time.Millisecond, false},
		{"0s", Positive, 0, true},
		{"off", Positive, 0, true},
		{"-1s", Positive, 0, true},
		{"30", Positive, 0, true},
		{"0s", ZeroDisables, -1, false},
		{"0", ZeroDisables, -1, false},
		{"off", ZeroDisables, -1, false},
		{"OFF", ZeroDisables, -1, false},
		{"60s", ZeroDisables, time.Minute, false},
		{"0s", ZeroDerives, 0, false},
		{"off", ZeroDerives, -1, false},
		{"20s", ZeroDerives, 20 * time.Second, false},
		{"-20s", ZeroDerives, 0, true},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in, tt.rule)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseDuration(%q, %d) = %v, %v; want %v, error %v", tt.in, tt.rule, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestNullMeansUnset(t *testing.T) {
	cfg, diags := Parse([]byte("log_level = null\nrequest_timeout = null\n"), "n.hcl")
	if diags.HasErrors() || cfg.LogLevel != "" || cfg.RequestTimeout != 0 {
		t.Errorf("Parse(nulls) = %v, %v", cfg, diags)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/xdg")
	t.Setenv("HOME", "/home/u")
	got := DefaultPath()
	if !strings.HasSuffix(got, filepath.Join("acp-bridge", "config.hcl")) || !filepath.IsAbs(got) {
		t.Errorf("DefaultPath() = %q", got)
	}
}

// A configuration nested a million brackets deep is refused with a position,
// not parsed: the HCL parser is recursive and would overflow its stack.
func TestParse_DeepNestingRefused(t *testing.T) {
	for _, src := range []string{
		"x = " + strings.Repeat("[", 1_000_000),
		"agent \"a\" {\n  command = [\"x\"]\n  env = " + strings.Repeat("{a = ", 5000) + "\n}\n",
	} {
		_, diags := Parse([]byte(src), "deep.hcl")
		if !diags.HasErrors() || diags[0].Summary != "Nested too deeply" || diags[0].Subject == nil || diags[0].Subject.Filename != "deep.hcl" {
			t.Errorf("deep config: diagnostics %v", diags)
		}
	}
	// Brackets in strings and comments do not count.
	src := "# " + strings.Repeat("[", 2000) + "\nagent \"a\" {\n  command = [\"" + strings.Repeat("[", 2000) + "\"]\n}\n"
	if _, diags := Parse([]byte(src), "ok.hcl"); diags.HasErrors() {
		t.Errorf("brackets in a comment and a string refused: %v", diags)
	}
}

// FuzzParse feeds the configuration loader arbitrary text: it must never
// panic or crash, and every error must say where it is.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"agent \"a\" {\n  command = [\"x\"]\n}\n",
		"agent \"r\" {\n  websocket {\n    url = \"ws://h/\"\n    headers = { A = env(\"X\") }\n  }\n}\n",
		"log_level = \"debug\"\nmax_message = \"1MiB\"\n",
		"serve {\n  listen = \"127.0.0.1:0\"\n  token = env(\"X\", \"t\")\n  allow_origins = [\"*\"]\n  max_buffered = 4096\n}\n",
		"x = " + strings.Repeat("[", 3000),
		"agent \"\xff\" {}",
		"/* unterminated",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, diags := Parse(src, "fuzz.hcl")
		for _, d := range diags {
			if d.Severity == hcl.DiagError && d.Subject == nil && d.Summary != "Invalid default agent" {
				t.Logf("error without a position: %s: %s", d.Summary, d.Detail)
			}
		}
		if !diags.HasErrors() && cfg != nil {
			_ = cfg.Validate([]string{"acp", "acp-v0"})
		}
	})
}

func TestParse_QueueBytes(t *testing.T) {
	cfg, diags := Parse([]byte("queue_bytes = \"256KiB\"\n"), "q.hcl")
	if diags.HasErrors() || cfg.QueueBytes != 256<<10 {
		t.Errorf("queue_bytes = %d, %v", cfg.QueueBytes, diags)
	}
	if _, diags := Parse([]byte("queue_bytes = \"1KiB\"\n"), "q.hcl"); !diags.HasErrors() || diags[0].Subject == nil {
		t.Errorf("queue_bytes below the minimum accepted: %v", diags)
	}
}
