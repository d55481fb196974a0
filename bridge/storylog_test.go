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
