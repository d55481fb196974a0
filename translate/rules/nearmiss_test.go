package rules

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// nearMissProfile has a rule of each kind whose match a typo can miss.
const nearMissProfile = `
connect {
  send   = { op = "hello" }
  expect = { op = "welcome" }
  reject = { op = "denied" }
}
turn {
  key = "job"
}
request "session/prompt" {
  send = { op = "run", job = id, text = prompt.text }
}
cancel {
  send = { op = "abort", job = turn.sent.job }
  ack  = { op = "aborted", job = turn.sent.job }
}
error {
  match   = { op = "fail" }
  message = frame.msg
}
event "progress" {
  match   = { op = "progress", "data.kind" = ["text", "thought"] }
  message = frame.data.text
}
event "status" {
  match = { op = "status", busy = present }
}
event "x" {
  match = { t = "x" }
}
event "done" {
  match    = { op = "done", "meta.final" = true }
  end_turn = "end_turn"
}
`

// A frame no rule matches names the rule it misses by a typo, whichever
// condition holds the typo (a value, a key, the case), and none when it
// misses by more than a typo or by two conditions.
func TestNearMiss(t *testing.T) {
	p, diags := Parse("nm.hcl", []byte(nearMissProfile))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	tests := []struct {
		frame, want string // want "": no near miss
	}{
		{`{"op":"welcom"}`, `connect's expect matches { "op" = "welcome" }, and the frame has "op" = "welcom"`},
		{`{"op":"deneid"}`, `connect's reject matches { "op" = "denied" }, and the frame has "op" = "deneid"`},
		{`{"op":"abortd","job":3}`, `cancel's ack matches { "op" = "aborted", "job" = turn.sent.job }, and the frame has "op" = "abortd"`},
		{`{"op":"Fail","msg":"x"}`, `the error block matches { "op" = "fail" }, and the frame has "op" = "Fail"`},
		{`{"op":"progres","data":{"kind":"thought"}}`, `event "progress" matches { "op" = "progress", "data.kind" = ["text", "thought"] }, and the frame has "op" = "progres"`},
		{`{"op":"progress","data":{"kidn":"text"}}`, `event "progress" matches { "op" = "progress", "data.kind" = ["text", "thought"] }, and the frame has "data.kidn" instead`},
		{`{"op":"progress","data":{"kind":"thougth"}}`, `event "progress" matches { "op" = "progress", "data.kind" = ["text", "thought"] }, and the frame has "data.kind" = "thougth"`},
		{`{"op":"status","bussy":false}`, `event "status" matches { "op" = "status", "busy" = (any value) }, and the frame has "bussy" instead`},
		{`{"op":"done","meta":{"final":true,"n":1}}`, ""}, // matches: no miss
		{`{"op":"dnoe","meta":{"final":true}}`, `event "done" matches { "op" = "done", "meta.final" = true }, and the frame has "op" = "dnoe"`},
		{`{"op":"dnoe","meta":{"final":false}}`, ""},      // two conditions fail
		{`{"op":"done","meta":{"final":"true"}}`, ""},     // a value of another type
		{`{"op":"progress","data":{"kind":"image"}}`, ""}, // far from every wanted value
		{`{"op":"finished"}`, ""},                         // far from every rule
		{`{"t":"y"}`, ""},                                 // one letter is no typo
		{`{"op":"dome","meta":{"final":true}}`, `event "done" matches { "op" = "done", "meta.final" = true }, and the frame has "op" = "dome"`},
		{`{"po":"progress","data":{"kind":"text"}}`, `event "progress" matches { "op" = "progress", "data.kind" = ["text", "thought"] }, and the frame has "po" instead`},
	}
	big := `{"op":"dnoe","meta":{"final":true},"pad":"` + strings.Repeat("x", nearMissMax) + `"}`
	tests = append(tests, struct{ frame, want string }{big, ""}) // too big to search
	for _, tt := range tests {
		if got := p.nearMiss([]byte(tt.frame)); got != tt.want {
			t.Errorf("nearMiss(%s)\n got %s\nwant %s", tt.frame, got, tt.want)
		}
	}
}

// The class: in a profile of many rules, one match value misspelt by one
// random edit (a letter changed, added, dropped, or two swapped) is named
// for the frame it was meant for (the words are far enough apart that no
// other rule is as close), and a frame far from every rule names none.
// Seeded, so a failure repeats.
func TestNearMissRandomTypos(t *testing.T) {
	r := rand.New(rand.NewPCG(54, 5))
	words := []string{"progress", "thinking", "tool_start", "tool_end", "message", "finished", "heartbeat", "approval", "result", "warning", "delta", "usage"}
	for round := range 300 {
		rules := r.Perm(len(words))[:6]
		victim := rules[r.IntN(len(rules))]
		typoed := mutate(r, words[victim])
		var b strings.Builder
		b.WriteString("request \"session/prompt\" {\n  send = { kind = \"ask\", text = prompt.text }\n}\n")
		for _, i := range rules {
			w := words[i]
			if i == victim {
				w = typoed
			}
			fmt.Fprintf(&b, "event %q {\n  match = { kind = %q, seq = present }\n}\n", words[i], w)
		}
		p, diags := Parse("random.hcl", []byte(b.String()))
		if diags.HasErrors() {
			t.Fatalf("round %d: %v\n%s", round, diags, b.String())
		}
		frame := fmt.Sprintf(`{"kind":%q,"seq":%d}`, words[victim], round)
		want := fmt.Sprintf("event %q matches { \"kind\" = %q, \"seq\" = (any value) }, and the frame has \"kind\" = %q", words[victim], typoed, words[victim])
		got := p.nearMiss([]byte(frame))
		if _, near := typo(words[victim], typoed); !near {
			t.Fatalf("round %d: %q → %q is one edit, not taken for a typo", round, words[victim], typoed)
		}
		if got != want {
			t.Errorf("round %d: frame %s\n got %q\nwant %q", round, frame, got, want)
		}
		if got := p.nearMiss([]byte(`{"kind":"something else entirely","seq":1}`)); got != "" {
			t.Errorf("round %d: a frame far from every rule is taken for a near miss: %s", round, got)
		}
	}
}

// mutate makes one random edit to w.
func mutate(r *rand.Rand, w string) string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	for {
		i := r.IntN(len(w))
		var out string
		switch r.IntN(4) {
		case 0: // change
			out = w[:i] + string(letters[r.IntN(26)]) + w[i+1:]
		case 1: // add
			out = w[:i] + string(letters[r.IntN(26)]) + w[i:]
		case 2: // drop
			out = w[:i] + w[i+1:]
		default: // swap
			if i+1 >= len(w) {
				continue
			}
			out = w[:i] + string(w[i+1]) + string(w[i]) + w[i+2:]
		}
		if out != w {
			return out
		}
	}
}

// What a frame no rule matches costs in the search for a near miss: a
// small frame, and one of many keys at the size limit.
func BenchmarkNearMiss(b *testing.B) {
	p, diags := Parse("nm.hcl", []byte(nearMissProfile))
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	var wide strings.Builder
	wide.WriteString(`{"op":"dnoe"`)
	for i := 0; wide.Len() < nearMissMax-64; i++ {
		fmt.Fprintf(&wide, `,"k%d":"v"`, i)
	}
	wide.WriteString("}")
	for _, f := range []struct{ name, frame string }{
		{"small", `{"op":"dnoe","job":7,"meta":{"final":true}}`},
		{"wide", wide.String()},
	} {
		b.Run(f.name, func(b *testing.B) {
			frame := []byte(f.frame)
			for b.Loop() {
				p.nearMiss(frame)
			}
		})
	}
}
