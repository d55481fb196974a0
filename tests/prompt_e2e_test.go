package tests

// `acp-bridge prompt` end to end: the built binary plays the editor for one
// turn against the fake ACP agent as a child process and behind a
// WebSocket, and against rule profile agents; the tests read its stdout
// (the turn), its stderr (what it chose, what went wrong) and its exit
// status (the stop reason).

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// promptRun is one run of acp-bridge prompt.
type promptRun struct {
	stdout, stderr string
	code           int
}

// runPrompt runs `acp-bridge prompt ARGS` in dir with env, its stdin empty
// (no terminal to ask permission questions on).
func runPrompt(t *testing.T, dir string, env []string, args ...string) promptRun {
	t.Helper()
	cmd := exec.Command(BridgeBin, append([]string{"prompt"}, args...)...)
	cmd.Env = hermeticEnv(t, env)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := promptRun{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return r
}

// childPrompt runs prompt against the fake ACP agent as a child process.
func childPrompt(t *testing.T, dir string, args ...string) promptRun {
	t.Helper()
	return runPrompt(t, dir, []string{"FAKE_AGENT=acp"}, append(args, "--", selfExe(t))...)
}

func (r promptRun) want(t *testing.T, code int, stdout ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", s, r.stdout, r.stderr)
		}
	}
}

func (r promptRun) wantStderr(t *testing.T, s string) {
	t.Helper()
	if !strings.Contains(r.stderr, s) {
		t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
	}
}

// The agent's text goes to stdout as it comes, and nothing else does.
func TestPrompt_ACPChildText(t *testing.T) {
	t.Parallel()
	r := childPrompt(t, t.TempDir(), "stream 3")
	r.want(t, 0)
	if r.stdout != "chunk-0000chunk-0001chunk-0002\n" {
		t.Errorf("stdout %q, want the three chunks on one line", r.stdout)
	}
	// Several words are one text; the text may also come last after --.
	r = runPrompt(t, t.TempDir(), []string{"FAKE_AGENT=acp"}, "--", selfExe(t), "hello there")
	r.want(t, 0, "echo:hello there")
	r = childPrompt(t, t.TempDir(), "hello", "again")
	r.want(t, 0, "echo:hello again")
	// An agent by name from the configuration file.
	cfg := filepath.Join(t.TempDir(), "config.hcl")
	if err := os.WriteFile(cfg, []byte("agent \"fake\" {\n  command = ["+strconv.Quote(selfExe(t))+"]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runPrompt(t, t.TempDir(), []string{"FAKE_AGENT=acp"}, "--config", cfg, "--agent", "fake", "hello config")
	r.want(t, 0, "echo:hello config")
}

// Permission questions: --yes allows once, --no rejects, and with no
// terminal to ask on the answer is reject; stderr says what was chosen.
// The tool call is shown with its title, kind and final status.
func TestPrompt_Permission(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		flag, chosen, said string
	}{
		{"--yes", "allow-once", "Allow once (allow-once; --yes)"},
		{"--no", "reject-once", "Reject (reject-once; --no)"},
		{"", "reject-once", "no terminal to ask on"},
	} {
		t.Run(strings.TrimPrefix(tt.flag, "--"), func(t *testing.T) {
			t.Parallel()
			args := []string{"permission"}
			if tt.flag != "" {
				args = append(args, tt.flag) // a flag after the text is a flag
			}
			r := childPrompt(t, t.TempDir(), args...)
			r.want(t, 0, "[tool] Run a dangerous thing (execute): pending", "permission:selected:"+tt.chosen, "[tool] Run a dangerous thing (execute): completed")
			r.wantStderr(t, tt.said)
		})
	}
	if r := childPrompt(t, t.TempDir(), "--yes", "--no", "permission"); r.code != 2 {
		t.Errorf("--yes --no: exit status %d, want 2", r.code)
	}
}

// The stop reason is the exit status; an error answer is 1.
func TestPrompt_ExitStatus(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		text   string
		code   int
		stdout string
	}{
		{"stop end_turn", 0, "stopping:end_turn"},
		{"stop refusal", 3, "stopping:refusal"},
		{"stop max_tokens", 4, "stopping:max_tokens"},
		{"stop max_turn_requests", 5, "stopping:max_turn_requests"},
		{"stop cancelled", 130, "stopping:cancelled"},
		{"die", 1, "last-words"},
	} {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			childPrompt(t, t.TempDir(), tt.text).want(t, tt.code, tt.stdout)
		})
	}
	if r := runPrompt(t, t.TempDir(), nil, "--", "true"); r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "needs the TEXT") {
		t.Errorf("no text: exit status %d, stdout %q, stderr %q; want 2, nothing, the TEXT missing", r.code, r.stdout, r.stderr)
	}
}

// --json prints each session/update's params on a line, then the stop
// reason.
func TestPrompt_JSON(t *testing.T) {
	t.Parallel()
	r := childPrompt(t, t.TempDir(), "permission", "--json", "--yes")
	r.want(t, 0)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 3 updates and the stop reason:\n%s", len(lines), r.stdout)
	}
	var kinds []string
	for _, l := range lines[:3] {
		var u struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				SessionUpdate string `json:"sessionUpdate"`
			} `json:"update"`
		}
		if err := json.Unmarshal([]byte(l), &u); err != nil || u.SessionID == "" {
			t.Errorf("line %q: not a session/update's params (%v)", l, err)
		}
		kinds = append(kinds, u.Update.SessionUpdate)
	}
	if got := strings.Join(kinds, " "); got != "tool_call agent_message_chunk tool_call_update" {
		t.Errorf("updates %q", got)
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[3]), &last); err != nil || last["stopReason"] != "end_turn" {
		t.Errorf("last line %q, want {\"stopReason\":\"end_turn\"} (%v)", lines[3], err)
	}
	r = childPrompt(t, t.TempDir(), "--json", "stop refusal")
	r.want(t, 3, `{"stopReason":"refusal"}`)
}

// Files are served inside the current directory and refused outside it;
// terminals are refused.
func TestPrompt_FilesAndTerminals(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("hello file"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := childPrompt(t, dir, "fs "+in)
	r.want(t, 0, "fs:read:hello file", "fs:wrote")
	if b, err := os.ReadFile(in + ".out"); err != nil || string(b) != "copied:hello file" {
		t.Errorf("the agent's write: %q, %v", b, err)
	}
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = childPrompt(t, dir, "fs "+outside)
	r.want(t, 0, "fs:read-error:-32602")
	r.wantStderr(t, "outside the session directory")
	if strings.Contains(r.stdout, "secret") && !strings.Contains(r.stdout, "read-error") {
		t.Errorf("a file outside the directory was read:\n%s", r.stdout)
	}
	childPrompt(t, dir, "terminal").want(t, 0, "terminal:create-error:-32601")
}

// --url: a WebSocket ACP agent.
func TestPrompt_URL(t *testing.T) {
	t.Parallel()
	s := StartWSAgent(t, fakeagent.WSOptions{})
	runPrompt(t, t.TempDir(), nil, "--url", s.URL, "hello ws").want(t, 0, "echo:hello ws")
	r := runPrompt(t, t.TempDir(), nil, "--url", s.URL, "--no", "permission")
	r.want(t, 0, "permission:selected:reject-once")
	runPrompt(t, t.TempDir(), nil, "--url", s.URL, "stop max_tokens").want(t, 4, "stopping:max_tokens")
}

// Rule profile agents: thoughts are prefixed when stdout is not a
// terminal, tool calls show their title, kind and status, plans their
// entries; an agent's error is exit status 1 with the message on stderr.
func TestPrompt_RulesProfile(t *testing.T) {
	t.Parallel()
	rpc := []string{"FAKE_AGENT=rules-agent-rpc"}
	r := runPrompt(t, t.TempDir(), rpc, "--dialect", "agent-rpc", "tool", "--", selfExe(t))
	r.want(t, 0, "[thought] Processing your request...\n", "[tool] List files (execute): in_progress", "[tool] List files (execute): completed", "Found a.txt")
	r = runPrompt(t, t.TempDir(), rpc, "--dialect", "agent-rpc", "fail", "--", selfExe(t))
	r.want(t, 1)
	r.wantStderr(t, "model overloaded, try later")
	r = runPrompt(t, t.TempDir(), []string{"FAKE_AGENT=rules-chat-lines"}, "--dialect", "chat-lines", "hello", "--", selfExe(t))
	r.want(t, 0, "[thought] greeting\n", "[plan]\n  [in_progress] answer\n", "You said: hello")
}
