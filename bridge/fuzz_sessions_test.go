package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
)

// seededSessions are the transcripts FuzzServeSessions' state directory
// holds before every input: "sess-1" is also the id the fuzz agent hands
// out first and "sess-2" its second, as an agent restarted after them does.
var seededSessions = []string{"sess-1", "sess-2", "with/slash"}

// FuzzServeSessions is FuzzServe with durable sessions on: the engine runs
// on a session store whose directory already holds transcripts, behind an
// agent that numbers its sessions "sess-1", "sess-2"… per connection and
// answers a prompt on a session it never opened -32002, as real agents do.
// Besides FuzzServe's promises (one JSON-RPC message per line, every
// request answered exactly once, nothing else answered) it checks the
// store's: session/new never answers an id the state directory already
// holds or handed out before, and nothing the editor merely named (a
// prompt, load, resume, close or delete of an id no one opened) shows in
// session/list afterwards.
func FuzzServeSessions(f *testing.F) {
	line := func(id int, method, params string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
	}
	init := line(0, "initialize", `{"protocolVersion":1}`)
	newS := func(id int) string { return line(id, "session/new", `{"cwd":"/w","mcpServers":[]}`) }
	prompt := func(id int, sid string) string {
		return line(id, "session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"hi %d"}]}`, sid, id))
	}
	open := func(id int, method, sid string) string {
		return line(id, method, fmt.Sprintf(`{"sessionId":%q,"cwd":"/w","mcpServers":[]}`, sid))
	}
	named := func(id int, method, sid string) string {
		return line(id, method, fmt.Sprintf(`{"sessionId":%q}`, sid))
	}
	list := func(id int) string { return line(id, "session/list", `{}`) }
	// Groups of lines are separated by a blank line: the lines of a group
	// reach the bridge together (pipelined), a group only once the
	// requests before it were answered (see pacedReader).
	seq := func(groups ...string) string { return strings.Join(groups, "\n") }
	for _, s := range []string{
		// Issue 25, 1 and 2: a prompt on an id never opened, then load
		// and resume of it, then the list.
		seq(init, newS(1), prompt(2, "sess-1"), prompt(3, "ghost"), open(4, "session/load", "ghost"), open(5, "session/resume", "ghost"), list(6)),
		// 3: a recorded session loaded, then new ones: ids collide.
		seq(init, open(1, "session/load", "sess-2"), newS(2), newS(3), prompt(4, "sess-2"), list(5)),
		// A prompt pipelined behind a load, close then load again.
		seq(init, open(1, "session/load", "sess-1")+prompt(2, "sess-1"), named(3, "session/close", "sess-1"), open(4, "session/load", "sess-1"), prompt(5, "sess-1")),
		// Delete right behind a prompt; delete and close of unknown ids.
		seq(init, newS(1), prompt(2, "sess-1")+named(3, "session/delete", "sess-1"), named(4, "session/delete", "nobody"),
			named(5, "session/close", "../escape"), list(6), open(7, "session/load", "sess-1")),
		// Requests before initialize, resume of a seeded id, cursors.
		seq(open(1, "session/resume", "with/slash"), init, open(2, "session/resume", "with/slash"), prompt(3, "with/slash"),
			line(4, "session/list", `{"cursor":"bogus"}`), line(5, "session/list", `{"cwd":"/w"}`)),
		// Cancels of known and unknown sessions.
		seq(init, newS(1), prompt(2, "sess-1")+`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}`+"\n"+
			`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"ghost"}}`+"\n", prompt(3, "sess-1")),
		// Everything at once, as FuzzServe sends it.
		init + newS(1) + prompt(2, "sess-1") + open(3, "session/load", "sess-2") + prompt(4, "sess-2") + named(5, "session/delete", "with/slash") + list(6),
	} {
		f.Add([]byte(s))
	}
	template := f.TempDir()
	seedTranscripts(f, template)
	f.Fuzz(func(t *testing.T, input []byte) {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(template)); err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(store.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		var out syncBuffer
		defer func() {
			if t.Failed() {
				t.Logf("input:\n%s\noutput:\n%s", input, out.String())
			}
		}()
		newTr, _ := acp.Dialect.Configure(nil)
		var wg sync.WaitGroup
		b := &bridge.Bridge{
			Dialect:       acp.Dialect,
			NewTranslator: newTr,
			CancelGrace:   time.Millisecond,
			Sessions:      &bridge.Durable{Store: st},
			Dial: func(ctx context.Context, s bridge.Spawn) (bridge.Link, error) {
				l := newMemLink()
				wg.Add(1)
				go func() { defer wg.Done(); sessionAgent(l) }()
				return l, nil
			},
		}
		if err := b.Serve(context.Background(), newPacedReader(input, &out), &out); err != nil {
			t.Fatalf("Serve: %v", err)
		}
		wg.Wait()
		st.Close()

		checkAnswers(t, input, out.Bytes())
		if t.Failed() {
			return
		}

		// Ids handed out: never one already on disk, never twice.
		handed := slices.Clone(seededSessions)
		sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			env, perr := translate.ParseEnvelope(sc.Bytes())
			if perr != nil || !env.IsResponse() {
				continue
			}
			var res struct {
				SessionID string `json:"sessionId"`
			}
			if json.Unmarshal(env.Result, &res) != nil || res.SessionID == "" || !isNewAnswer(input, env.ID) {
				continue
			}
			if slices.Contains(handed, res.SessionID) {
				t.Errorf("session/new answered %q, an id the state directory already held or this bridge handed out", res.SessionID)
			}
			handed = append(handed, res.SessionID)
		}
		// Nothing but those is listed, and the seeded sessions not
		// deleted still are.
		ids := listed(t, dir)
		for _, sid := range ids {
			if !slices.Contains(handed, sid) {
				t.Errorf("session/list shows %q, which neither the state directory held nor session/new created (an id the editor only named, or a renamed one)", sid)
			}
		}
		for _, sid := range seededSessions {
			if !slices.Contains(ids, sid) && !names(input, "session/delete", sid) {
				t.Errorf("recorded session %q, never deleted, is no longer listed (listed: %q)", sid, ids)
			}
		}
	})
}

// seedTranscripts records seededSessions in dir, each with a turn.
func seedTranscripts(tb testing.TB, dir string) {
	st, err := store.Open(store.Options{Dir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	for i, sid := range seededSessions {
		if err := st.Create(sid, store.Meta{Cwd: "/w"}); err != nil {
			tb.Fatal(err)
		}
		st.Append(sid, store.Record{Kind: store.KindPrompt, Body: json.RawMessage(fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"seeded turn %d"}]}`, sid, i))})
		st.Append(sid, store.Record{Kind: store.KindUpdate, Body: json.RawMessage(fmt.Sprintf(`{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"seeded answer %d"}}}`, sid, i))})
		st.Append(sid, store.Record{Kind: store.KindStop, Body: json.RawMessage(`{"stopReason":"end_turn"}`), Sync: true})
	}
	if err := st.Close(); err != nil {
		tb.Fatal(err)
	}
	if got := listed(tb, dir); len(got) != len(seededSessions) {
		tb.Fatalf("seeded %q, the store lists %q", seededSessions, got)
	}
}

// listed returns the ids a store opened on dir lists.
func listed(tb testing.TB, dir string) []string {
	st, err := store.Open(store.Options{Dir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	done := make(chan []string, 1)
	st.List("", "", "", 1<<20, func(ms []store.Meta, _ string, err error) {
		if err != nil {
			tb.Errorf("listing %s: %v", dir, err)
		}
		var ids []string
		for _, m := range ms {
			ids = append(ids, m.SessionID)
		}
		done <- ids
	})
	return <-done
}

// names reports whether input holds a method request naming session sid.
func names(input []byte, method, sid string) bool {
	for _, line := range strings.Split(string(input), "\n") {
		env, err := translate.ParseEnvelope([]byte(strings.TrimSuffix(line, "\r")))
		if err != nil || !env.IsRequest() || env.Method != method {
			continue
		}
		var p struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(env.Params, &p) == nil && p.SessionID == sid {
			return true
		}
	}
	return false
}

// pacedReader hands the engine its input a group of lines at a time, the
// groups separated by a blank line: a group only once every request before
// it was answered (or half a second passed), so that inputs reach states
// behind the store's asynchronous reads instead of the shutdown that EOF
// starts.
type pacedReader struct {
	groups [][]byte
	cur    []byte
	out    *syncBuffer
	asked  int
}

func newPacedReader(input []byte, out *syncBuffer) *pacedReader {
	return &pacedReader{groups: bytes.SplitAfter(input, []byte("\n\n")), out: out}
}

func (r *pacedReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if len(r.groups) == 0 {
			return 0, io.EOF
		}
		for deadline := time.Now().Add(500 * time.Millisecond); r.out.answers() < r.asked && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		r.cur, r.groups = r.groups[0], r.groups[1:]
		for _, line := range bytes.Split(r.cur, []byte("\n")) {
			if env, err := translate.ParseEnvelope(line); err == nil && env.IsRequest() {
				r.asked++
			}
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// syncBuffer is the engine's output, read while it is written.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func (b *syncBuffer) String() string { return string(b.Bytes()) }

// answers counts the responses written so far.
func (b *syncBuffer) answers() int {
	n := 0
	for _, line := range bytes.Split(b.Bytes(), []byte("\n")) {
		if env, err := translate.ParseEnvelope(line); err == nil && env.IsResponse() {
			n++
		}
	}
	return n
}

// isNewAnswer reports whether the request with raw id id in input was a
// session/new (ids may repeat; any will do).
func isNewAnswer(input []byte, id json.RawMessage) bool {
	for _, line := range strings.Split(string(input), "\n") {
		env, err := translate.ParseEnvelope([]byte(strings.TrimSuffix(line, "\r")))
		if err == nil && env.IsRequest() && env.Method == "session/new" && bytes.Equal(env.ID, id) {
			return true
		}
	}
	return false
}

// checkAnswers is FuzzServe's check: every output line is one JSON-RPC 2.0
// message and every request in input is answered exactly once.
func checkAnswers(t *testing.T, input, out []byte) {
	t.Helper()
	want := map[string]int{}
	for _, line := range strings.Split(string(input), "\n") {
		raw := []byte(strings.TrimSuffix(line, "\r"))
		env, err := translate.ParseEnvelope(raw)
		if err != nil && strings.Contains(err.Reason, "UTF-8") {
			if fixed, ferr := translate.ParseEnvelope(bytes.ToValidUTF8(raw, []byte("\uFFFD"))); ferr == nil &&
				fixed.IsRequest() && !bytes.Contains(fixed.ID, []byte("\uFFFD")) {
				want[string(fixed.ID)]++
			}
			continue
		}
		switch {
		case err == nil && env.Version == "2.0" && env.IsRequest():
			want[string(env.ID)]++
		case err == nil && env.Version != "2.0" && env.ID != nil,
			err != nil && err.Code == translate.CodeInvalidRequest && env.ID != nil:
			want[string(env.ID)]++
		}
	}
	got := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !json.Valid(line) {
			t.Fatalf("invalid JSON on stdout: %q", line)
		}
		env, err := translate.ParseEnvelope(line)
		if err != nil || env.Version != "2.0" {
			t.Fatalf("not a JSON-RPC message on stdout: %q (%v)", line, err)
		}
		if env.IsResponse() && string(env.ID) != "null" {
			got[string(env.ID)]++
		}
	}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("id %s: %d requests, %d answers", id, n, got[id])
		}
	}
	for id, n := range got {
		if want[id] == 0 {
			t.Errorf("answer for id %s that no request carried (%d)", id, n)
		}
	}
}

// sessionAgent plays an ACP agent on one connection: session/new numbers
// sessions per connection, a prompt on one of them streams a chunk and
// ends its turn, a prompt on any other id is answered -32002, load and
// resume are not implemented, anything else succeeds.
func sessionAgent(l *memLink) {
	known := map[string]bool{}
	n := 0
	send := func(frame []byte) bool {
		select {
		case l.fromAgent <- frame:
			return true
		case <-l.closed:
			return false
		}
	}
	for {
		var f []byte
		select {
		case f = <-l.toAgent:
		case <-l.closed:
			return
		}
		env, err := translate.ParseEnvelope(f)
		if err != nil || !env.IsRequest() {
			continue
		}
		var p struct {
			SessionID string `json:"sessionId"`
		}
		_ = json.Unmarshal(env.Params, &p)
		var reply []byte
		switch env.Method {
		case "initialize":
			reply = translate.ResultFrame(env.ID, json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{}}`))
		case "session/new":
			n++
			sid := fmt.Sprintf("sess-%d", n)
			known[sid] = true
			reply = translate.ResultFrame(env.ID, json.RawMessage(fmt.Sprintf(`{"sessionId":%q}`, sid)))
		case "session/prompt":
			if !known[p.SessionID] {
				reply = translate.ErrorFrame(env.ID, translate.Errorf(translate.CodeResourceNotFound, "no session %q", p.SessionID).JSON())
				break
			}
			upd := fmt.Sprintf(`{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"}}}`, p.SessionID)
			if !send(translate.NotificationFrame("session/update", json.RawMessage(upd))) {
				return
			}
			reply = translate.ResultFrame(env.ID, json.RawMessage(`{"stopReason":"end_turn"}`))
		case "session/load", "session/resume":
			reply = translate.ErrorFrame(env.ID, translate.Errorf(translate.CodeMethodNotFound, "Method not found: %s", env.Method).JSON())
		default:
			reply = translate.ResultFrame(env.ID, json.RawMessage(`{}`))
		}
		if !send(reply) {
			return
		}
	}
}
