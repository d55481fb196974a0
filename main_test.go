package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/legacy"
	"github.com/hashicorp/go-hclog"
)

// TestMain lets tests run this binary as acp-bridge: with
// ACP_BRIDGE_TEST_ARGS set (arguments separated by newlines) it runs the
// command line and exits, and with ACP_BRIDGE_TEST_STRAY set it exercises
// reserveStdout.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("ACP_BRIDGE_TEST_ARGS"); ok {
		argv := []string{"acp-bridge"}
		if args != "" {
			argv = append(argv, strings.Split(args, "\n")...)
		}
		os.Exit(run(argv))
	}
	if _, ok := os.LookupEnv("ACP_BRIDGE_TEST_STRAY"); ok {
		out, err := reserveStdout()
		if err != nil {
			fmt.Fprintln(os.Stderr, "reserveStdout:", err)
			os.Exit(3)
		}
		fmt.Println("stray print")
		os.Stdout.WriteString("stray write\n")
		out.WriteString(`{"jsonrpc":"2.0","method":"x"}` + "\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runSelf runs this test binary as acp-bridge with args and env and returns
// its stdout, stderr and exit status.
func runSelf(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "ACP_BRIDGE_TEST_ARGS="+strings.Join(args, "\n"),
		// Keep the developer's own config file out of the way.
		"XDG_CONFIG_HOME="+t.TempDir(), "HOME="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestCommandLine(t *testing.T) {
	goodCfg := filepath.Join(t.TempDir(), "good.hcl")
	if err := os.WriteFile(goodCfg, []byte("agent \"a\" {\n  command = [\"x\"]\n}\nagent \"b\" {\n  dialect = \"acp-v0\"\n  command = [\"y\"]\n  options {\n    protocol_version = \"0.0.9\"\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badDialectCfg := filepath.Join(t.TempDir(), "bad.hcl")
	if err := os.WriteFile(badDialectCfg, []byte("agent \"a\" {\n  dialect = \"klingon\"\n  command = [\"x\"]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		env        []string
		args       []string
		wantCode   int
		wantStdout string // exact
		wantStderr string // substring
	}{
		{name: "version", args: []string{"version"}, wantStdout: "acp-bridge dev\n"},
		{name: "unknown flag", args: []string{"--bogus"}, wantCode: 2, wantStderr: "flag provided but not defined: -bogus"},
		{name: "unknown subcommand flag", args: []string{"demo", "--bogus"}, wantCode: 2, wantStderr: "-bogus"},
		{name: "help goes to stderr", args: []string{"--help"}, wantStderr: "USAGE:"},
		{name: "no agent", args: nil, wantCode: 2, wantStderr: "no agent to serve"},
		{name: "agent with url", args: []string{"--agent", "a", "--url", "ws://h/"}, wantCode: 2, wantStderr: "cannot be combined"},
		{name: "bad duration flag", args: []string{"--cancel-grace", "soon", "--url", "ws://h/"}, wantCode: 2, wantStderr: "--cancel-grace"},
		{name: "bad env twin", env: []string{"ACP_BRIDGE_LOG_LEVEL=loud"}, args: []string{"--url", "ws://h/"}, wantCode: 2, wantStderr: "--log-level"},
		{name: "unknown dialect", args: []string{"--dialect", "klingon", "--url", "ws://h/"}, wantCode: 2, wantStderr: `unknown dialect "klingon"`},
		{name: "missing explicit config", args: []string{"--config", "/nonexistent/acp.hcl", "--url", "ws://h/"}, wantCode: 1, wantStderr: "Failed to read file"},
		{name: "missing command", args: []string{"--", "/nonexistent/agent"}, wantCode: 1, wantStderr: "agent command"},
		{name: "validate ok", args: []string{"config", "validate", "--config", goodCfg}, wantStdout: "ok: 2 agents\n"},
		{name: "validate env twin", env: []string{"ACP_BRIDGE_CONFIG=" + goodCfg}, args: []string{"config", "validate"}, wantStdout: "ok: 2 agents\n"},
		{name: "validate global flag", args: []string{"--config", goodCfg, "config", "validate"}, wantStdout: "ok: 2 agents\n"},
		{name: "validate unknown dialect", args: []string{"config", "validate", "--config", badDialectCfg}, wantCode: 1, wantStderr: "line 2"},
		{name: "validate no file", args: []string{"config", "validate"}, wantCode: 1, wantStderr: "no configuration file"},
		{name: "serve unknown dialect from config", args: []string{"--config", badDialectCfg}, wantCode: 2, wantStderr: `unknown dialect "klingon"`},
		{name: "dialects", args: []string{"dialects"}, wantStdout: ""}, // checked below
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runSelf(t, tt.env, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit status = %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if tt.name == "dialects" {
				for _, want := range []string{"acp ", "acp-v0 ", "per-session", "shared"} {
					if !strings.Contains(stdout, want) {
						t.Errorf("stdout lacks %q:\n%s", want, stdout)
					}
				}
				return
			}
			if stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", stdout, tt.wantStdout)
			}
			if !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr)
			}
		})
	}
}

func TestResolveSettings(t *testing.T) {
	cfg := &config.Config{LogLevel: "debug", LogFile: "/cfg.log", MaxMessage: 1 << 20,
		RequestTimeout: 30 * time.Second, CancelGrace: 2 * time.Second}
	tests := []struct {
		name    string
		cfg     *config.Config
		f       cliFlags
		want    settings
		wantErr string
	}{
		{name: "defaults", cfg: &config.Config{}, want: settings{LogLevel: hclog.Info}},
		{name: "file", cfg: cfg, want: settings{LogLevel: hclog.Debug, LogFile: "/cfg.log", MaxMessage: 1 << 20,
			RequestTimeout: 30 * time.Second, CancelGrace: 2 * time.Second}},
		{name: "flags win", cfg: cfg, f: cliFlags{LogLevel: "off", LogFile: "", MaxMessage: "2MiB",
			RequestTimeout: "off", CancelGrace: "1s", Set: set(flagLogLevel, flagLogFile, flagMaxMessage, flagRequestTimeout, flagCancelGrace)},
			want: settings{LogLevel: hclog.Off, MaxMessage: 2 << 20, RequestTimeout: -1, CancelGrace: time.Second}},
		{name: "unset flags do not win", cfg: cfg, f: cliFlags{LogLevel: "trace", RequestTimeout: "1s"},
			want: settings{LogLevel: hclog.Debug, LogFile: "/cfg.log", MaxMessage: 1 << 20,
				RequestTimeout: 30 * time.Second, CancelGrace: 2 * time.Second}},
		{name: "request timeout 0s disables", cfg: &config.Config{}, f: cliFlags{RequestTimeout: "0s", Set: set(flagRequestTimeout)},
			want: settings{LogLevel: hclog.Info, RequestTimeout: -1}},
		{name: "bad level", cfg: &config.Config{}, f: cliFlags{LogLevel: "loud", Set: set(flagLogLevel)}, wantErr: "--log-level"},
		{name: "bad size", cfg: &config.Config{}, f: cliFlags{MaxMessage: "12 parsecs", Set: set(flagMaxMessage)}, wantErr: "--max-message"},
		{name: "tiny size", cfg: &config.Config{}, f: cliFlags{MaxMessage: "10", Set: set(flagMaxMessage)}, wantErr: "outside the accepted range"},
		{name: "zero grace", cfg: &config.Config{}, f: cliFlags{CancelGrace: "0s", Set: set(flagCancelGrace)}, wantErr: "--cancel-grace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveSettings(tt.cfg, tt.f)
			if tt.wantErr != "" {
				var ue usageError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &ue) {
					t.Fatalf("error = %v, want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("resolveSettings = %+v, %v; want %+v", got, err, tt.want)
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
		f       cliFlags
		want    agentSpec // Options and Desc are checked separately
		wantErr string
	}{
		{
			name: "ad-hoc url",
			cfg:  empty,
			f:    cliFlags{URL: "ws://127.0.0.1:8765/acp"},
			want: agentSpec{Name: "127.0.0.1:8765", Dialect: "acp",
				WebSocket: &legacy.WebSocket{URL: "ws://127.0.0.1:8765/acp", Header: http.Header{}}},
		},
		{
			name: "ad-hoc url with all flags",
			cfg:  cfg, // ignored: the ad-hoc agent wins over default_agent
			f: cliFlags{URL: "wss://h:1/x", Dialect: "acp-v0", Headers: []string{"Authorization=TOKEN", "X-Other = OTHER"},
				Subprotocols: []string{"a", "b"}, CAFile: "/my.pem", ConnectTimeout: "3s", PingPeriod: "0s", PongWait: "9s",
				Set: set(flagURL, flagDialect, flagHeader, flagSubprotocol, flagCAFile, flagConnectTimeout, flagPingPeriod, flagPongWait)},
			want: agentSpec{Name: "h:1", Dialect: "acp-v0", WebSocket: &legacy.WebSocket{URL: "wss://h:1/x",
				Header:       http.Header{"Authorization": {"Bearer flag"}, "X-Other": {"o"}},
				Subprotocols: []string{"a", "b"}, CAFile: "/my.pem", DialTimeout: 3 * time.Second, PingPeriod: 0, PongWait: 9 * time.Second}},
		},
		{
			name: "ad-hoc command",
			cfg:  empty,
			f:    cliFlags{Argv: []string{"/usr/bin/gemini", "--experimental-acp"}, Dialect: "acp-v0", Set: set(flagDialect)},
			want: agentSpec{Name: "gemini", Dialect: "acp-v0",
				Command: &legacy.Command{Path: "/usr/bin/gemini", Args: []string{"--experimental-acp"}}},
		},
		{
			name: "ad-hoc command ignores websocket flags",
			cfg:  empty,
			f:    cliFlags{Argv: []string{"agent"}, CAFile: "/x", Set: set(flagCAFile)},
			want: agentSpec{Name: "agent", Dialect: "acp", Command: &legacy.Command{Path: "agent", Args: []string{}},
				Ignored: []string{"--ca-file"}},
		},
		{
			name: "default agent from config",
			cfg:  cfg,
			want: agentSpec{Name: "ws", Dialect: "acp", WebSocket: &legacy.WebSocket{URL: "wss://agent.example/acp",
				Header:       http.Header{"Authorization": {"Bearer file"}, "X-Keep": {"k"}},
				Subprotocols: []string{"acp"}, CAFile: "/ca.pem", DialTimeout: 7 * time.Second, PingPeriod: -1, PongWait: 40 * time.Second}},
		},
		{
			name: "flags override the configured websocket agent",
			cfg:  cfg,
			f: cliFlags{Agent: "ws", Headers: []string{"Authorization=TOKEN"}, Subprotocols: []string{"v2"}, PingPeriod: "5s",
				Set: set(flagAgent, flagHeader, flagSubprotocol, flagPingPeriod)},
			want: agentSpec{Name: "ws", Dialect: "acp", WebSocket: &legacy.WebSocket{URL: "wss://agent.example/acp",
				Header:       http.Header{"Authorization": {"Bearer flag"}, "X-Keep": {"k"}},
				Subprotocols: []string{"v2"}, CAFile: "/ca.pem", DialTimeout: 7 * time.Second, PingPeriod: 5 * time.Second, PongWait: 40 * time.Second}},
		},
		{
			name: "configured command agent",
			cfg:  cfg,
			f:    cliFlags{Agent: "cmd", Set: set(flagAgent)},
			want: agentSpec{Name: "cmd", Dialect: "acp-v0", Command: &legacy.Command{Path: "gemini",
				Args: []string{"--experimental-acp"}, Env: []string{"A=1", "B=2"}, Dir: "/work", StopGrace: 3 * time.Second}},
		},
		{
			name: "dialect flag overrides the file",
			cfg:  cfg,
			f:    cliFlags{Agent: "cmd", Dialect: "acp", Set: set(flagAgent, flagDialect)},
			want: agentSpec{Name: "cmd", Dialect: "acp", Command: &legacy.Command{Path: "gemini",
				Args: []string{"--experimental-acp"}, Env: []string{"A=1", "B=2"}, Dir: "/work", StopGrace: 3 * time.Second}},
		},
		{
			name: "dialect flag default does not override the file",
			cfg:  cfg,
			f:    cliFlags{Agent: "cmd", Dialect: "acp", Set: set(flagAgent)},
			want: agentSpec{Name: "cmd", Dialect: "acp-v0", Command: &legacy.Command{Path: "gemini",
				Args: []string{"--experimental-acp"}, Env: []string{"A=1", "B=2"}, Dir: "/work", StopGrace: 3 * time.Second}},
		},
		{
			name: "only agent",
			cfg:  single,
			want: agentSpec{Name: "only", Dialect: "acp", Command: &legacy.Command{Path: "only", Args: []string{}}},
		},
		{name: "two agents, no default", cfg: two, wantErr: "choose one with --agent"},
		{name: "unknown agent", cfg: cfg, f: cliFlags{Agent: "nope"}, wantErr: `unknown agent "nope"`},
		{name: "nothing to serve", cfg: empty, wantErr: "no agent to serve"},
		{name: "url and command", cfg: empty, f: cliFlags{URL: "ws://h/", Argv: []string{"x"}}, wantErr: "not both"},
		{name: "agent and url", cfg: cfg, f: cliFlags{Agent: "ws", URL: "ws://h/"}, wantErr: "cannot be combined"},
		{name: "agent and command", cfg: cfg, f: cliFlags{Agent: "ws", Argv: []string{"x"}}, wantErr: "cannot be combined"},
		{name: "http url", cfg: empty, f: cliFlags{URL: "http://h/"}, wantErr: "ws:// or wss://"},
		{name: "header without env var", cfg: empty, f: cliFlags{URL: "ws://h/", Headers: []string{"Authorization"}}, wantErr: "NAME=ENVVAR"},
		{name: "header env var unset", cfg: empty, f: cliFlags{URL: "ws://h/", Headers: []string{"Authorization=NOPE"}}, wantErr: "NOPE is not set"},
		{name: "bad ping period", cfg: empty, f: cliFlags{URL: "ws://h/", PingPeriod: "-1s", Set: set(flagPingPeriod)}, wantErr: "--ping-period"},
		{name: "empty command", cfg: empty, f: cliFlags{Argv: []string{""}}, wantErr: "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveAgent(tt.cfg, tt.f, lookupEnv)
			if tt.wantErr != "" {
				var ue usageError
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
				t.Errorf("resolveAgent =\n%s\nwant\n%s", dump(got), dump(tt.want))
			}
		})
	}

	// The configured agent's options block reaches the dialect.
	got, err := resolveAgent(cfg, cliFlags{Agent: "cmd"}, lookupEnv)
	if err != nil || got.Options == nil {
		t.Fatalf("options = %v, %v; want the options body", got.Options, err)
	}
	if _, newTranslator, err := configure(got, cfg.Files); err != nil || newTranslator == nil {
		t.Errorf("configure(acp-v0 with options) = %v", err)
	}
}

func dump(s agentSpec) string {
	out := fmt.Sprintf("%+v", s)
	if s.Command != nil {
		out += fmt.Sprintf("\n  command %+v", *s.Command)
	}
	if s.WebSocket != nil {
		out += fmt.Sprintf("\n  websocket %+v", *s.WebSocket)
	}
	return out
}

func TestVersionString(t *testing.T) {
	if got := versionString(); got != "dev" {
		t.Errorf("versionString() = %q, want dev in a test binary", got)
	}
	old := version
	version = "v1.2.3"
	defer func() { version = old }()
	if got := versionString(); got != "v1.2.3" {
		t.Errorf("versionString() with -ldflags = %q", got)
	}
}
