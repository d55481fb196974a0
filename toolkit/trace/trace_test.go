package trace

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/tap"
)

// fakeClock advances by one millisecond per reading.
func fakeClock() func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

func TestWriterRecordsBothHopsAndNotes(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, Options{Now: fakeClock()})
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s-1"}}`)
	w.Tap(tap.Event{Hop: tap.EditorHop, Inbound: true, Message: msg})
	msg[0] = 'X' // borrowed bytes: the writer must have copied them
	w.Tap(tap.Event{Hop: tap.AgentHop, Link: 1, Session: "s-1", Message: []byte(`{"jsonrpc":"2.0","method":"session/update","params":{}}`)})
	w.Tap(tap.Event{Hop: tap.AgentHop, Inbound: true, Link: 1, Message: []byte(`{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"x"}}`)})
	w.Tap(tap.Event{Hop: tap.AgentHop, Inbound: true, Link: 1, Message: []byte(`not json`)})
	w.Tap(tap.Event{Hop: tap.BridgeHop, Note: "cancel-grace", Detail: "ended by the bridge"})
	w.Tap(tap.Event{Hop: tap.EditorHop, Message: []byte(`{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}`)})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.Tap(tap.Event{Hop: tap.EditorHop, Message: []byte(`{}`)}) // after Close: ignored
	recs, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	type want struct{ hop, dir, kind, method, id, session string }
	wants := []want{
		{"editor", "in", "request", "session/prompt", "7", "s-1"},
		{"agent", "out", "notification", "session/update", "", "s-1"},
		{"agent", "in", "error", "", `"a"`, ""},
		{"agent", "in", "frame", "", "", ""},
		{"bridge", "", "note", "", "", ""},
		{"editor", "out", "response", "", "7", ""},
	}
	if len(recs) != len(wants) {
		t.Fatalf("read %d records, want %d:\n%s", len(recs), len(wants), buf.String())
	}
	for i, w := range wants {
		r := recs[i]
		got := want{r.Hop, r.Dir, r.Kind, r.Method, string(r.ID), r.Session}
		if got != w {
			t.Errorf("record %d = %+v, want %+v", i, got, w)
		}
		if i > 0 && r.TNs <= recs[i-1].TNs {
			t.Errorf("record %d t_ns %d not after %d", i, r.TNs, recs[i-1].TNs)
		}
		if _, err := time.Parse(time.RFC3339Nano, r.Time); err != nil {
			t.Errorf("record %d time: %v", i, err)
		}
	}
	if !strings.HasPrefix(string(recs[0].Msg), `{"jsonrpc"`) {
		t.Errorf("first message not copied: %s", recs[0].Msg)
	}
	if recs[3].Raw != "not json" || recs[3].Msg != nil {
		t.Errorf("invalid JSON kept as %q / %s, want raw", recs[3].Raw, recs[3].Msg)
	}
	if recs[4].Note != "cancel-grace" || recs[4].Detail != "ended by the bridge" {
		t.Errorf("note = %+v", recs[4])
	}
}

func TestWriterCap(t *testing.T) {
	var buf bytes.Buffer
	const max = 2000
	w := NewWriter(&buf, Options{Max: max, Now: fakeClock()})
	for i := 0; i < 100; i++ {
		w.Tap(tap.Event{Hop: tap.EditorHop, Inbound: true, Message: []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"n":1}}`)})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > max {
		t.Errorf("trace is %d bytes, cap %d", buf.Len(), max)
	}
	recs, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 2 || len(recs) > 50 {
		t.Fatalf("%d records", len(recs))
	}
	last := recs[len(recs)-1]
	if last.Kind != KindNote || last.Note != NoteTruncated {
		t.Errorf("last record %+v, want the truncation note", last)
	}
	for _, r := range recs[:len(recs)-1] {
		if r.Kind == KindNote {
			t.Errorf("note before the end: %+v", r)
		}
	}
}

func TestWriterScrubs(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, Options{Scrub: func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("hunter2"), []byte("<redacted>")) }})
	w.Tap(tap.Event{Hop: tap.AgentHop, Message: []byte(`{"jsonrpc":"2.0","method":"x","params":{"token":"hunter2"}}`)})
	w.Tap(tap.Event{Hop: tap.BridgeHop, Note: "n", Detail: "saw hunter2"})
	w.Close()
	if strings.Contains(buf.String(), "hunter2") {
		t.Errorf("secret in trace:\n%s", buf.String())
	}
	recs, err := Read(&buf)
	if err != nil || len(recs) != 2 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
}

func TestReadTornLastLine(t *testing.T) {
	in := `{"t_ns":1,"hop":"editor","kind":"request"}` + "\n" + `{"t_ns":2,"hop":"ed`
	recs, err := Read(strings.NewReader(in))
	if err != nil || len(recs) != 1 {
		t.Fatalf("got %d records, %v; want 1 and the torn line dropped", len(recs), err)
	}
	// A torn record a later process appended after (--trace-append).
	recs, err = Read(strings.NewReader(`{"t_ns":2,"hop":"ed` + "\n" + `{"t_ns":1}` + "\n"))
	if err != nil || len(recs) != 1 {
		t.Errorf("a torn line in the middle: %d records, %v; want it dropped", len(recs), err)
	}
	_, err = Read(strings.NewReader(`{"t_ns":1}` + "\n" + `{"t_ns":2,"hop":}` + "\n" + `{"t_ns":3}` + "\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad line in the middle: err = %v, want one naming line 2", err)
	}
}

func FuzzReadTrace(f *testing.F) {
	f.Add([]byte(`{"t_ns":1,"hop":"editor","dir":"in","kind":"request","id":1,"msg":{"jsonrpc":"2.0","id":1,"method":"initialize"}}` + "\n"))
	f.Add([]byte(`{"t_ns":1,"hop":"agent","raw":"x"}` + "\n" + `{"t_ns"`))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte(`{"msg":[[[[[[[[[]]]]]]]]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		// What was read writes back and reads again the same.
		var buf bytes.Buffer
		for _, r := range recs {
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("re-marshal %+v: %v", r, err)
			}
			buf.Write(append(b, '\n'))
		}
		again, err := Read(&buf)
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-read: %d records, %v; want %d", len(again), err, len(recs))
		}
	})
}

// Messages are kept byte for byte (no escaping of <, > and &, numbers as
// written); a frame spanning lines is compacted to keep one record a line;
// text that is not JSON survives as a JSON string.
func TestWriterKeepsBytes(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, Options{})
	exact := `{"jsonrpc":"2.0","method":"x","params":{"html":"<b>&amp;</b>","n":1.50,"big":12345678901234567890}}`
	w.Tap(tap.Event{Hop: tap.EditorHop, Message: []byte(exact)})
	w.Tap(tap.Event{Hop: tap.AgentHop, Inbound: true, Message: []byte("{\n  \"type\": \"chunk\",\n  \"text\": \"a\\nb\"\n}")})
	raw := "bin\x00\x1f\"\\\xff\u2028 <tag>"
	w.Tap(tap.Event{Hop: tap.AgentHop, Inbound: true, Message: []byte(raw)})
	w.Close()
	if n := strings.Count(buf.String(), "\n"); n != 3 {
		t.Fatalf("%d lines, want 3:\n%s", n, buf.String())
	}
	recs, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	if string(recs[0].Msg) != exact {
		t.Errorf("message changed:\n got %s\nwant %s", recs[0].Msg, exact)
	}
	if string(recs[1].Msg) != `{"type":"chunk","text":"a\nb"}` || recs[1].Kind != KindFrame || recs[1].Method != "chunk" {
		t.Errorf("multi-line frame = %+v", recs[1])
	}
	if want := strings.ToValidUTF8(raw, "\uFFFD"); recs[2].Raw != want {
		t.Errorf("raw = %q, want %q", recs[2].Raw, want)
	}
}

// A message nested as deep as encoding/json accepts (and so recorded as
// JSON) sits one level deeper in its record: the trace still reads.
func TestReadDeepestMessage(t *testing.T) {
	const depth = 10000
	msg := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	var r Record
	Classify(&r, []byte(msg))
	if len(r.Msg) == 0 {
		t.Fatalf("a %d-deep message is not recorded as JSON", depth)
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, Options{})
	w.Tap(tap.Event{Hop: tap.AgentHop, Message: []byte(msg)})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := Read(&buf)
	if err != nil || len(recs) != 1 || string(recs[0].Msg) != msg {
		t.Fatalf("read %d records, %v", len(recs), err)
	}
}
