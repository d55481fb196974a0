package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The single cases of issue 27's CLI list, each as the user typed it.
func TestCLIFirstErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.hcl")
	one := filepath.Join(t.TempDir(), "one.hcl")
	for name, src := range map[string]string{empty: "", one: "agent \"gemini\" {\n  command = [\"x\"]\n}\n"} {
		if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
		notStderr  string
		wantStdout string // substring; "" means stdout must be empty
		notStdout  string
	}{
		{name: "config shw", args: []string{"config", "shw"}, wantCode: 2, wantStderr: `"shw" is not a subcommand of config. Did you mean "show"?`},
		{name: "trace veiw", args: []string{"trace", "veiw"}, wantCode: 2, wantStderr: `Did you mean "view"?`},
		{name: "dialects shw", args: []string{"dialects", "shw"}, wantCode: 2, wantStderr: `"shw" is not a subcommand of dialects. Did you mean "show"?`},
		{name: "version extra", args: []string{"version", "extra"}, wantCode: 2, wantStderr: `version takes no arguments; got "extra"`},
		{name: "dialects show --foo", args: []string{"dialects", "show", "--foo"}, wantCode: 2, wantStderr: "unknown flag --foo"},
		{name: "trace view --foo suggests nothing", args: []string{"trace", "view", "--foo"}, wantCode: 2, wantStderr: "unknown flag --foo\n", notStderr: "Did you mean"},
		{name: "mistyped dialect", args: []string{"--dialect", "acp-v1", "--url", "ws://h/"}, wantCode: 2, wantStderr: `unknown dialect "acp-v1". Did you mean "acp-v0"?`},
		{name: "mistyped dialect to show", args: []string{"dialects", "show", "zerclaw"}, wantCode: 2, wantStderr: `Did you mean "zeroclaw"?`},
		{name: "agent in a file without agents", args: []string{"--config", empty, "--agent", "foo"}, wantCode: 2, wantStderr: "--agent foo: the configuration defines no agents", notStderr: "no agent to serve"},
		{name: "mistyped agent", args: []string{"--config", one, "--agent", "gemnii"}, wantCode: 2, wantStderr: `--agent gemnii: no such agent in the configuration. Did you mean "gemini"?`},
		{name: "missing config in the bridge's words", args: []string{"--config", "/missing.hcl", "--url", "ws://h/"}, wantCode: 1,
			wantStderr: "--config /missing.hcl: cannot read the configuration file: no such file or directory", notStderr: "Failed to read file"},
		{name: "help points to the command", args: []string{"config", "validate", "--bogus"}, wantCode: 2, wantStderr: "Run 'acp-bridge config validate --help' for usage."},
		{name: "version --help lists only --json", args: []string{"version", "--help"}, wantStdout: "--json", notStdout: "--config"},
		{name: "check takes a command after --", args: []string{"check", "my-agent"}, wantCode: 2, wantStderr: "goes after --: acp-bridge check -- my-agent"},
		{name: "completion shell typo", args: []string{"completion", "bsh"}, wantCode: 2, wantStderr: `Did you mean "bash"?`},
		{name: "man page", args: []string{"man"}, wantStdout: ".TH acp-bridge 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runSelf(t, nil, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit status = %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if tt.wantStdout == "" && stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if !strings.Contains(stdout, tt.wantStdout) || tt.notStdout != "" && strings.Contains(stdout, tt.notStdout) {
				t.Errorf("stdout has not %q or has %q:\n%s", tt.wantStdout, tt.notStdout, stdout)
			}
			if !strings.Contains(stderr, tt.wantStderr) || tt.notStderr != "" && strings.Contains(stderr, tt.notStderr) {
				t.Errorf("stderr has not %q or has %q:\n%s", tt.wantStderr, tt.notStderr, stderr)
			}
		})
	}
}

// The man page and the completion scripts come from the same definitions
// as the help: every command is in them, and the bash script completes.
func TestManAndCompletion(t *testing.T) {
	man, _, code := runSelf(t, nil, "man")
	if code != 0 {
		t.Fatalf("man: exit status %d", code)
	}
	for _, p := range everyCommand() {
		if p.cmd != nil && !strings.Contains(man, p.cmd.Name) {
			t.Errorf("the man page lacks the command %q", p.name())
		}
	}
	script, _, code := runSelf(t, nil, "completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash: exit status %d", code)
	}
	file := filepath.Join(t.TempDir(), "acp-bridge.bash")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("no bash to run the completion with: %v", err)
	}
	for line, want := range map[string]string{
		"config sh":        "show",
		"trace view --ou":  "--output",
		"doctor --prom":    "--prompt",
		"completion --he":  "--help",
		"--url x dia":      "dialects",
		"dialects show --": "--config --profile --help",
	} {
		words := append([]string{"acp-bridge"}, strings.Fields(line)...)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		out, err := exec.Command("bash", append([]string{"-c", `source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($#-1)); _acp_bridge; echo "${COMPREPLY[*]}"`, file}, words...)...).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("completing %q: %q (%v), want %q", line, out, err, want)
		}
	}
	for _, shell := range []string{"zsh", "fish"} {
		out, _, code := runSelf(t, nil, "completion", shell)
		if code != 0 || !strings.Contains(out, "acp-bridge") || !strings.Contains(out, "doctor") {
			t.Errorf("completion %s: exit status %d:\n%.300s", shell, code, out)
		}
	}
}
