package rules

import (
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
