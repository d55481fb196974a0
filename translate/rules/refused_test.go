package rules

import (
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate/translatetest"
)

// refused is a profile for an agent that reports the result of a tool the
// editor refused: the agent's own frame for the refused call (its status,
// its output) must reach the editor.
const refused = `
request "session/prompt" {
  send = { op = "run", text = prompt.text }
}
event "tool" {
  match = { op = "tool", status = "running" }
  tool {
    open   = true
    key    = frame.id
    name   = frame.name
    status = "in_progress"
  }
}
event "tool-end" {
  match = { op = "tool" }
  tool {
    key    = frame.id
    output = frame.output
    status = map(frame.status, { done = "completed" })
    close  = true
  }
}
event "ask" {
  match = { op = "ask" }
  permission {
    allow            = { op = "approve", id = tool.id }
    reject           = { op = "deny", id = tool.id }
    reject_ends_turn = false
  }
}
event "done" {
  match    = { op = "done" }
  end_turn = "end_turn"
}
`

func TestGoldenRefused(t *testing.T) {
	p, diags := Parse("refused.hcl", []byte(refused))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/refused/*.txtar")
}

// refusedWait is refused with the default reject_ends_turn = true: the
// refusal ends the turn, but its answer waits reject_report_wait (500 ms
// by default) for the agent's report of the refused call, which may come
// in pieces (a log event that adds output without closing the call).
var refusedWait = strings.Replace(refused, "    reject_ends_turn = false\n", "", 1) + `
event "say" {
  match   = { op = "say" }
  message = frame.text
}
event "tool-log" {
  match = { op = "log" }
  tool {
    key    = frame.id
    output = frame.text
  }
}
`

func TestGoldenRefusedWait(t *testing.T) {
	if strings.Contains(refusedWait, "reject_ends_turn") {
		t.Fatal("refusedWait still sets reject_ends_turn")
	}
	p, diags := Parse("refused-wait.hcl", []byte(refusedWait))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/refused-wait/*.txtar")
}
