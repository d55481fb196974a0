package store

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func chunk(kind, text string) []byte {
	q, _ := json.Marshal(text)
	return []byte(`{"sessionUpdate":"` + kind + `","content":{"type":"text","text":` + string(q) + `}}`)
}

// TestStore_LinesJoinTextChunks: a run of text chunks of one of the
// protocol's chunk kinds becomes one record holding their text; anything
// between them, another kind, another session or a hand-over ends the
// run; updates of a kind the store does not know stay one by one.
func TestStore_LinesJoinTextChunks(t *testing.T) {
	s := open(t, Options{})
	create(t, s, "s1", Meta{})
	create(t, s, "s2", Meta{})
	l := s.Lines()
	const a, th = "agent_message_chunk", "agent_thought_chunk"
	l.TextChunk("s1", chunk(a, "Hel"), a)
	l.TextChunk("s1", chunk(a, `lo "q" \ é`), a)
	l.TextChunk("s1", chunk(a, "\n"), a)
	l.TextChunk("s1", chunk(th, "hmm"), th)
	l.TextChunk("s1", chunk(th, "…"), th)
	l.SessionUpdate("s1", []byte(`{"sessionUpdate":"plan","entries":[]}`))
	l.TextChunk("s1", chunk(a, "x"), a)
	l.TextChunk("s1", chunk("future_kind", "f1"), "future_kind")
	l.TextChunk("s1", chunk("future_kind", "f2"), "future_kind")
	l.Flush()
	l.TextChunk("s1", chunk(a, "y"), a)
	l.TextChunk("s2", chunk(a, "other"), a)
	l.TextChunk("s1", chunk(a, "z"), a)
	l.Flush()
	tr, err := load(t, s, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`update {"sessionId":"s1","update":` + string(chunk(a, "Hello \"q\" \\ é\n")) + `}`,
		`update {"sessionId":"s1","update":` + string(chunk(th, "hmm…")) + `}`,
		`update {"sessionId":"s1","update":{"sessionUpdate":"plan","entries":[]}}`,
		`update {"sessionId":"s1","update":` + string(chunk(a, "x")) + `}`,
		`update {"sessionId":"s1","update":` + string(chunk("future_kind", "f1")) + `}`,
		`update {"sessionId":"s1","update":` + string(chunk("future_kind", "f2")) + `}`,
		`update {"sessionId":"s1","update":` + string(chunk(a, "y")) + `}`,
		`update {"sessionId":"s1","update":` + string(chunk(a, "z")) + `}`,
	}
	if got := bodies(tr); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("s1 records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// FuzzLinesJoinTextChunks drives a Lines with a random sequence of text
// chunks (two sessions, three kinds, texts with escapes, some large enough
// to hand a run over or to go to the store on their own), other updates
// and flushes, and checks that each session's transcript reads back as
// valid updates showing exactly the text sent, kind by kind, in order.
func FuzzLinesJoinTextChunks(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3, 0, 4, 5, 6})
	f.Add([]byte{0x10, 0x20, 0x31, 0x42, 0x53, 0x64, 0x75, 0x86, 0x97, 0xa8, 0xb9, 0xca})
	f.Add([]byte{7, 7, 7, 7, 0, 0, 0x80, 0x80, 0x47, 0x47})
	// The last two kinds reach TextChunk in one buffer the caller reuses,
	// as a frame's kind can: what Lines keeps of them must be its own.
	kinds := []string{"agent_message_chunk", "agent_thought_chunk", "user_message_chunk", "custom_x", "custom_y"}
	reused := make([]byte, len("custom_x"))
	texts := []string{"", "a", `"`, `\`, "é", "\u2028", "\x01", "😀", "line\n", strings.Repeat("w", 700), strings.Repeat("L", 20000)}
	f.Fuzz(func(t *testing.T, ops []byte) {
		s := open(t, Options{MaxInline: 1000})
		sids := []string{"s1", "s2"}
		for _, sid := range sids {
			create(t, s, sid, Meta{})
		}
		l := s.Lines()
		type piece struct{ kind, text string }
		sent := map[string][]piece{}
		for _, op := range ops {
			sid := sids[op>>7]
			switch v := int(op & 0x7f); {
			case v < 100:
				kind, text := kinds[v%len(kinds)], texts[(v/len(kinds))%len(texts)]
				arg := kind
				if strings.HasPrefix(kind, "custom_") {
					copy(reused, kind)
					arg = unsafe.String(&reused[0], len(reused))
				}
				l.TextChunk(sid, chunk(kind, text), arg)
				sent[sid] = append(sent[sid], piece{kind, text})
			case v < 115:
				l.SessionUpdate(sid, []byte(`{"sessionUpdate":"plan","entries":[]}`))
				sent[sid] = append(sent[sid], piece{"plan", ""})
			default:
				l.Flush()
			}
		}
		l.Flush()
		// Joined runs of the protocol's chunk kinds: what a reader sees,
		// whatever the records' count. Updates of other kinds are kept
		// one by one, as they came.
		join := func(ps []piece) []piece {
			var out []piece
			for _, p := range ps {
				if n := len(out); n > 0 && strings.HasSuffix(p.kind, "_chunk") && out[n-1].kind == p.kind {
					out[n-1].text += p.text
					continue
				}
				out = append(out, p)
			}
			return out
		}
		for _, sid := range sids {
			tr, err := load(t, s, sid)
			if err != nil {
				t.Fatal(err)
			}
			var got []piece
			for _, r := range tr.Records {
				var u struct {
					SessionID string `json:"sessionId"`
					Update    struct {
						Kind    string `json:"sessionUpdate"`
						Content struct{ Type, Text string }
					} `json:"update"`
				}
				if err := json.Unmarshal(r.Body, &u); err != nil || u.SessionID != sid || r.Kind != KindUpdate {
					t.Fatalf("%s: record %s %s: %v", sid, r.Kind, r.Body, err)
				}
				got = append(got, piece{u.Update.Kind, u.Update.Content.Text})
			}
			if g, w := fmt.Sprintf("%q", join(got)), fmt.Sprintf("%q", join(sent[sid])); g != w {
				t.Fatalf("%s reads back as\n%s\nwant\n%s", sid, g, w)
			}
		}
	})
}

// slowSyncFS is the OS's file system with every fsync taking a while, as
// on a disk busy writing back what a stream wrote.
type slowSyncFS struct {
	osFS
	delay time.Duration
}

func (x slowSyncFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := x.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return slowSyncFile{f.(*os.File), x.delay}, nil
}

type slowSyncFile struct {
	*os.File
	delay time.Duration
}

func (f slowSyncFile) Sync() error {
	time.Sleep(f.delay)
	return f.File.Sync()
}

// TestStore_WrittenFindsTheTitleListedAlready: the first prompt's title
// reaches the sidecar (where other windows list the session) while the
// turn runs, and so by the turn's end barrier, Written, which then waits
// for no fsync (each takes a while here).
func TestStore_WrittenFindsTheTitleListedAlready(t *testing.T) {
	const slow = 250 * time.Millisecond
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir, FS: slowSyncFS{delay: slow}})
	create(t, s, "s1", Meta{})
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("Plan the release\nin detail")})
	// The turn streams until the title is listed: it is asked for when the
	// prompt is written, not at the turn's end.
	sidecarTitle := func() string {
		var m Meta
		b, _ := os.ReadFile(filepath.Join(dir, "s1.json"))
		json.Unmarshal(b, &m)
		return m.Title
	}
	l := s.Lines()
	for deadline := time.Now().Add(20 * slow); sidecarTitle() == ""; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the title is not in the sidecar %v into the turn: it waits for the turn's end", 20*slow)
		}
		l.TextChunk("s1", chunk("agent_message_chunk", "words "), "agent_message_chunk")
	}
	l.Flush()
	s.Append("s1", Record{Kind: KindStop, Body: json.RawMessage(`{"stopReason":"end_turn"}`)})
	start := time.Now()
	done := make(chan string, 1)
	s.Written(func() { done <- sidecarTitle() })
	if title := <-done; title != "Plan the release" {
		t.Fatalf("sidecar at the barrier: title %q, want the first prompt's first line", title)
	}
	if waited := time.Since(start); waited >= slow/2 {
		t.Fatalf("the turn's end barrier took %v: it waited for an fsync (each takes %v)", waited, slow)
	}
}
