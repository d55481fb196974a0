package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The conventions of issue 20, on the binary (this test binary run as
// acp-bridge, see TestMain): which stream, which exit status, what text.
func TestConventions(t *testing.T) {
	example, err := filepath.Abs("../../config.example.hcl")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		env        []string
		args       []string
		wantCode   int
		wantStdout string // substring; "" means stdout must be empty
		wantStderr string // substring
	}{
		{name: "--help on stdout", args: []string{"--help"}, wantStdout: "--url URL"},
		{name: "help word on stdout", args: []string{"help"}, wantStdout: "USAGE:"},
		{name: "subcommand help on stdout", args: []string{"config", "--help"}, wantStdout: "validate"},
		{name: "named placeholders", args: []string{"--help"}, wantStdout: "--connect-timeout DURATION"},
		{name: "size placeholder", args: []string{"--help"}, wantStdout: "--max-message SIZE"},
		{name: "doctor listed", args: []string{"--help"}, wantStdout: "doctor"},
		{name: "--version", args: []string{"--version"}, wantStdout: "acp-bridge dev ("},
		{name: "usage error writes nothing on stdout", args: []string{"--ulr", "ws://h/"}, wantCode: 2, wantStderr: "Did you mean --url?"},
		{name: "validate example without env", env: []string{"GEMINI_API_KEY=", "AGENT_TOKEN="}, args: []string{"config", "validate", "--config", example},
			wantStdout: "ok: 2 agents", wantStderr: "warning: Environment variable not set"},
		{name: "validate rejects arguments", args: []string{"config", "validate", "my.hcl"}, wantCode: 2, wantStderr: "config validate takes no arguments; give the file with --config my.hcl"},
		{name: "log-level after subcommand", args: []string{"dialects", "--log-level", "debug"}, wantStdout: "acp-v0"},
		{name: "log-level after version", args: []string{"version", "--log-level", "debug"}, wantStdout: "acp-bridge dev ("},
		{name: "config subcommands in help", args: []string{"config", "--help"}, wantStdout: "init"},
		{name: "bad log-level after subcommand", args: []string{"demo", "--log-level", "loud"}, wantCode: 2, wantStderr: "--log-level"},
		{name: "bad log-format", args: []string{"--log-format", "xml", "--url", "ws://h/"}, wantCode: 2, wantStderr: `"xml" is not one of text, json`},
		{name: "agent without config names the default path", args: []string{"--agent", "work"}, wantCode: 1, wantStderr: "no configuration file at "},
		{name: "unreadable config names file and cause", args: []string{"--config", "/nonexistent/acp.hcl", "--url", "ws://h/"}, wantCode: 1, wantStderr: "--config /nonexistent/acp.hcl: cannot read the configuration file: no such file or directory; create it with 'acp-bridge config init --config /nonexistent/acp.hcl'"},
		{name: "doctor needs --", args: []string{"doctor", "my-agent"}, wantCode: 2, wantStderr: "goes after --: acp-bridge doctor -- my-agent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Empty values would count as set: drop them from the
			// environment instead.
			var env []string
			for _, e := range tt.env {
				if !strings.HasSuffix(e, "=") {
					env = append(env, e)
				}
			}
			for _, e := range tt.env {
				if strings.HasSuffix(e, "=") {
					t.Setenv(strings.TrimSuffix(e, "="), "")
					os.Unsetenv(strings.TrimSuffix(e, "="))
				}
			}
			stdout, stderr, code := runSelf(t, env, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit status = %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if tt.wantStdout == "" && stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if !strings.Contains(stdout, tt.wantStdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantStdout, stdout)
			}
			if !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr)
			}
		})
	}
}

// `version` and `--version` print the same line.
func TestVersionParity(t *testing.T) {
	a, _, codeA := runSelf(t, nil, "version")
	b, _, codeB := runSelf(t, nil, "--version")
	if a != b || codeA != 0 || codeB != 0 || a == "" {
		t.Errorf("version = %q (%d), --version = %q (%d)", a, codeA, b, codeB)
	}
}

// Diagnostics start with file:line:column.
func TestConfigErrorPosition(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.hcl")
	if err := os.WriteFile(path, []byte("agent \"a\" {\n  dialect = \"klingon\"\n  command = [\"x\"]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runSelf(t, nil, "config", "validate", "--config", path)
	if want := path + ":2:13: error: Unknown dialect"; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr lacks %q:\n%s", code, want, stderr)
	}
}

// config show prints the resolved configuration with every secret masked:
// a canary token reaches it through env() in a header, an agent's env, a
// URL's query and --header, and must appear nowhere.
func TestConfigShowMasksSecrets(t *testing.T) {
	const canary = "canary-s3cret-7d1e"
	path := filepath.Join(t.TempDir(), "c.hcl")
	src := `log_level = "debug"
agent "remote" {
  websocket {
    url = "wss://agent.example/acp?token=${env("CANARY")}"
    headers = { Authorization = "Bearer ${env("CANARY")}" }
  }
}
agent "local" {
  command = ["my-agent"]
  env = { API_KEY = env("CANARY") }
}
default_agent = "remote"
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runSelf(t, []string{"CANARY=" + canary, "ACP_BRIDGE_LOG_FORMAT=json"},
		"--config", path, "config", "show", "--log-level", "warn", "--header", "X-Key=CANARY")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if strings.Contains(stdout+stderr, canary) {
		t.Fatalf("config show leaks the canary:\n%s", stdout)
	}
	for _, want := range []string{
		path,                    // the file read
		"<redacted>",            // masked values
		"log_level        warn", // resolved value
		"flag --log-level, over the file's debug", // what overrode what
		"log_format       json    (env ACP_BRIDGE_LOG_FORMAT)",
		`agent "remote"`, `agent "local"`,
		"chosen by default_agent in the file",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("config show lacks %q:\n%s", want, stdout)
		}
	}
}

// config init writes a starter file that validates, at the default path,
// and refuses to overwrite it.
func TestConfigInit(t *testing.T) {
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	stdout, stderr, code := runSelf(t, env, "config", "init")
	path := filepath.Join(home, ".config", "acp-bridge", "config.hcl")
	if code != 0 || !strings.Contains(stdout, "wrote "+path) {
		t.Fatalf("config init: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stdout, stderr, code := runSelf(t, env, "config", "validate"); code != 0 || stdout != "ok: 0 agents\n" {
		t.Errorf("the starter file does not validate: exit %d\n%s%s", code, stdout, stderr)
	}
	if err := os.WriteFile(path, []byte("# mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runSelf(t, env, "config", "init")
	if code != 1 || !strings.Contains(stderr, "already exists; not overwriting") {
		t.Errorf("second init: exit %d, stderr %q", code, stderr)
	}
	if b, _ := os.ReadFile(path); string(b) != "# mine\n" {
		t.Errorf("config init overwrote the file: %q", b)
	}
}

// dialects --json is a JSON array with the same dialects as the table.
func TestDialectsJSON(t *testing.T) {
	stdout, stderr, code := runSelf(t, nil, "dialects", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var list []struct{ Name, Kind, Links, Summary string }
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	names := map[string]string{}
	for _, d := range list {
		names[d.Name] = d.Links
	}
	if names["acp"] != "shared" || names["acp-v0"] != "per-session" || names["open-interpreter"] == "" {
		t.Errorf("dialects --json = %s", stdout)
	}
}
