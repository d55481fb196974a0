package rules

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/translate/translatetest"
	"github.com/tidwall/gjson"
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

// TestRefusedWaitInterleavings drives refusedWait through seeded random
// interleavings of what can follow a refusal that ends the turn: the
// agent's script (pieces of its report of the refused call, the report
// that closes it, a message, another ask, its end of the turn) against
// the engine's ticks, a session/cancel and the engine abandoning the
// prompt. For every interleaving:
//
//   - a report of the refused call fed while the prompt is unanswered
//     reaches the editor at once, as an update of that call carrying the
//     agent's text, before the prompt's answer;
//   - a report fed after the answer reaches the editor never, and is
//     noted (the gap is recorded);
//   - the prompt is answered once the agent has sent nothing about the
//     refused call for reject_report_wait (500 ms), end_turn unless the
//     agent ended it otherwise or the editor cancelled;
//   - a tick leaves no deadline past due (its Timer, if any, is at least
//     one time step on: a past-due deadline made the engine tick every
//     millisecond);
//   - the driver's own invariants hold (every request answered exactly
//     once, updates well formed).
func TestRefusedWaitInterleavings(t *testing.T) {
	p, diags := Parse("refused-wait.hcl", []byte(refusedWait))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	const (
		seeds = 1500
		step  = 50 * time.Millisecond // every time is a multiple of it
		wait  = 500 * time.Millisecond
	)
	setup := []string{
		`editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`,
		`editor> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`,
		`editor> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"session-1","prompt":[{"type":"text","text":"delete it"}]}}`,
		`agent> {"op":"tool","id":"t1","name":"rm","status":"running"}`,
		`agent> {"op":"ask"}`,
		`editor> {"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`,
	}
	var stats struct{ shown, late, byWait, byEnd, byAsk, byCancel, abandoned int }
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 54))
		dr, err := translatetest.NewDriver(p.Dialect(), nil, "refused-wait.hcl")
		if err != nil {
			t.Fatal(err)
		}
		var log []string // the inputs, for the failure message
		feed := func(line string) []translatetest.Output {
			log = append(log, line)
			outs, err := dr.Feed(line)
			if err != nil {
				t.Fatalf("seed %d: %v\n%s", seed, err, strings.Join(log, "\n"))
			}
			return outs
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d: %s\ninputs:\n%s", seed, fmt.Sprintf(format, args...), strings.Join(log, "\n"))
		}
		for _, l := range setup {
			feed(l)
		}
		tick := func(now time.Duration) []translatetest.Output {
			outs := feed(fmt.Sprintf("event> tick %s", now))
			for _, o := range outs {
				if o.Marker != translatetest.GotTimer {
					continue
				}
				if d, err := time.ParseDuration(o.Text); err != nil || d < step {
					fail("a tick at %s asked for the next tick %s on: a deadline was left past due", now, o.Text)
				}
			}
			return outs
		}
		// The agent's script, in its order: pieces of the report, maybe
		// the report that closes the call, with a message or another ask
		// somewhere, maybe its end.
		var script []string
		for i := range rng.IntN(3) {
			script = append(script, fmt.Sprintf(`agent> {"op":"log","id":"t1","text":"piece %d; "}`, i))
		}
		if rng.IntN(4) > 0 {
			script = append(script, `agent> {"op":"tool","id":"t1","status":"denied","output":"user said no"}`)
		}
		if rng.IntN(2) == 0 {
			i := rng.IntN(len(script) + 1)
			script = slices.Insert(script, i, `agent> {"op":"say","text":"ok"}`)
		}
		if rng.IntN(6) == 0 {
			i := rng.IntN(len(script) + 1)
			script = slices.Insert(script, i, `agent> {"op":"tool","id":"t2","name":"rm","status":"running"}`, `agent> {"op":"ask"}`)
		}
		if rng.IntN(2) == 0 {
			script = append(script, `agent> {"op":"done"}`)
		}
		now := time.Duration(0)
		due := wait // the prompt must be answered by a tick at or after it
		answered, cancelled := false, false
		for len(script) > 0 || rng.IntN(3) > 0 {
			var outs []translatetest.Output
			switch r := rng.IntN(10); {
			case r < 5 && len(script) > 0:
				line := script[0]
				script = script[1:]
				outs = feed(line)
				if !strings.Contains(line, `"id":"t1"`) {
					break
				}
				text := gjson.Get(strings.TrimPrefix(line, "agent> "), "text").Str
				if text == "" {
					text = "user said no"
				}
				shown := false
				for _, o := range outs {
					if o.Marker == translatetest.ToEditor && strings.Contains(o.Text, `"toolCallId":"t1"`) && strings.Contains(o.Text, text) {
						shown = true
					}
				}
				switch {
				case !answered && !shown:
					fail("the report %s, fed before the prompt's answer, did not reach the editor: %v", line, outs)
				case answered && shown:
					fail("the report %s reached the editor after the prompt's answer: %v", line, outs)
				case answered && !slices.ContainsFunc(outs, func(o translatetest.Output) bool { return o.Marker == translatetest.GotNote }):
					fail("the report %s, fed after the prompt's answer, was dropped without a note: %v", line, outs)
				case answered:
					stats.late++
				default:
					stats.shown++
					due = now + wait
				}
			case r < 8:
				now += step * time.Duration(1+rng.IntN(6))
				if rng.IntN(10) == 0 {
					now += 30 * time.Second // past the turn's quiet warning
				}
				outs = tick(now)
			case r == 8 && !answered:
				outs = feed(`editor> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"session-1"}}`)
				cancelled = true
			case r == 9 && !answered && rng.IntN(4) == 0:
				outs = feed("event> abandon 2")
				answered = true
				stats.abandoned++
			}
			for _, o := range outs {
				if o.Marker != translatetest.ToEditor || gjson.Get(o.Text, "id").Raw != "2" {
					continue
				}
				answered = true
				stop := gjson.Get(o.Text, "result.stopReason").Str
				switch {
				case cancelled:
					stats.byCancel++
					if stop != "cancelled" {
						fail("the cancelled prompt was answered %s", o.Text)
					}
				case stop != "end_turn":
					fail("the refused prompt was answered %s, want end_turn", o.Text)
				case strings.HasPrefix(log[len(log)-1], "event> tick"):
					stats.byWait++
				case strings.Contains(log[len(log)-1], `"op":"ask"`):
					stats.byAsk++
				default:
					stats.byEnd++
				}
			}
			if !answered && strings.HasPrefix(log[len(log)-1], "event> tick") && now >= due {
				fail("the prompt is still unanswered at %s, %s after the refusal or the last report", now, wait)
			}
		}
		now += time.Hour
		tick(now)
		tick(now + step)
		dr.Finish(nil)
		if probs := dr.Problems(); len(probs) > 0 {
			fail("%s", strings.Join(probs, "\n"))
		}
	}
	t.Logf("%d interleavings: %d reports shown before the answer, %d late ones noted; prompts answered by the wait %d, the agent's end %d, another ask %d, a cancel %d; abandoned %d",
		seeds, stats.shown, stats.late, stats.byWait, stats.byEnd, stats.byAsk, stats.byCancel, stats.abandoned)
}
