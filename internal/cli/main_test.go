package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets tests run this binary as acp-bridge: with
// ACP_BRIDGE_TEST_ARGS set (arguments separated by newlines) it runs the
// command line and exits, and with ACP_BRIDGE_TEST_STRAY set it exercises
// reserveStdout.
func TestMain(m *testing.M) {
	// FAKE_AGENT=NAME runs this binary as a fake agent (see fakeAgents).
	if run, ok := fakeAgents[os.Getenv("FAKE_AGENT")]; ok {
		os.Exit(run())
	}
	if args, ok := os.LookupEnv("ACP_BRIDGE_TEST_ARGS"); ok {
		argv := []string{"acp-bridge"}
		if args != "" {
			argv = append(argv, strings.Split(args, "\n")...)
		}
		os.Exit(Run(argv))
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
		{name: "version", args: []string{"version"}, wantStdout: versionLine() + "\n"},
		{name: "unknown flag", args: []string{"--bogus"}, wantCode: 2, wantStderr: "unknown flag --bogus"},
		{name: "unknown subcommand flag", args: []string{"demo", "--bogus"}, wantCode: 2, wantStderr: "-bogus"},
		{name: "no agent", args: nil, wantCode: 2, wantStderr: "no agent to serve"},
		{name: "agent with url", args: []string{"--agent", "a", "--url", "ws://h/"}, wantCode: 2, wantStderr: "cannot be combined"},
		{name: "bad duration flag", args: []string{"--cancel-grace", "soon", "--url", "ws://h/"}, wantCode: 2, wantStderr: "--cancel-grace"},
		{name: "bad env twin", env: []string{"ACP_BRIDGE_LOG_LEVEL=loud"}, args: []string{"--url", "ws://h/"}, wantCode: 2, wantStderr: "--log-level"},
		{name: "unknown dialect", args: []string{"--dialect", "klingon", "--url", "ws://h/"}, wantCode: 2, wantStderr: `unknown dialect "klingon"`},
		{name: "missing explicit config", args: []string{"--config", "/nonexistent/acp.hcl", "--url", "ws://h/"}, wantCode: 1, wantStderr: "--config /nonexistent/acp.hcl: cannot read the configuration file"},
		{name: "missing command", args: []string{"--", "/nonexistent/agent"}, wantCode: 1, wantStderr: "agent command"},
		{name: "mistyped subcommand is not run", args: []string{"vesion"}, wantCode: 2, wantStderr: `"vesion" is not a subcommand. Did you mean "version"?`},
		{name: "bare agent command needs --", args: []string{"--dialect", "acp", "my-agent", "--stdio"}, wantCode: 2, wantStderr: "goes after --: acp-bridge [flags] -- my-agent --stdio"},
		{name: "mistyped flag", args: []string{"--ulr", "ws://h/"}, wantCode: 2, wantStderr: `Did you mean --url?`},
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

// Rule profiles: shipped ones are listed and shown; a configuration's own
// dialect blocks are listed, shown, selectable, and checked with positions.
func TestRuleProfileCommands(t *testing.T) {
	dir := t.TempDir()
	userCfg := filepath.Join(dir, "user.hcl")
	user := "dialect \"mine\" {\n  summary = \"my chat\"\n  request \"session/prompt\" {\n    send = { say = prompt.text }\n  }\n}\nagent \"m\" {\n  dialect = \"mine\"\n  websocket {\n    url = \"ws://127.0.0.1:1/\"\n  }\n}\n"
	badCfg := filepath.Join(dir, "bad.hcl")
	bad := "dialect \"mine\" {\n  request \"session/prompt\" {\n    send = { say = prompt.txt }\n  }\n}\n"
	takenCfg := filepath.Join(dir, "taken.hcl")
	taken := "dialect \"zeroclaw\" {\n  request \"session/prompt\" {\n    send = { say = prompt.text }\n  }\n}\n"
	for name, src := range map[string]string{userCfg: user, badCfg: bad, takenCfg: taken} {
		if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name                string
		args                []string
		wantCode            int
		wantStdout, wantErr string
	}{
		{"list", []string{"dialects"}, 0, "zeroclaw profile shared", ""},
		{"list user", []string{"--config", userCfg, "dialects"}, 0, "mine user shared my chat", ""},
		{"show shipped", []string{"dialects", "show", "mini-agent-ws"}, 0, `type = "connection_established"`, ""},
		{"show user", []string{"--config", userCfg, "dialects", "show", "mine"}, 0, "send = { say = prompt.text }", ""},
		{"show built-in", []string{"dialects", "show", "acp-v0"}, 1, "", "built into acp-bridge in Go"},
		{"show unknown", []string{"dialects", "show", "nope"}, 2, "", `unknown dialect "nope"`},
		{"validate user", []string{"config", "validate", "--config", userCfg}, 0, "ok: 1 agent", ""},
		{"validate bad user", []string{"config", "validate", "--config", badCfg}, 1, "", "bad.hcl line 3"},
		{"name taken", []string{"config", "validate", "--config", takenCfg}, 1, "", "built into acp-bridge"},
		{"serve bad user", []string{"--config", badCfg, "--dialect", "mine", "--url", "ws://127.0.0.1:1/"}, 1, "", "Unknown variable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runSelf(t, nil, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit status = %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			// Columns are aligned with spaces that depend on the longest
			// name: compare with runs of spaces folded.
			if !strings.Contains(strings.Join(strings.Fields(stdout), " "), tt.wantStdout) && !strings.Contains(stdout, tt.wantStdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantStdout, stdout)
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantErr, stderr)
			}
		})
	}
}
