package rules

import (
	"testing"

	"github.com/acp-bridge/acp-bridge/translate/translatetest"
)

// stops is a profile whose end_turn is computed from the frame: a
// condition, a map with a default, and the frame's own value, which the
// translator checks when the turn ends.
const stops = `
request "session/prompt" {
  send = { ask = prompt.text }
}
event "finish" {
  match    = { kind = "finish" }
  end_turn = frame.reason == "length" ? "max_tokens" : map(frame.reason, { refused = "refusal" }, "end_turn")
}
event "raw" {
  match    = { kind = "raw" }
  end_turn = frame.stop
}
`

func TestGoldenStops(t *testing.T) {
	p, diags := Parse("stops.hcl", []byte(stops))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/stops/*.txtar")
}
