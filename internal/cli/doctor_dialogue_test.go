package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	fakerules "github.com/acp-bridge/acp-bridge/tests/fakeagent/rules"
)

// fakeAgents are the agents this test binary runs as with FAKE_AGENT=NAME.
var fakeAgents = map[string]func() int{
	"acp":        fakeagent.RunStdio,
	"chat-lines": fakerules.RunStdio(fakerules.ChatLines),
}

// fakeAgentCommand is the command line that runs this binary as the fake
// agent name: its environment says so, and not that it is acp-bridge.
func fakeAgentCommand(t *testing.T, name string) []string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"env", "-u", "ACP_BRIDGE_TEST_ARGS", "FAKE_AGENT=" + name, self}
}

// Doctor hears from the agent for every dialect, and when the agent's
// frames show another dialect than the one configured, or none, it says
// which frame it waited for, what came instead, and the dialect to use.
func TestDoctorHearsTheAgent(t *testing.T) {
	acp, chat := fakeAgentCommand(t, "acp"), fakeAgentCommand(t, "chat-lines")
	tests := []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		want     []string // substrings of stdout
		absent   []string
	}{
		{"chat-lines against an ACP agent", nil,
			append([]string{"doctor", "--request-timeout", "3s", "--dialect", "chat-lines", "--"}, acp...), 1,
			[]string{"(answered by acp-bridge: dialect chat-lines has no initialize of its own)", "a short prompt checks that it answers",
				"FAILED   session/prompt", "the agent sent nothing", "asked in ACP, the agent answers initialize with protocolVersion 1",
				"to fix:  the agent speaks ACP itself: use --dialect acp"},
			[]string{"all good"}},
		{"claude-stream-json against an ACP agent", nil,
			append([]string{"doctor", "--request-timeout", "2s", "--dialect", "claude-stream-json", "--"}, acp...), 1,
			[]string{"FAILED   session/new", "to fix:  the agent speaks ACP itself: use --dialect acp"},
			[]string{"all good"}},
		{"connect frame that never came", nil,
			[]string{"doctor", "--request-timeout", "2s", "--dialect", "mini-agent-ws", "--", "sh", "-c", `echo '{"hello":"x"}'; cat >/dev/null`}, 1,
			[]string{`FAILED   initialize: mini-agent-ws waits for the agent's connect frame matching { "type" = "connection_established" }, which never came; the agent sent 1 frame(s): {"hello":"x"}`,
				"to fix:  the agent does not greet as dialect mini-agent-ws expects"},
			[]string{"did not answer initialize within"}},
		{"lines that are not JSON", nil,
			[]string{"doctor", "--request-timeout", "2s", "--", "sh", "-c", `echo "Welcome to my agent"; echo "type help"; cat >/dev/null`}, 1,
			[]string{`it printed 2 line(s) that are not JSON: "Welcome to my agent" | "type help"`, "to fix:  the agent writes text, not the JSON frames of dialect acp"},
			[]string{"sent nothing"}},
		{"prompt turn", nil,
			append([]string{"doctor", "--dialect", "chat-lines", "--prompt", "hello", "--"}, chat...), 0,
			[]string{"ok       session/prompt: end of turn (end_turn) after", "4 update(s), first update after", "all good"},
			[]string{"a short prompt checks"}},
		{"prompt turn with unmatched frames", nil,
			[]string{"doctor", "--dialect", "chat-lines", "--prompt", "hi", "--", "sh", "-c", `while read l; do echo '{"kind":"delta","text":"hi"}'; echo '{"weird":1}'; done`}, 1,
			[]string{`FAILED   session/prompt: the turn ended (end_turn) after`, `1 agent frame(s) matched no rule of dialect chat-lines and were dropped: no rule of profile chat-lines matches {"weird":1}`,
				"to fix:  add a rule for these frames to dialect chat-lines"},
			[]string{"all good", "ok       session/prompt"}},
		{"prompt turn without content", nil,
			[]string{"doctor", "--dialect", "chat-lines", "--prompt", "hi", "--", "sh", "-c", `while read l; do echo '{"kind":"delta","text":""}'; done`}, 1,
			[]string{`FAILED   session/prompt: the turn ended (end_turn) after`, "none of them content an editor shows", `the agent sent 1 frame(s): {"kind":"delta","text":""}`,
				"to fix:  no rule of dialect chat-lines turned the agent's answer into a message"},
			[]string{"all good", "ok       session/prompt"}},
		{"no prompt turn", nil,
			append([]string{"doctor", "--"}, acp...), 0,
			[]string{"ok       session/new", "no problem found in initialize and session/new; a prompt turn was not run: --prompt TEXT runs one"},
			[]string{"all good", "FAILED"}},
		{"prompt turn without an end", nil,
			append([]string{"doctor", "--request-timeout", "2s", "--prompt", "hold", "--"}, acp...), 1,
			[]string{"ok       session/new", "FAILED   session/prompt: no end of turn within 2s", "to fix:  the agent streamed but did not end the turn: if it is still working, give it longer (--request-timeout); if not, it never answered session/prompt"},
			[]string{"all good", "pick the dialect"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runSelf(t, tt.env, tt.args...)
			t.Logf("doctor said:\n%s", stdout)
			if code != tt.wantCode {
				t.Errorf("exit status = %d, want %d\nstderr:\n%s", code, tt.wantCode, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q", w)
				}
			}
			for _, w := range tt.absent {
				if strings.Contains(stdout, w) {
					t.Errorf("stdout has %q", w)
				}
			}
		})
	}
}

// doctor --json prints one JSON object: the agent, ok, and every step.
func TestDoctorJSON(t *testing.T) {
	stdout, stderr, code := runSelf(t, nil, append([]string{"doctor", "--json", "--prompt", "hello", "--"}, fakeAgentCommand(t, "acp")...)...)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	var report struct {
		Agent   string
		OK      bool
		Verdict string
		Steps   []struct{ Status, Text, Fix string }
	}
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	if !report.OK || report.Verdict != "all good" || len(report.Steps) != 4 || report.Steps[3].Status != "ok" || !strings.HasPrefix(report.Steps[3].Text, "session/prompt: end of turn") {
		t.Errorf("report = %+v", report)
	}
}
