package trace

import (
	"bytes"
	"encoding/json"
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

// What always varies between runs: a per-run nonce in the prompt is left
// out with Ignore, and paths under the recorded working directory match
// the same paths under the live one, in what the bridge sends and in the
// recorded replies sent back.
func TestReplayIgnoreAndCwd(t *testing.T) {
	recs := []Record{
		rec("out", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp/run-1","mcpServers":[]}}`, 0),
		rec("in", `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}`, 1),
		rec("out", `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"nonce 111: read /tmp/run-1/a.txt"},{"type":"resource_link","uri":"file:///tmp/run-1/b.txt","name":"b"}]}}`, 2),
		rec("in", `{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/tmp/run-1/a.txt"}}`, 3),
		rec("out", `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"see /tmp/run-10/x"}]}}`, 4),
	}
	live := []string{
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp/run-2","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"nonce 222: read /tmp/run-2/a.txt"},{"type":"resource_link","uri":"file:///tmp/run-2/b.txt","name":"b"}]}}`,
	}
	rp := NewReplay(recs, 1)
	if _, err := rp.Handle([]byte(live[0])); err != nil {
		t.Fatal(err)
	}
	if _, err := rp.Handle([]byte(live[1])); err == nil {
		t.Fatal("a different nonce matched without --ignore")
	}
	rp.Ignore = []string{"params.prompt.0.text"}
	out, err := rp.Handle([]byte(live[1]))
	if err != nil {
		t.Fatalf("with the nonce's text ignored and the cwd mapped: %v", err)
	}
	if len(out) != 1 || !strings.Contains(string(out[0].Frame), `"path":"/tmp/run-2/a.txt"`) {
		t.Fatalf("the recorded fs request was not moved to the live cwd: %q", out)
	}
	// Only whole path prefixes move: /tmp/run-10 is not under /tmp/run-1.
	rp.Ignore = nil
	if _, err := rp.Handle([]byte(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"see /tmp/run-20/x"}]}}`)); err == nil {
		t.Fatal("/tmp/run-10 was read as under /tmp/run-1")
	}
	if _, err := rp.Handle([]byte(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"see /tmp/run-10/x"}]}}`)); err != nil {
		t.Fatalf("an unrelated path: %v", err)
	}

	// * matches every element.
	rp = NewReplay(recs, 1)
	rp.Ignore = []string{"params.prompt.*.text", "params.prompt.*.uri"}
	rp.Handle([]byte(live[0]))
	if _, err := rp.Handle([]byte(strings.ReplaceAll(live[1], "/tmp/run-2", "/elsewhere"))); err != nil {
		t.Fatalf("params.prompt.*: %v", err)
	}
}

// FuzzMapCwds: rewriting working directories in a frame never panics,
// keeps valid JSON valid, and maps back to the input when the live
// directory does not occur in it.
func FuzzMapCwds(f *testing.F) {
	f.Add([]byte(`{"params":{"cwd":"/tmp/a","path":"/tmp/a/b","x":"/tmp/ab"}}`), "/tmp/a", "/var/x")
	f.Add([]byte(`"\u002ftmp\/a"`), "/tmp/a", "/t")
	f.Fuzz(func(t *testing.T, b []byte, from, to string) {
		// Working directories are absolute paths, and a "/" is only ever
		// inside a JSON string; the pairs are those newCwdPair makes.
		pair, ok := newCwdPair(from, to)
		if !ok {
			return
		}
		from, to = pair.rec, pair.live
		pairs := []cwdPair{pair}
		out := mapCwds(b, pairs, false)
		if json.Valid(b) && !json.Valid(out) {
			t.Fatalf("%q → %q: invalid JSON", b, out)
		}
		if !strings.Contains(string(b), to) && !strings.Contains(to, from) && !strings.Contains(from, to) {
			if back := mapCwds(out, pairs, true); !bytes.Equal(back, b) {
				t.Fatalf("%q → %q → %q", b, out, back)
			}
		}
		withoutPaths(b, []string{from, "*." + to})
	})
}

// A working directory given with a trailing slash ("/tmp/a/", as some
// editors send it) still moves the paths under it, and the directory
// itself; a path that merely runs on after it (/tmp/a/tmp/a) moves once.
func TestMapCwdsTrailingSlash(t *testing.T) {
	pair, ok := newCwdPair("/tmp/a/", "/x/")
	if !ok {
		t.Fatal("no pair for /tmp/a/ → /x/")
	}
	in := `{"cwd":"/tmp/a/","p":"/tmp/a/b.go","q":"/tmp/a","r":"/tmp/ab","s":"/tmp/a/tmp/a/c"}`
	want := `{"cwd":"/x/","p":"/x/b.go","q":"/x","r":"/tmp/ab","s":"/x/tmp/a/c"}`
	if got := mapCwds([]byte(in), []cwdPair{pair}, false); string(got) != want {
		t.Fatalf("mapped\n%s\nwant\n%s", got, want)
	}
	if back := mapCwds([]byte(want), []cwdPair{pair}, true); string(back) != in {
		t.Fatalf("mapped back\n%s\nwant\n%s", back, in)
	}
	for _, bad := range [][2]string{{"/", "/x"}, {"/tmp/a", "/tmp/a/"}, {"tmp/a", "/x"}} {
		if _, ok := newCwdPair(bad[0], bad[1]); ok {
			t.Errorf("newCwdPair(%q, %q) made a pair: there is nothing to map", bad[0], bad[1])
		}
	}
}
