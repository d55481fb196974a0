package bridge

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// StoryLog on synthetic hook events with a fake clock: the turn line has
// the stop reason, the turn's duration, its updates and their bytes; the
// answer's DEBUG line has the latency since its request on the same hop.
func TestStoryLog_Synthetic(t *testing.T) {
	var out strings.Builder
	now := time.Unix(0, 0)
	s := &StoryLog{
		Logger: hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Debug, DisableTime: true}),
		Now:    func() time.Time { return now },
	}
	b := &Bridge{}
	var earlier int
	b.OnSession = func(SessionEvent) { earlier++ } // chained, not replaced
	s.Attach(b)

	b.OnSession(SessionEvent{Kind: SessionOpened, Session: "s1", Cwd: "/w"})
	b.Tap(TapEvent{Hop: EditorHop, Inbound: true, Message: []byte(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"prompt":"secret"}}`)})
	b.OnSession(SessionEvent{Kind: SessionPrompt, Session: "s1", Body: []byte(`{"prompt":"secret"}`)})
	now = now.Add(time.Second)
	b.OnSession(SessionEvent{Kind: SessionUpdate, Session: "s1", Body: []byte(`0123456789`)})
	b.OnSession(SessionEvent{Kind: SessionUpdate, Session: "s1", Body: []byte(`01234`)})
	now = now.Add(time.Second)
	b.Tap(TapEvent{Hop: EditorHop, Message: []byte(`{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}`)})
	b.OnSession(SessionEvent{Kind: SessionTurnEnded, Session: "s1", Body: []byte(`{"stopReason":"end_turn"}`)})
	s.End("editor closed stdin")

	got := out.String()
	for _, want := range []string{
		"[INFO]  session opened: session=s1 cwd=/w",
		"[INFO]  turn started: session=s1\n",
		"[INFO]  turn ended: session=s1 stop_reason=end_turn duration=2s updates=2 bytes=15",
		"[DEBUG] message: hop=editor dir=received kind=request method=session/prompt id=7 size=",
		"[DEBUG] message: hop=editor dir=sent kind=result id=7 method=session/prompt latency=2s size=",
		`[INFO]  session ended: session=s1 turns=1 duration=2s reason="editor closed stdin"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "secret") {
		t.Errorf("log carries a body:\n%s", got)
	}
	if earlier != 5 {
		t.Errorf("the hook set before Attach ran %d times, want 5", earlier)
	}
}

// Updates of two sessions interleaved, one of them closed and opened again
// under the same id mid-stream: each turn line counts its own session's
// updates, whatever the one-entry cache of the last session held.
func TestStoryLog_CountsEachSessionsUpdates(t *testing.T) {
	var out strings.Builder
	s := &StoryLog{
		Logger: hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info, DisableTime: true}),
		Now:    func() time.Time { return time.Unix(0, 0) },
	}
	b := &Bridge{}
	s.Attach(b)
	ev := func(k SessionEventKind, sid, body string) { b.OnSession(SessionEvent{Kind: k, Session: sid, Body: []byte(body)}) }
	ev(SessionOpened, "a", "")
	ev(SessionOpened, "b", "")
	ev(SessionPrompt, "a", "")
	ev(SessionPrompt, "b", "")
	for range 3 {
		ev(SessionUpdate, "a", "xx")
		ev(SessionUpdate, "b", "y")
		ev(SessionUpdate, "b", "y")
	}
	ev(SessionTurnEnded, "a", `{"stopReason":"end_turn"}`)
	ev(SessionUpdate, "b", "y")
	ev(SessionClosed, "b", "")
	ev(SessionUpdate, "b", "lost") // after close: counted nowhere
	ev(SessionOpened, "b", "")
	ev(SessionPrompt, "b", "")
	ev(SessionUpdate, "b", "zzz")
	ev(SessionTurnEnded, "b", `{"stopReason":"end_turn"}`)
	got := out.String()
	for _, want := range []string{
		"turn ended: session=a stop_reason=end_turn duration=0s updates=3 bytes=6",
		"turn ended: session=b stop_reason=end_turn duration=0s updates=1 bytes=3",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}
