package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

const permissionParams = `{"sessionId":"s","toolCall":{"toolCallId":"t1","title":"Delete the build"},"options":[` +
	`{"optionId":"allow-once","name":"Allow once","kind":"allow_once"},` +
	`{"optionId":"reject-once","name":"Reject","kind":"reject_once"}]}`

func newTestPrompter(tty string) (*prompter, *bytes.Buffer, *bytes.Buffer) {
	var out, diag bytes.Buffer
	p := &prompter{out: &out, diag: &diag, tools: map[string]*toolSeen{}, cancelled: make(chan struct{})}
	if tty != "" {
		p.tty = bufio.NewReader(strings.NewReader(tty))
	}
	return p, &out, &diag
}

func outcome(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// On a terminal the options are listed on stderr and a choice is read by
// number or by id; a word that is neither is asked again, and the end of
// the input cancels.
func TestPrompt_AskOnTerminal(t *testing.T) {
	for _, tt := range []struct{ input, want string }{
		{"1\n", `{"outcome":{"optionId":"allow-once","outcome":"selected"}}`},
		{"maybe\n9\nreject-once\n", `{"outcome":{"optionId":"reject-once","outcome":"selected"}}`},
		{"maybe\n", `{"outcome":{"outcome":"cancelled"}}`},
	} {
		p, out, diag := newTestPrompter(tt.input)
		if got := outcome(t, p.permission(json.RawMessage(permissionParams))); got != tt.want {
			t.Errorf("input %q: answered %s, want %s", tt.input, got, tt.want)
		}
		for _, s := range []string{"asks permission: Delete the build", "1) Allow once (allow_once)", "2) Reject (reject_once)", "choose 1-2: "} {
			if !strings.Contains(diag.String(), s) {
				t.Errorf("input %q: stderr lacks %q:\n%s", tt.input, s, diag.String())
			}
		}
		if out.Len() != 0 {
			t.Errorf("input %q: the question went to stdout: %q", tt.input, out.String())
		}
	}
}

// A permission question waiting on the terminal is answered cancelled at
// Ctrl-C.
func TestPrompt_AskCancelledByInterrupt(t *testing.T) {
	p, _, _ := newTestPrompter("")
	r, w := bufioPipe()
	defer w.Close()
	p.tty = r
	close(p.cancelled)
	if got := outcome(t, p.permission(json.RawMessage(permissionParams))); got != `{"outcome":{"outcome":"cancelled"}}` {
		t.Errorf("answered %s, want cancelled", got)
	}
}

// Thoughts are prefixed line by line when stdout is not a terminal and
// dimmed when it is; text continues its line; a tool call starts its own.
func TestPrompt_Render(t *testing.T) {
	updates := []string{
		`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm\nwell"}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"lo"}}`,
		`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Read a.txt","kind":"read","status":"in_progress"}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"in_progress"}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed"}`,
		`{"sessionUpdate":"plan","entries":[{"content":"read","status":"completed"},{"content":"answer","status":"pending"}]}`,
	}
	for _, dim := range []bool{false, true} {
		p, out, _ := newTestPrompter("")
		p.dim = dim
		for _, u := range updates {
			p.notification("session/update", json.RawMessage(`{"sessionId":"s","update":`+u+`}`))
		}
		p.endLine()
		want := "[thought] hmm\n[thought] well\nHello\n[tool] Read a.txt (read): in_progress\n[tool] Read a.txt (read): completed\n[plan]\n  [completed] read\n  [pending] answer\n"
		if dim {
			want = "\x1b[2mhmm\x1b[0m\n\x1b[2mwell\x1b[0m\n" + want[len("[thought] hmm\n[thought] well\n"):]
		}
		if out.String() != want {
			t.Errorf("dim %v: printed\n%q\nwant\n%q", dim, out.String(), want)
		}
	}
}

// The exit statuses are distinct for each stop reason.
func TestPrompt_StopStatus(t *testing.T) {
	seen := map[int]string{}
	for _, r := range []string{"end_turn", "refusal", "max_tokens", "max_turn_requests", "cancelled", "what"} {
		code := stopStatus(r)
		if other, dup := seen[code]; dup {
			t.Errorf("%s and %s both exit %d", r, other, code)
		}
		seen[code] = r
	}
	if stopStatus("end_turn") != 0 || stopStatus("cancelled") != 130 {
		t.Errorf("end_turn %d, cancelled %d; want 0 and 130", stopStatus("end_turn"), stopStatus("cancelled"))
	}
}

// bufioPipe is a terminal nobody types on: reads wait until w is closed.
func bufioPipe() (*bufio.Reader, *io.PipeWriter) {
	r, w := io.Pipe()
	return bufio.NewReader(r), w
}
