package trace

import (
	"errors"
	"strings"
	"testing"
)

func rec(dir, msg string, tns int64) Record {
	r := Record{Hop: "agent", Dir: dir, Link: 1, TNs: tns}
	Classify(&r, []byte(msg))
	return r
}

// Answers carry the live request ids; the agent's own request keeps its
// id; a frame that does not match is a Mismatch that does not advance the
// recording; pauses are replayed.
func TestReplayRewritesIDsAndMatches(t *testing.T) {
	recs := []Record{
		rec("in", `{"jsonrpc":"2.0","method":"hello"}`, 0),
		rec("out", `{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s","prompt":"a","cwd":"/old"}}`, 10),
		rec("in", `{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{}}`, 15),
		rec("out", `{"jsonrpc":"2.0","id":0,"result":{"ok":true}}`, 20),
		rec("in", `{"jsonrpc":"2.0","id":5 ,"result":{"stopReason":"end_turn","n":1.50}}`, 1_000_020),
		{Hop: "bridge", Kind: KindNote, Note: "cancel-grace"},
	}
	rp := NewReplay(recs, 1)
	if len(rp.Opening) != 1 || rp.Remaining() != 2 {
		t.Fatalf("opening %d, remaining %d", len(rp.Opening), rp.Remaining())
	}
	_, err := rp.Handle([]byte(`{"jsonrpc":"2.0","id":"live-1","method":"session/prompt","params":{"sessionId":"s","prompt":"b"}}`))
	var m *Mismatch
	if !errors.As(err, &m) || m.Index != 1 || !strings.Contains(string(m.Expected), `"prompt":"a"`) {
		t.Fatalf("different params: err = %v", err)
	}
	out, err := rp.Handle([]byte(`{"jsonrpc":"2.0","id":"live-1","method":"session/prompt","params":{"cwd":"/new","sessionId":"s","prompt":"a"}}`))
	if err != nil || len(out) != 1 || string(out[0].Frame) != `{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{}}` || out[0].After != 5 {
		t.Fatalf("prompt: %q, %v", out, err)
	}
	out, err = rp.Handle([]byte(`{"jsonrpc":"2.0","id":0,"result":{"ok":true}}`))
	if err != nil || len(out) != 1 {
		t.Fatalf("permission answer: %q, %v", out, err)
	}
	if got, want := string(out[0].Frame), `{"jsonrpc":"2.0","id":"live-1" ,"result":{"stopReason":"end_turn","n":1.50}}`; got != want || out[0].After != 1_000_000 {
		t.Errorf("answer = %s after %v, want %s after 1ms", got, out[0].After, want)
	}
	if _, err := rp.Handle([]byte(`{"jsonrpc":"2.0","method":"x"}`)); !errors.As(err, &m) || m.Expected != nil {
		t.Errorf("past the end: %v", err)
	}
}

// The editor side learns the live agent's session ids and request ids and
// uses them in what it sends after; a changed value is named by its path.
func TestEditorReplayLearnsIDs(t *testing.T) {
	recs := []Record{
		rec("out", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/x"}}`, 0),
		rec("in", `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"rec-s"}}`, 1),
		rec("out", `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"rec-s"}}`, 2),
		rec("in", `{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"rec-s","n":1}}`, 3),
		rec("out", `{"jsonrpc":"2.0","id":7,"result":{"outcome":"ok"}}`, 4),
		rec("in", `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`, 5),
	}
	er := NewEditorReplay(recs, 1)
	step := func(wantSend bool) []byte {
		t.Helper()
		f, send, done := er.Next()
		if done || send != wantSend {
			t.Fatalf("step %d: send=%v done=%v", er.Position(), send, done)
		}
		return f
	}
	step(true)
	if d := er.Compare(step(false), []byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"live-s"}}`)); len(d) != 0 {
		t.Fatalf("session/new answer: %v", d)
	}
	if got := string(step(true)); got != `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"live-s"}}` {
		t.Errorf("prompt sent as %s", got)
	}
	d := er.Compare(step(false), []byte(`{"jsonrpc":"2.0","id":"p-9","method":"session/request_permission","params":{"sessionId":"live-s","n":2}}`))
	if len(d) != 1 || d[0] != "params.n: expected 1, got 2" {
		t.Errorf("permission request diffs = %q", d)
	}
	if got := string(step(true)); got != `{"jsonrpc":"2.0","id":"p-9","result":{"outcome":"ok"}}` {
		t.Errorf("permission answer sent as %s", got)
	}
	if d := er.Compare(step(false), []byte(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)); len(d) != 0 {
		t.Errorf("prompt answer: %v", d)
	}
	if _, _, done := er.Next(); !done {
		t.Error("not done after the last record")
	}
}

// A trace recorded when the bridge asked its agent for ACP 1 replays for a
// bridge that asks for 2 with v2's info: the version asked for and the
// editor's identity differ between runs on their own.
func TestReplayInitializeAcrossVersions(t *testing.T) {
	recs := []Record{
		rec("out", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"zed","version":"1"},"clientCapabilities":{"fs":{"readTextFile":true}}}}`, 0),
		rec("in", `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`, 10),
	}
	rp := NewReplay(recs, 1)
	out, err := rp.Handle([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"zed","version":"2"},"clientInfo":{"name":"zed","version":"2"},"clientCapabilities":{"fs":{"readTextFile":true}}}}`))
	if err != nil || len(out) != 1 || !strings.Contains(string(out[0].Frame), `"protocolVersion":1`) {
		t.Fatalf("initialize asking for 2: %q, %v; want the recorded answer", out, err)
	}
	rp = NewReplay(recs, 1)
	if _, err := rp.Handle([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2,"clientCapabilities":{}}}`)); err == nil {
		t.Error("an initialize with other capabilities matched")
	}
}
