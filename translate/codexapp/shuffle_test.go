package codexapp

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"golang.org/x/tools/txtar"

	"github.com/acp-bridge/acp-bridge/translate/translatetest"
)

// The class, not the instance: an app-server writes a request's answer and
// its notifications from different tasks, so turn/start's answer may come
// after the turn's first notifications (turn/started, items, usage), and
// notifications the bridge does not use, or that name other threads, come
// anywhere. For every golden transcript made of real frames, with turn/start's
// answers moved to random later points of their turns and noise inserted at
// random points, the editor must see exactly what it sees in the recorded
// order. Seeds are fixed (plus one from the run, named when it fails).
func TestRecordedFlowsInAnyOrder(t *testing.T) {
	files := []string{"turn", "command-approved", "command-denied", "file-change", "cancel", "error", "load"}
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, rand.Uint64()}
	for _, name := range files {
		data, err := os.ReadFile("testdata/" + name + ".txtar")
		if err != nil {
			t.Fatal(err)
		}
		var inputs []string
		for _, f := range txtar.Parse(data).Files {
			if f.Name != "transcript" {
				continue
			}
			for _, l := range strings.Split(string(f.Data), "\n") {
				if strings.HasPrefix(l, "editor> ") || strings.HasPrefix(l, "agent> ") || strings.HasPrefix(l, "event> ") {
					inputs = append(inputs, l)
				}
			}
		}
		want := editorView(t, inputs)
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/%d", name, seed), func(t *testing.T) {
				shuffled := perturb(inputs, rand.New(rand.NewPCG(seed, seed)))
				if got := editorView(t, shuffled); !slices.Equal(got, want) {
					t.Errorf("the editor saw\n\t%s\nwant (the recorded order)\n\t%s\ninputs:\n\t%s",
						strings.Join(got, "\n\t"), strings.Join(want, "\n\t"), strings.Join(shuffled, "\n\t"))
				}
			})
		}
	}
}

// editorView feeds inputs to a fresh translator and returns what it sent
// the editor, in order, and its errors.
func editorView(t *testing.T, inputs []string) []string {
	t.Helper()
	dr, err := translatetest.NewDriver(Dialect, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range inputs {
		outs, err := dr.Feed(l)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		for _, o := range outs {
			if o.Marker == translatetest.ToEditor || o.Marker == translatetest.GotError {
				out = append(out, o.Marker+" "+o.Text)
			}
		}
	}
	if p := dr.Problems(); len(p) > 0 {
		t.Errorf("invariants: %q", p)
	}
	return out
}

// perturb moves each turn/start answer to a random point before its turn's
// turn/completed and inserts noise frames at random points after the
// handshake.
func perturb(inputs []string, r *rand.Rand) []string {
	out := slices.Clone(inputs)
	for i := 0; i < len(out); i++ {
		f := gjson.Parse(strings.TrimPrefix(out[i], "agent> "))
		turnID := f.Get("result.turn.id").Str
		if !strings.HasPrefix(out[i], "agent> ") || turnID == "" {
			continue
		}
		end := i + 1
		for ; end < len(out); end++ {
			g := gjson.Parse(strings.TrimPrefix(out[end], "agent> "))
			if g.Get("method").Str == "turn/completed" && g.Get("params.turn.id").Str == turnID {
				break
			}
		}
		if end == len(out) {
			continue // a turn the transcript leaves running
		}
		to := i + r.IntN(end-i) // a point in [i, end): still before turn/completed
		line := out[i]
		out = slices.Delete(out, i, i+1)
		out = slices.Insert(out, to, line)
		if to > i {
			i-- // the line now at i has not been looked at
		}
	}
	thread := ""
	for _, l := range out {
		if id := gjson.Parse(strings.TrimPrefix(l, "agent> ")).Get("result.thread.id").Str; id != "" {
			thread = id
			break
		}
	}
	noise := []string{
		`agent> {"method":"configWarning","params":{"summary":"no bubblewrap","details":null}}`,
		`agent> {"method":"remoteControl/status/changed","params":{"status":"disabled","serverName":"vm"}}`,
		`agent> {"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex"}}}`,
		`agent> {"method":"item/agentMessage/delta","params":{"threadId":"other-thread","turnId":"other-turn","itemId":"m","delta":"not yours"}}`,
		`agent> {"method":"thread/tokenUsage/updated","params":{"threadId":"other-thread","turnId":"other-turn","tokenUsage":{"total":{"totalTokens":9,"inputTokens":9,"cachedInputTokens":0,"outputTokens":0,"reasoningOutputTokens":0},"last":{"totalTokens":9,"inputTokens":9,"cachedInputTokens":0,"outputTokens":0,"reasoningOutputTokens":0}}}}`,
		`agent> {"method":"thread/status/changed","params":{"threadId":"` + thread + `","status":{"type":"active","activeFlags":[]}}}`,
		`agent> {"method":"thread/readState/changed","params":{"threadId":"` + thread + `","readState":{}}}`,
	}
	// After the handshake's three answers, so that initialize is answered
	// the same way.
	start := 0
	for i, l := range out {
		if gjson.Parse(strings.TrimPrefix(l, "agent> ")).Get("id").Int() == 3 {
			start = i + 1
			break
		}
	}
	for range 1 + r.IntN(6) {
		at := start + r.IntN(len(out)-start+1)
		out = slices.Insert(out, at, noise[r.IntN(len(noise))])
	}
	return out
}
