package launch

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/legacy"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/go-hclog"
)

func TestResolveSettings(t *testing.T) {
	cfg := &config.Config{LogLevel: "debug", LogFile: "/cfg.log", MaxMessage: 1 << 20,
		RequestTimeout: 30 * time.Second, CancelGrace: 2 * time.Second}
	tests := []struct {
		name    string
		cfg     *config.Config
		f       Flags
		want    Settings
		wantErr string
	}{
		{name: "defaults", cfg: &config.Config{}, want: Settings{LogLevel: hclog.Info}},
		{name: "file", cfg: cfg, want: Settings{LogLevel: hclog.Debug, LogFile: "/cfg.log", MaxMessage: 1 << 20,
			RequestTimeout: 30 * time.Second, CancelGrace: 2 * time.Second}},
		{name: "flags win", cfg: cfg, f: Flags{LogLevel: "off", LogFile: "", MaxMessage: "2MiB",
			RequestTimeout: "off", CancelGrace: "1s", Set: set(FlagLogLevel, FlagLogFile, FlagMaxMessage, FlagRequestTimeout, FlagCancelGrace)},
			want: Settings{LogLevel: hclog.Off, MaxMessage: 2 << 20, RequestTimeout: -1, CancelGrace: time.Second}},
		{name: "unset flags do not win", cfg: cfg, f: Flags{LogLevel: "trace", RequestTimeout: "1s"},
			want: Settings{LogLevel: hclog.Debug, LogFile: "/cfg.log", MaxMessage: 1 << 20,
				RequestTimeout: 30 * time.Second, CancelGrace: 2 * time.Second}},
		{name: "queue budget from the file", cfg: &config.Config{QueueBytes: 8 << 10}, want: Settings{LogLevel: hclog.Info, QueueBytes: 8 << 10}},
		{name: "queue budget flag wins", cfg: &config.Config{QueueBytes: 8 << 10}, f: Flags{QueueBytes: "2MiB", Set: set(FlagQueueBytes)},
			want: Settings{LogLevel: hclog.Info, QueueBytes: 2 << 20}},
		{name: "queue budget too small", cfg: &config.Config{}, f: Flags{QueueBytes: "1KiB", Set: set(FlagQueueBytes)}, wantErr: "--queue-bytes"},
		{name: "request timeout 0s disables", cfg: &config.Config{}, f: Flags{RequestTimeout: "0s", Set: set(FlagRequestTimeout)},
			want: Settings{LogLevel: hclog.Info, RequestTimeout: -1}},
		{name: "bad level", cfg: &config.Config{}, f: Flags{LogLevel: "loud", Set: set(FlagLogLevel)}, wantErr: "--log-level"},
		{name: "bad size", cfg: &config.Config{}, f: Flags{MaxMessage: "12 parsecs", Set: set(FlagMaxMessage)}, wantErr: "--max-message"},
		{name: "tiny size", cfg: &config.Config{}, f: Flags{MaxMessage: "10", Set: set(FlagMaxMessage)}, wantErr: "outside the accepted range"},
		{name: "zero grace", cfg: &config.Config{}, f: Flags{CancelGrace: "0s", Set: set(FlagCancelGrace)}, wantErr: "--cancel-grace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveSettings(tt.cfg, tt.f)
			if tt.wantErr != "" {
				var ue UsageError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &ue) {
					t.Fatalf("error = %v, want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ResolveSettings = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func TestResolveAgent(t *testing.T) {
	t.Setenv("TEST_ACP_BRIDGE_TOKEN", "unused") // lookups go through the fake below
	cfgSrc := `
default_agent = "ws"
agent "cmd" {
  dialect    = "acp-v0"
  command    = ["gemini", "--experimental-acp"]
  env        = { B = "2", A = "1" }
  dir        = "/work"
  stop_grace = "3s"
  options {
    protocol_version = "0.0.9"
  }
}
agent "ws" {
  websocket {
    url             = "wss://agent.example/acp"
    headers         = { Authorization = "Bearer file", X-Keep = "k" }
    subprotocols    = ["acp"]
    ca_file         = "/ca.pem"
    connect_timeout = "7s"
    ping_period     = "off"
    pong_wait       = "40s"
  }
}
`
	cfg, diags := config.Parse([]byte(cfgSrc), "/etc/acp.hcl")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	single, diags := config.Parse([]byte("agent \"only\" {\n  command = [\"only\"]\n}\n"), "/s.hcl")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	two, diags := config.Parse([]byte("agent \"a\" {\n  command = [\"a\"]\n}\nagent \"b\" {\n  command = [\"b\"]\n}\n"), "/t.hcl")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	empty := &config.Config{}
	env := map[string]string{"TOKEN": "Bearer flag", "OTHER": "o"}
	lookupEnv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	tests := []struct {
		name    string
		cfg     *config.Config
		f       Flags
		want    Agent // Options and Desc are checked separately
		wantErr string
	}{
		{
			name: "ad-hoc url",
			cfg:  empty,
			f:    Flags{URL: "ws://127.0.0.1:8765/acp"},
			want: Agent{Name: "127.0.0.1:8765", Dialect: "acp",
				WebSocket: &legacy.WebSocket{URL: "ws://127.0.0.1:8765/acp", Header: http.Header{}}},
		},
		{
			// A Streamable HTTP endpoint takes the same settings (headers,
			// CA file, timeouts); the dialer picks the transport by scheme.
			name: "ad-hoc streamable http url",
			cfg:  empty,
			f:    Flags{URL: "https://box:8443/acp"},
			want: Agent{Name: "box:8443", Dialect: "acp",
				WebSocket: &legacy.WebSocket{URL: "https://box:8443/acp", Header: http.Header{}}},
		},
		{
			name: "ad-hoc url with all flags",
			cfg:  cfg, // ignored: the ad-hoc agent wins over default_agent
			f: Flags{URL: "wss://h:1/x", Dialect: "acp-v0", Headers: []string{"Authorization=TOKEN", "X-Other = OTHER"},
				Subprotocols: []string{"a", "b"}, CAFile: "/my.pem", ConnectTimeout: "3s", PingPeriod: "0s", PongWait: "9s",
				Set: set(FlagURL, FlagDialect, FlagHeader, FlagSubprotocol, FlagCAFile, FlagConnectTimeout, FlagPingPeriod, FlagPongWait)},
			want: Agent{Name: "h:1", Dialect: "acp-v0", WebSocket: &legacy.WebSocket{URL: "wss://h:1/x",
				Header:       http.Header{"Authorization": {"Bearer flag"}, "X-Other": {"o"}},
				Subprotocols: []string{"a", "b"}, CAFile: "/my.pem", DialTimeout: 3 * time.Second, PingPeriod: 0, PongWait: 9 * time.Second}},
		},
		{
			name: "ad-hoc command",
			cfg:  empty,
			f:    Flags{Argv: []string{"/usr/bin/gemini", "--experimental-acp"}, Dialect: "acp-v0", Set: set(FlagDialect)},
			want: Agent{Name: "gemini", Dialect: "acp-v0",
				Command: &legacy.Command{Path: "/usr/bin/gemini", Args: []string{"--experimental-acp"}}},
		},
		{
			name: "ad-hoc command ignores websocket flags",
			cfg:  empty,
			f:    Flags{Argv: []string{"agent"}, CAFile: "/x", Set: set(FlagCAFile)},
			want: Agent{Name: "agent", Dialect: "acp", Command: &legacy.Command{Path: "agent", Args: []string{}},
				Ignored: []string{"--ca-file"}},
		},
		{
			name: "default agent from config",
			cfg:  cfg,
			want: Agent{Name: "ws", Dialect: "acp", WebSocket: &legacy.WebSocket{URL: "wss://agent.example/acp",
				Header:       http.Header{"Authorization": {"Bearer file"}, "X-Keep": {"k"}},
				Subprotocols: []string{"acp"}, CAFile: "/ca.pem", DialTimeout: 7 * time.Second, PingPeriod: -1, PongWait: 40 * time.Second}},
		},
		{
			name: "flags override the configured websocket agent",
			cfg:  cfg,
			f: Flags{Agent: "ws", Headers: []string{"Authorization=TOKEN"}, Subprotocols: []string{"v2"}, PingPeriod: "5s",
				Set: set(FlagAgent, FlagHeader, FlagSubprotocol, FlagPingPeriod)},
			want: Agent{Name: "ws", Dialect: "acp", WebSocket: &legacy.WebSocket{URL: "wss://agent.example/acp",
				Header:       http.Header{"Authorization": {"Bearer flag"}, "X-Keep": {"k"}},
				Subprotocols: []string{"v2"}, CAFile: "/ca.pem", DialTimeout: 7 * time.Second, PingPeriod: 5 * time.Second, PongWait: 40 * time.Second}},
		},
		{
			name: "configured command agent",
			cfg:  cfg,
			f:    Flags{Agent: "cmd", Set: set(FlagAgent)},
			want: Agent{Name: "cmd", Dialect: "acp-v0", Command: &legacy.Command{Path: "gemini",
				Args: []string{"--experimental-acp"}, Env: []string{"A=1", "B=2"}, Dir: "/work", StopGrace: 3 * time.Second}},
		},
		{
			name: "dialect flag overrides the file",
			cfg:  cfg,
			f:    Flags{Agent: "cmd", Dialect: "acp", Set: set(FlagAgent, FlagDialect)},
			want: Agent{Name: "cmd", Dialect: "acp", Command: &legacy.Command{Path: "gemini",
				Args: []string{"--experimental-acp"}, Env: []string{"A=1", "B=2"}, Dir: "/work", StopGrace: 3 * time.Second}},
		},
		{
			name: "dialect flag default does not override the file",
			cfg:  cfg,
			f:    Flags{Agent: "cmd", Dialect: "acp", Set: set(FlagAgent)},
			want: Agent{Name: "cmd", Dialect: "acp-v0", Command: &legacy.Command{Path: "gemini",
				Args: []string{"--experimental-acp"}, Env: []string{"A=1", "B=2"}, Dir: "/work", StopGrace: 3 * time.Second}},
		},
		{
			name: "only agent",
			cfg:  single,
			want: Agent{Name: "only", Dialect: "acp", Command: &legacy.Command{Path: "only", Args: []string{}}},
		},
		{name: "two agents, no default", cfg: two, wantErr: "choose one with --agent"},
		{name: "unknown agent", cfg: cfg, f: Flags{Agent: "nope"}, wantErr: "--agent nope: no such agent in the configuration"},
		{name: "nothing to serve", cfg: empty, wantErr: "no agent to serve"},
		{
			name: "claude runs claude by default",
			cfg:  empty,
			f:    Flags{Dialect: "claude-stream-json", Set: set(FlagDialect)},
			want: Agent{Name: "claude", Dialect: "claude-stream-json", Command: &legacy.Command{Path: "claude", Args: []string{}}},
		},
		{
			name: "claude with a wrapper after --",
			cfg:  empty,
			f:    Flags{Dialect: "claude-stream-json", Argv: []string{"/opt/claude-wrapper", "--flag"}, Set: set(FlagDialect)},
			want: Agent{Name: "claude-wrapper", Dialect: "claude-stream-json", Command: &legacy.Command{Path: "/opt/claude-wrapper", Args: []string{"--flag"}}},
		},
		{name: "a dialect without a default command", cfg: empty, f: Flags{Dialect: "acp-v0", Set: set(FlagDialect)}, wantErr: "no agent to serve"},
		{name: "url and command", cfg: empty, f: Flags{URL: "ws://h/", Argv: []string{"x"}}, wantErr: "not both"},
		{name: "agent and url", cfg: cfg, f: Flags{Agent: "ws", URL: "ws://h/"}, wantErr: "cannot be combined"},
		{name: "agent and command", cfg: cfg, f: Flags{Agent: "ws", Argv: []string{"x"}}, wantErr: "cannot be combined"},
		{name: "unknown scheme", cfg: empty, f: Flags{URL: "ftp://h/"}, wantErr: "http:// or https:// for an ACP remote"},
		{name: "header without env var", cfg: empty, f: Flags{URL: "ws://h/", Headers: []string{"Authorization"}}, wantErr: "NAME=ENVVAR"},
		{name: "header env var unset", cfg: empty, f: Flags{URL: "ws://h/", Headers: []string{"Authorization=NOPE"}}, wantErr: "NOPE is not set"},
		{name: "bad ping period", cfg: empty, f: Flags{URL: "ws://h/", PingPeriod: "-1s", Set: set(FlagPingPeriod)}, wantErr: "--ping-period"},
		{name: "empty command", cfg: empty, f: Flags{Argv: []string{""}}, wantErr: "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveAgent(tt.cfg, tt.f, lookupEnv)
			if tt.wantErr != "" {
				var ue UsageError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &ue) {
					t.Fatalf("error = %v, want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Desc == "" {
				t.Error("Desc is empty")
			}
			if strings.Contains(got.Desc, "Bearer") {
				t.Errorf("Desc leaks a header value: %s", got.Desc)
			}
			got.Desc, got.Options = "", nil
			if got.Command != nil && got.Command.Args == nil {
				got.Command.Args = []string{}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ResolveAgent =\n%s\nwant\n%s", dump(got), dump(tt.want))
			}
		})
	}

	// The configured agent's options block reaches the dialect.
	got, err := ResolveAgent(cfg, Flags{Agent: "cmd"}, lookupEnv)
	if err != nil || got.Options == nil {
		t.Fatalf("options = %v, %v; want the options body", got.Options, err)
	}
	if _, newTranslator, err := Configure(got, cfg.Files, io.Discard); err != nil || newTranslator == nil {
		t.Errorf("configure(acp-v0 with options) = %v", err)
	}
}

func dump(s Agent) string {
	out := fmt.Sprintf("%+v", s)
	if s.Command != nil {
		out += fmt.Sprintf("\n  command %+v", *s.Command)
	}
	if s.WebSocket != nil {
		out += fmt.Sprintf("\n  websocket %+v", *s.WebSocket)
	}
	return out
}

// A dialect that builds its agent's command line (translate.SpawnBuilder)
// gets its arguments appended to the configured ones, or in their place, and
// its environment added; the child runs in the session's directory.
func TestDialer_SpawnFromDialect(t *testing.T) {
	dir := t.TempDir()
	spec := Agent{Name: "sh", Command: &legacy.Command{
		Path: "/bin/sh",
		Args: []string{"-c", `printf '{"args":"%s","env":"%s","dir":"%s"}\n' "$*" "$SPAWN_TEST" "$PWD"; cat >/dev/null`, "sh", "configured"},
	}}
	dial := spec.Dialer(nil, 0)
	for _, tc := range []struct {
		cmd  translate.Spawn
		want string
	}{
		{translate.Spawn{Argv: []string{"--model", "m1"}, Append: true, Env: []string{"SPAWN_TEST=x"}},
			`{"args":"configured --model m1","env":"x","dir":"` + dir + `"}`},
		{translate.Spawn{}, `{"args":"configured","env":"","dir":"` + dir + `"}`},
	} {
		link, err := dial(context.Background(), bridge.Spawn{Cwd: dir, Session: "s", Command: tc.cmd})
		if err != nil {
			t.Fatal(err)
		}
		got, err := link.Read(context.Background())
		link.Close()
		if err != nil || string(got) != tc.want {
			t.Errorf("spawn %+v: agent said %s (%v), want %s", tc.cmd, got, err, tc.want)
		}
	}
	// A failed dial is a nil Link, not a nil *Process in a non-nil one.
	bad := Agent{Name: "x", Command: &legacy.Command{Path: "/nonexistent/agent"}}
	if link, err := bad.Dialer(nil, 0)(context.Background(), bridge.Spawn{}); err == nil || link != nil {
		t.Errorf("dial of a missing program = %v, %v", link, err)
	}
}

func TestScrubber_AgentSecrets(t *testing.T) {
	spec := Agent{WebSocket: &legacy.WebSocket{
		URL:    "wss://bob:hunter22@agents.example/acp?token=qtoken123&mode=x",
		Header: http.Header{"Authorization": {"Bearer tok-abc123"}},
	}}
	sc := NewScrubber(spec.Secrets()...)
	in := `401: "Bearer tok-abc123" / tok-abc123 / hunter22 / Ym9iOmh1bnRlcjIy / qtoken123 / mode=x`
	want := `401: "<redacted>" / <redacted> / <redacted> / <redacted> / <redacted> / mode=x`
	if got := sc.Scrub(in); got != want {
		t.Errorf("Scrub = %s\nwant    %s", got, want)
	}
	var buf strings.Builder
	fmt.Fprintln(sc.Writer(&buf), "child said tok-abc123")
	if buf.String() != "child said <redacted>\n" {
		t.Errorf("Writer wrote %q", buf.String())
	}
	basic := Agent{WebSocket: &legacy.WebSocket{URL: "wss://agents.example/acp",
		Header: http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("bob:s3cret-pw"))}}}}
	if got := NewScrubber(basic.Secrets()...).Scrub("401 for bob:s3cret-pw (s3cret-pw)"); got != "401 for <redacted> (<redacted>)" {
		t.Errorf("Basic header credentials: %s", got)
	}
	cmd := Agent{Command: &legacy.Command{Env: []string{"API_KEY=sk-secret-99", "N=1"}}}
	if got := NewScrubber(cmd.Secrets()...).Scrub("key sk-secret-99 n 1"); got != "key <redacted> n 1" {
		t.Errorf("env secrets: %s", got)
	}
}

func TestSessionCommand(t *testing.T) {
	base := legacy.Command{Path: "claude", Args: make([]string, 1, 8), Env: make([]string, 1, 8), Dir: "/configured"}
	base.Args[0], base.Env[0] = "--configured", "A=1"
	tests := []struct {
		name string
		sp   bridge.Spawn
		want legacy.Command
	}{
		{"configured", bridge.Spawn{}, legacy.Command{Path: "claude", Args: []string{"--configured"}, Env: []string{"A=1"}, Dir: "/configured"}},
		{"session cwd", bridge.Spawn{Cwd: "/s"}, legacy.Command{Path: "claude", Args: []string{"--configured"}, Env: []string{"A=1"}, Dir: "/s"}},
		{"appended argv, env, own cwd", bridge.Spawn{Cwd: "/s", Command: translate.Spawn{Argv: []string{"--x", "y"}, Append: true, Env: []string{"B=2"}, Cwd: "/own"}},
			legacy.Command{Path: "claude", Args: []string{"--configured", "--x", "y"}, Env: []string{"A=1", "B=2"}, Dir: "/own"}},
		{"replaced argv", bridge.Spawn{Cwd: "/s", Command: translate.Spawn{Argv: []string{"--x"}}},
			legacy.Command{Path: "claude", Args: []string{"--x"}, Env: []string{"A=1"}, Dir: "/s"}},
		{"empty argv replaces", bridge.Spawn{Command: translate.Spawn{Argv: []string{}}},
			legacy.Command{Path: "claude", Args: []string{}, Env: []string{"A=1"}, Dir: "/configured"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sessionCommand(base, tt.sp)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("sessionCommand = %+v, want %+v", got, tt.want)
			}
		})
	}
	// Links share the configured command: appending for one must not
	// write into the spare capacity another link's arguments share.
	a := sessionCommand(base, bridge.Spawn{Command: translate.Spawn{Argv: []string{"--a"}, Append: true, Env: []string{"E=a"}}})
	b := sessionCommand(base, bridge.Spawn{Command: translate.Spawn{Argv: []string{"--b"}, Append: true, Env: []string{"E=b"}}})
	if a.Args[1] != "--a" || b.Args[1] != "--b" || a.Env[1] != "E=a" || b.Env[1] != "E=b" {
		t.Errorf("links share argument storage: %q %q %q %q", a.Args, b.Args, a.Env, b.Env)
	}
}

// agent_protocol and --agent-protocol force the ACP version of an acp
// agent; the flag wins over the file, and a value or dialect it cannot
// apply to is refused with what to do.
func TestResolveAgentProtocol(t *testing.T) {
	cfg, diags := config.Parse([]byte(`
agent "v2" {
  command        = ["agent"]
  agent_protocol = 2
}
agent "auto" {
  command = ["agent"]
}
agent "legacy" {
  dialect = "acp-v0"
  command = ["gemini"]
}
`), "/p.hcl")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	tests := []struct {
		agent, flag, dialect string
		want                 int
		wantErr              string
	}{
		{agent: "auto", want: 0},
		{agent: "v2", want: 2},
		{agent: "v2", flag: "1", want: 1},
		{agent: "auto", flag: "2", want: 2},
		{agent: "auto", flag: "3", wantErr: `--agent-protocol takes 1 or 2`},
		{agent: "legacy", flag: "2", wantErr: `applies to ACP agents (dialect acp), not to dialect acp-v0`},
		{agent: "auto", flag: "1", dialect: "acp-v2", wantErr: `dialect acp-v2 speaks ACP v2 to the agent; --agent-protocol 1 contradicts it`},
		{agent: "auto", flag: "2", dialect: "acp-v2", want: 2},
	}
	for _, tt := range tests {
		f := Flags{Agent: tt.agent, AgentProtocol: tt.flag, Dialect: tt.dialect, Set: map[string]bool{}}
		if tt.flag != "" {
			f.Set[FlagAgentProtocol] = true
		}
		if tt.dialect != "" {
			f.Set[FlagDialect] = true
		}
		spec, err := ResolveAgent(cfg, f, func(string) (string, bool) { return "", false })
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: err = %v, want %q", tt, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("%+v: %v", tt, err)
		case spec.AgentProtocol != tt.want:
			t.Errorf("%+v: AgentProtocol = %d, want %d", tt, spec.AgentProtocol, tt.want)
		}
	}
	if _, diags := config.Parse([]byte("agent \"a\" {\n  command = [\"a\"]\n  agent_protocol = 3\n}\n"), "/bad.hcl"); !strings.Contains(diags.Error(), "/bad.hcl:3,20-21: Invalid agent_protocol") {
		t.Errorf("agent_protocol = 3: diagnostics %q, want Invalid agent_protocol at its value", diags.Error())
	}
}
