package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/acp-bridge/acp-bridge/internal/clock"
	"github.com/tidwall/gjson"
)

func open(t *testing.T, o Options) *Store {
	t.Helper()
	if o.Dir == "" {
		o.Dir = filepath.Join(t.TempDir(), "state")
	}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func load(t *testing.T, s *Store, sid string) (*Transcript, error) {
	t.Helper()
	ch := make(chan struct {
		t   *Transcript
		err error
	}, 1)
	s.Load(sid, func(tr *Transcript, err error) {
		ch <- struct {
			t   *Transcript
			err error
		}{tr, err}
	})
	r := <-ch
	return r.t, r.err
}

func create(t *testing.T, s *Store, sid string, m Meta) {
	t.Helper()
	if err := s.Create(sid, m); err != nil {
		t.Fatal(err)
	}
}

func list(t *testing.T, s *Store, cwd, cursor string, limit int) ([]Meta, string) {
	t.Helper()
	type res struct {
		m    []Meta
		next string
		err  error
	}
	ch := make(chan res, 1)
	s.List(cwd, "", cursor, limit, func(m []Meta, next string, err error) { ch <- res{m, next, err} })
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.m, r.next
}

func prompt(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"sessionId": "x", "prompt": []any{map[string]any{"type": "text", "text": text}}})
	return b
}

func TestStore_RoundTripAndTitle(t *testing.T) {
	s := open(t, Options{})
	create(t, s, "s1", Meta{})
	s.Append("s1", Record{Kind: KindMeta, Agent: "a", Dialect: "acp", Cwd: "/w"})
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("fix the bug\nplease")})
	s.Append("s1", Record{Kind: KindUpdate, Body: json.RawMessage(`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"}}}`)})
	s.Append("s1", Record{Kind: KindStop, Body: json.RawMessage(`{"stopReason":"end_turn"}`), Sync: true})
	tr, err := load(t, s, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Records) != 4 || tr.Meta.Title != "fix the bug" || tr.Meta.Agent != "a" || tr.Meta.Cwd != "/w" {
		t.Fatalf("got %+v", tr)
	}
	if _, err := load(t, s, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unknown session: %v", err)
	}
}

func TestStore_TornLastLineIgnored(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	create(t, s, "s1", Meta{})
	s.Append("s1", Record{Kind: KindMeta, Cwd: "/w"})
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("hi"), Sync: true})
	s.Close()
	f, err := os.OpenFile(filepath.Join(dir, "s1.ndjson"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"t":"update","at":"2026-01-01T00:00:00Z","body":{"sessionId":"s1","upd`)
	f.Close()
	s2 := open(t, Options{Dir: dir})
	tr, err := load(t, s2, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Records) != 2 || tr.Skipped != 1 {
		t.Fatalf("records %d skipped %d", len(tr.Records), tr.Skipped)
	}
	// Appending after a torn line starts a fresh line first: the torn
	// bytes stay a line of their own, skipped, and every record after
	// them reads back.
	if _, err := s2.Acquire("s1"); err != nil {
		t.Fatal(err)
	}
	s2.Append("s1", Record{Kind: KindStop, Body: json.RawMessage(`{"stopReason":"end_turn"}`)})
	s2.Append("s1", Record{Kind: KindStop, Body: json.RawMessage(`{"stopReason":"end_turn"}`), Sync: true})
	tr, _ = load(t, s2, "s1")
	// (Without lock files, the turn s left open counts as interrupted:
	// its gap record is not what this test is about.)
	tr.Records = slices.DeleteFunc(tr.Records, func(r Record) bool { return r.Kind == KindGap })
	if len(tr.Records) != 4 || tr.Skipped != 1 {
		t.Fatalf("after append: records %d skipped %d", len(tr.Records), tr.Skipped)
	}
}

func TestStore_PermissionBits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	create(t, s, "s1", Meta{})
	s.Append("s1", Record{Kind: KindMeta, Cwd: "/w", Sync: true})
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("hi"), Sync: true})
	if _, err := load(t, s, "s1"); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(dir)
	if st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", st.Mode().Perm())
	}
	for _, n := range []string{"s1.ndjson", "s1.json"} {
		st, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", n, st.Mode().Perm())
		}
	}
}

func TestStore_ConcurrentSessions(t *testing.T) {
	s := open(t, Options{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("sess-%d", g)
			if err := s.Create(sid, Meta{}); err != nil {
				t.Error(err)
			}
			s.Append(sid, Record{Kind: KindMeta, Cwd: "/w"})
			for i := range 200 {
				s.Append(sid, Record{Kind: KindUpdate, Body: fmt.Appendf(nil, `{"n":%d}`, i)})
			}
		}()
	}
	wg.Wait()
	for g := range 8 {
		tr, err := load(t, s, fmt.Sprintf("sess-%d", g))
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Records) != 201 {
			t.Fatalf("session %d: %d records", g, len(tr.Records))
		}
		for i, r := range tr.Records[1:] {
			if string(r.Body) != fmt.Sprintf(`{"n":%d}`, i) {
				t.Fatalf("session %d record %d = %s: out of order", g, i, r.Body)
			}
		}
	}
}

func TestStore_ListPaginationNewestFirstByCwd(t *testing.T) {
	s := open(t, Options{})
	base := clock.Now().Add(-time.Hour)
	for i := range 7 {
		cwd := "/a"
		if i%2 == 1 {
			cwd = "/b"
		}
		create(t, s, fmt.Sprintf("s%d", i), Meta{CreatedAt: base.Add(time.Duration(i) * time.Minute)})
		s.Append(fmt.Sprintf("s%d", i), Record{Kind: KindMeta, Cwd: cwd, At: base.Add(time.Duration(i) * time.Minute), Sync: true})
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		m, next := list(t, s, "/a", cursor, 2)
		for _, x := range m {
			got = append(got, x.SessionID)
		}
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		cursor = next
	}
	if strings.Join(got, ",") != "s6,s4,s2,s0" {
		t.Fatalf("got %v", got)
	}
	all, next := list(t, s, "", "", 0)
	if len(all) != 7 || next != "" {
		t.Fatalf("all: %d next %q", len(all), next)
	}
	ch := make(chan error, 1)
	s.List("", "", "garbage!", 2, func(_ []Meta, _ string, err error) { ch <- err })
	if <-ch == nil {
		t.Fatal("a bad cursor is accepted")
	}
}

func TestStore_Retention(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	now := clock.Now()
	create(t, s, "ancient", Meta{CreatedAt: now.Add(-48 * time.Hour)})
	s.Append("ancient", Record{Kind: KindMeta, Cwd: "/w", At: now.Add(-48 * time.Hour), Sync: true})
	for i := range 4 {
		create(t, s, fmt.Sprintf("s%d", i), Meta{CreatedAt: now.Add(time.Duration(i) * time.Second)})
		s.Append(fmt.Sprintf("s%d", i), Record{Kind: KindMeta, Cwd: "/w", At: now.Add(time.Duration(i) * time.Second), Sync: true})
	}
	s.Close()
	// (A retention pass at every creation: the count is checked at once.)
	s2 := open(t, Options{Dir: dir, MaxAge: 24 * time.Hour, MaxSessions: 3, RetainEvery: -1})
	m, _ := list(t, s2, "", "", 0)
	var ids []string
	for _, x := range m {
		ids = append(ids, x.SessionID)
	}
	if strings.Join(ids, ",") != "s3,s2,s1" {
		t.Fatalf("after retention: %v", ids)
	}
	if _, err := os.Stat(filepath.Join(dir, "ancient.ndjson")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old transcript kept: %v", err)
	}
	// A new session keeps the count bounded too.
	create(t, s2, "s4", Meta{CreatedAt: now.Add(time.Minute)})
	s2.Append("s4", Record{Kind: KindMeta, Cwd: "/w", At: now.Add(time.Minute), Sync: true})
	m, _ = list(t, s2, "", "", 0)
	if len(m) != 3 || m[0].SessionID != "s4" {
		t.Fatalf("after a new session: %+v", m)
	}
}

func TestStore_SizeCapAndLargePayloads(t *testing.T) {
	s := open(t, Options{MaxSessionBytes: 4096, MaxInline: 100})
	img := strings.Repeat("A", 1000)
	create(t, s, "s1", Meta{})
	s.Append("s1", Record{Kind: KindPrompt, Body: json.RawMessage(`{"sessionId":"s1","prompt":[{"type":"image","mimeType":"image/png","data":"` + img + `"}]}`)})
	for i := range 100 {
		s.Append("s1", Record{Kind: KindUpdate, Body: fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 50))})
	}
	s.Append("s1", Record{Kind: KindSwitch, Agent: "b"})
	tr, err := load(t, s, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(tr.Records[0].Body), img) || !strings.Contains(string(tr.Records[0].Body), `"data":"acp-bridge:omitted:1000"`) || !json.Valid(tr.Records[0].Body) {
		t.Fatalf("large image stored: %.200s", tr.Records[0].Body)
	}
	size := 0
	kinds := map[string]int{}
	for _, r := range tr.Records {
		b, _ := json.Marshal(r)
		size += len(b) + 1
		kinds[r.Kind]++
	}
	if size > 4096+200 || kinds[KindCap] != 1 || kinds[KindSwitch] != 1 || kinds[KindUpdate] == 100 {
		t.Fatalf("size %d kinds %v", size, kinds)
	}
	if tr.Meta.Agent != "b" {
		t.Fatalf("switch past the cap not recorded: %+v", tr.Meta)
	}
}

// fillHeld appends a meta record to s1, then calls fill while the writer is
// held (so that the queue fills), lets the writer catch up, appends a stop
// record and returns the transcript.
func fillHeld(t *testing.T, s *Store, fill func()) *Transcript {
	t.Helper()
	create(t, s, "s1", Meta{})
	hold, held := make(chan struct{}), make(chan struct{})
	s.do(func() { close(held); <-hold })
	<-held
	s.Append("s1", Record{Kind: KindMeta, Cwd: "/w"})
	fill()
	close(hold)
	if _, err := load(t, s, "s1"); err != nil { // the writer has caught up
		t.Fatal(err)
	}
	s.Append("s1", Record{Kind: KindStop, Body: json.RawMessage(`{}`)})
	tr, err := load(t, s, "s1")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestStore_FullQueueDropsWithGap(t *testing.T) {
	s := open(t, Options{QueueBytes: 1})
	tr := fillHeld(t, s, func() {
		for range 10 {
			s.Append("s1", Record{Kind: KindUpdate, Body: json.RawMessage(`{"n":1}`)})
		}
	})
	if s.Dropped() != 10 {
		t.Fatalf("dropped %d, want the 10 updates", s.Dropped())
	}
	var kinds []string
	for _, r := range tr.Records {
		kinds = append(kinds, r.Kind)
	}
	if strings.Join(kinds, ",") != "meta,gap,stop" {
		t.Fatalf("records %v, want meta,gap,stop", kinds)
	}
}

func TestStore_Delete(t *testing.T) {
	s := open(t, Options{})
	create(t, s, "a/b c", Meta{})
	s.Append("a/b c", Record{Kind: KindMeta, Cwd: "/w", Sync: true})
	if _, err := load(t, s, "a/b c"); err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 2)
	s.Delete("a/b c", func(err error) { ch <- err })
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	s.Delete("a/b c", func(err error) { ch <- err })
	if err := <-ch; !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := load(t, s, "a/b c"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("deleted session loads")
	}
}

// An id recorded before (an agent that hands out ids again after a
// restart, another bridge process) is refused to Create: its transcript is
// another conversation, and stays as it was.
func TestStore_CreateRefusesARecordedID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	create(t, s, "sess-1", Meta{Cwd: "/old"})
	s.Append("sess-1", Record{Kind: KindPrompt, Body: prompt("first conversation"), Sync: true})
	if err := s.Create("sess-1", Meta{Cwd: "/new"}); !errors.Is(err, ErrTaken) {
		t.Fatalf("Create of a held id: %v, want ErrTaken", err)
	}
	s.Release("sess-1")
	s.barrier() // released: its listing data written
	s2 := open(t, Options{Dir: dir})
	if err := s2.Create("sess-1", Meta{Cwd: "/new"}); !errors.Is(err, ErrTaken) {
		t.Fatalf("Create of a recorded id: %v, want ErrTaken", err)
	}
	if !s2.Taken("sess-1") || s2.Taken("sess-2") {
		t.Fatal("Taken is wrong")
	}
	s2.Append("sess-1", Record{Kind: KindPrompt, Body: prompt("second conversation"), Sync: true})
	old, err := load(t, s2, "sess-1")
	if err != nil || old.Meta.Title != "first conversation" || old.Meta.Cwd != "/old" || len(old.Records) != 1 {
		t.Fatalf("recorded transcript: %+v %v", old, err)
	}
}

// A deleted session's id is never handed out again while its tombstone
// lasts (MaxAge): a window that still remembers it must not load another
// conversation under it. Nothing of it is listed or loadable.
func TestStore_DeletedIDsAreNotReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	create(t, s, "sess-1", Meta{Cwd: "/w"})
	s.Append("sess-1", Record{Kind: KindPrompt, Body: prompt("secret plans"), Sync: true})
	done := make(chan error, 1)
	s.Delete("sess-1", func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.Create("sess-1", Meta{Cwd: "/w"}); !errors.Is(err, ErrTaken) {
		t.Fatalf("Create of a deleted id: %v, want ErrTaken", err)
	}
	if !s.Taken("sess-1") {
		t.Fatal("a deleted id is not Taken")
	}
	if _, err := s.Acquire("sess-1"); !errors.Is(err, ErrDeleted) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Acquire of a deleted session: %v, want ErrDeleted (not found)", err)
	}
	if ms, _ := list(t, s, "", "", 0); len(ms) != 0 {
		t.Fatalf("a deleted session is listed: %+v", ms)
	}
	// Past MaxAge the tombstone goes, and with it the reservation. A
	// file's time is the system's, not the store's calendar.
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "sess-1"+goneSuffix), old, old); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, Options{Dir: dir, MaxAge: 24 * time.Hour})
	if err := s2.Create("sess-1", Meta{Cwd: "/w"}); err != nil {
		t.Fatalf("Create after the tombstone expired: %v", err)
	}
}

func TestOmitLarge_SplicesOnlyLargePayloads(t *testing.T) {
	in := `{"a":{"data":"` + strings.Repeat("Q", 50) + `","x":["data",{"blob" : "` + strings.Repeat("Z", 60) + `"}]},"data":"short","text":"` + strings.Repeat("T", 80) + `"}`
	got := string(omitLarge(json.RawMessage(in), 40))
	want := `{"a":{"data":"acp-bridge:omitted:50","x":["data",{"blob" : "acp-bridge:omitted:60"}]},"data":"short","text":"` + strings.Repeat("T", 80) + `"}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestStore_ListShowsSessionsNotFlushedYet(t *testing.T) {
	s := open(t, Options{FlushEvery: time.Hour})
	create(t, s, "fresh", Meta{})
	s.Append("fresh", Record{Kind: KindMeta, Cwd: "/w"})
	s.Append("fresh", Record{Kind: KindPrompt, Body: prompt("just asked")})
	m, _ := list(t, s, "/w", "", 0)
	if len(m) != 1 || m[0].SessionID != "fresh" || m[0].Title != "just asked" {
		t.Fatalf("list = %+v", m)
	}
}

// A session is listed, with its cwd, as soon as it is written: a bridge
// killed before its first flush leaves nothing unfindable.
func TestStore_NewSessionListedBeforeAnyFlush(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir, FlushEvery: time.Hour})
	create(t, s, "s1", Meta{Cwd: "/w", Agent: "a"})
	taken := make(chan struct{}) // the writer has taken the record; nothing flushed
	s.do(func() { close(taken) })
	<-taken
	m, err := s.readMeta(filepath.Join(dir, "s1.json"))
	if err != nil || m.Cwd != "/w" || m.Agent != "a" {
		t.Fatalf("listing data on disk: %+v %v", m, err)
	}
}

// A short update record gives back its params byte for byte, members after
// "update" included.
func TestStore_ShortUpdateRoundTrip(t *testing.T) {
	s := open(t, Options{})
	create(t, s, "s1", Meta{})
	s.Append("s1", Record{Kind: KindMeta, Cwd: "/w"})
	s.AppendSessionUpdate("s1", []byte(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}},"_meta":{"k":[1,2]}`))
	s.AppendSessionUpdate("s1", []byte(`{"sessionUpdate":"plan","entries":[]}`))
	tr, err := load(t, s, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}},"_meta":{"k":[1,2]}}`,
		`{"sessionId":"s1","update":{"sessionUpdate":"plan","entries":[]}}`,
	}
	if len(tr.Records) != 3 || string(tr.Records[1].Body) != want[0] || string(tr.Records[2].Body) != want[1] || tr.Records[1].Kind != KindUpdate {
		t.Fatalf("records %+v", tr.Records)
	}
}

func bodies(tr *Transcript) []string {
	var out []string
	for _, r := range tr.Records {
		out = append(out, r.Kind+" "+string(r.Body))
	}
	return out
}

func TestStore_LinesHandOverInOrder(t *testing.T) {
	s := open(t, Options{MaxInline: 100})
	create(t, s, "s1", Meta{})
	s.Append("s1", Record{Kind: KindMeta, Cwd: "/w"})
	create(t, s, "s2", Meta{})
	l := s.Lines()
	l.SessionUpdate("s1", []byte(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a"}}`))
	l.Update("s1", []byte(`{"sessionId":"s1","update":{"sessionUpdate":"plan","entries":[]},"x":1}`))
	// Nothing reaches the store before a flush.
	if tr, err := load(t, s, "s1"); err != nil || len(tr.Records) != 1 {
		t.Fatalf("before Flush: %v, %v; want the meta record only", tr, err)
	}
	// Another session hands s1's run over first; an update too large to
	// inline goes to the store directly, after what was gathered.
	l.SessionUpdate("s2", []byte(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"b"}}`))
	l.SessionUpdate("s1", []byte(`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"`+strings.Repeat("A", 200)+`"}}`))
	l.Flush()
	s.Append("s1", Record{Kind: KindStop, Body: json.RawMessage(`{"stopReason":"end_turn"}`), Sync: true})

	tr, err := load(t, s, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`meta `,
		`update {"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a"}}}`,
		`update {"sessionId":"s1","update":{"sessionUpdate":"plan","entries":[]},"x":1}`,
		`update {"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"acp-bridge:omitted:200"}}}`,
		`stop {"stopReason":"end_turn"}`,
	}
	if got := bodies(tr); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("s1 records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	tr, err = load(t, s, "s2")
	if err != nil || len(tr.Records) != 1 || !strings.Contains(string(tr.Records[0].Body), `"text":"b"`) {
		t.Fatalf("s2: %v, %v", tr, err)
	}
}

func TestStore_LinesHandOverWhenFull(t *testing.T) {
	s := open(t, Options{})
	create(t, s, "s1", Meta{})
	s.Append("s1", Record{Kind: KindMeta, Cwd: "/w"})
	l := s.Lines()
	u := []byte(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + strings.Repeat("x", 1000) + `"}}`)
	n := 2*linesBytes/len(u) + 1
	for range n {
		l.SessionUpdate("s1", u)
	}
	tr, err := load(t, s, "s1")
	if err != nil {
		t.Fatal(err)
	}
	// Without a Flush, all but the last partial run have reached the store.
	if got := len(tr.Records) - 1; got < n-linesBytes/len(u) || got >= n {
		t.Fatalf("%d of %d updates handed over without Flush; want all but the last run", got, n)
	}
}

func TestStore_LinesDroppedCountsEachRecord(t *testing.T) {
	s := open(t, Options{QueueBytes: 1})
	tr := fillHeld(t, s, func() {
		l := s.Lines()
		for range 5 {
			l.SessionUpdate("s1", []byte(`{"sessionUpdate":"plan","entries":[]}`))
		}
		l.Flush()
	})
	if s.Dropped() != 5 {
		t.Fatalf("dropped %d, want the 5 updates", s.Dropped())
	}
	if got := bodies(tr); strings.Join(got, "|") != `meta |gap {"dropped":5}|stop {}` {
		t.Fatalf("records %q", got)
	}
}

// TestStore_SyncerFinishesBeforeClose: fsyncs and sidecars are written off
// the writer's path, and Close returns only once they are on disk.
func TestStore_SyncerFinishesBeforeClose(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// After Create's stamp, on the store's calendar.
	at := clock.Now().Add(time.Hour).Truncate(time.Millisecond)
	for i := range 70 { // more than the writer keeps open: some are closed early
		sid := fmt.Sprintf("s%02d", i)
		create(t, s, sid, Meta{})
		s.Append(sid, Record{Kind: KindMeta, Cwd: "/w"})
		s.Append(sid, Record{Kind: KindPrompt, Body: prompt("hello " + sid)})
		s.Append(sid, Record{Kind: KindStop, At: at, Body: json.RawMessage(`{"stopReason":"end_turn"}`), Sync: true})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 70 {
		sid := fmt.Sprintf("s%02d", i)
		b, err := os.ReadFile(filepath.Join(dir, sid+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var m Meta
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if !m.UpdatedAt.Equal(at) || m.Title == "" {
			t.Fatalf("%s sidecar after Close: %s; want updatedAt %v and a title", sid, b, at)
		}
	}
}

// TestStore_AStreamRunsInItsBlocks: a stream's records pass to the writer
// in their Lines' own blocks, which the writer hands back. Nothing of the
// stream is copied into the queue's arena, which stays the size it was
// made (copied there, records the writer had not taken yet made it grow,
// each time into fresh memory), and every record arrives, in order.
// (1.2 MB of records: under the queue's bound even if the writer never
// ran, so that no schedule can drop one or run out of blocks.)
func TestStore_AStreamRunsInItsBlocks(t *testing.T) {
	s := open(t, Options{})
	create(t, s, "s1", Meta{})
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("hi")})
	l := s.Lines()
	const updates = 20_000
	blocks := map[*byte]bool{}
	for i := range updates {
		l.SessionUpdate("s1", fmt.Appendf(nil, `{"sessionUpdate":"plan","entries":[],"n":%d}`, i))
		blocks[unsafe.SliceData(l.buf)] = true
		s.mu.Lock()
		arena, out := cap(s.arena), s.blocksOut
		s.mu.Unlock()
		if arena > idleArena {
			t.Fatalf("after %d updates the arena holds %d bytes: the stream's records went through it", i+1, arena)
		}
		if out > s.maxBlocks() {
			t.Fatalf("after %d updates %d blocks are out, over %d", i+1, out, s.maxBlocks())
		}
	}
	l.Flush()
	tr, err := load(t, s, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Records) != 1+updates {
		t.Fatalf("%d records, want the prompt and %d updates", len(tr.Records), updates)
	}
	for i, r := range tr.Records[1:] {
		if n := gjson.GetBytes(r.Body, "update.n"); n.Int() != int64(i) {
			t.Fatalf("update %d of the transcript is %s", i, r.Body)
		}
	}
	t.Logf("%d updates in %d blocks", updates, len(blocks))
}

// TestStore_LinesPastMaxBlocksGoThroughTheArena: with maxBlocks out at
// once (the writer is held), a Lines' records are copied into the arena
// instead, so that partly filled blocks (the engine flushes at every pause
// of the agent's) hold no more than the queue's bound allows for; the
// records still arrive in order, blocks, arena and other records
// interleaved.
func TestStore_LinesPastMaxBlocksGoThroughTheArena(t *testing.T) {
	s := open(t, Options{QueueBytes: 4 * linesBytes})
	create(t, s, "s1", Meta{})
	hold, held := make(chan struct{}), make(chan struct{})
	s.do(func() { close(held); <-hold })
	<-held
	l := s.Lines()
	const n = 40
	var want []string
	for i := range n {
		u := fmt.Sprintf(`{"sessionUpdate":"plan","entries":[],"n":%d}`, i)
		l.SessionUpdate("s1", []byte(u))
		l.Flush() // the agent paused
		want = append(want, `update {"sessionId":"s1","update":`+u+`}`)
		if i == n/2 {
			s.Append("s1", Record{Kind: KindPrompt, Body: prompt("mid")})
			want = append(want, `prompt `+string(prompt("mid")))
		}
	}
	s.mu.Lock()
	out, arena := s.blocksOut, len(s.arena)
	s.mu.Unlock()
	if out != s.maxBlocks() {
		t.Errorf("%d blocks out with the writer held, want maxBlocks (%d)", out, s.maxBlocks())
	}
	if arena == 0 {
		t.Error("no record went through the arena once the blocks were out")
	}
	close(hold)
	tr, err := load(t, s, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got := bodies(tr); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// readCounter is an FS that counts the directory listings and the
// read-only opens of listing data (.json), the work of a retention pass.
type readCounter struct {
	FS
	mu             sync.Mutex
	lists, listing int
}

func (c *readCounter) ReadDir(name string) ([]fs.DirEntry, error) {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return c.FS.ReadDir(name)
}

func (c *readCounter) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 && strings.HasSuffix(name, ".json") {
		c.mu.Lock()
		c.listing++
		c.mu.Unlock()
	}
	return c.FS.OpenFile(name, flag, perm)
}

func (c *readCounter) counts() (lists, listing int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists, c.listing
}

// Creating a session costs no pass over the state directory: with many
// sessions on disk, a burst of new ones reads the directory and the other
// sessions' listing data once at most (the retention pass, at most once
// per RetainEvery), not once per session, which made a burst quadratic in
// the sessions on disk (serve with 1,000 sessions took 10-35 s to exit
// after 300 session/new).
func TestStore_CreateIsO1InSessionsOnDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	const onDisk, burst = 300, 100
	now := clock.Now()
	for i := range onDisk {
		sid := fmt.Sprintf("old%d", i)
		create(t, s, sid, Meta{CreatedAt: now})
		s.Append(sid, Record{Kind: KindMeta, Cwd: "/w", At: now, Sync: true})
	}
	s.Close()
	c := &readCounter{FS: osFS{}}
	s2 := open(t, Options{Dir: dir, FS: c})
	lists0, listing0 := c.counts()
	if listing0 < onDisk {
		t.Fatalf("Open read %d listing files of %d sessions: the counter misses the retention pass", listing0, onDisk)
	}
	for i := range burst {
		create(t, s2, fmt.Sprintf("new%d", i), Meta{CreatedAt: now})
	}
	done := make(chan struct{})
	s2.Written(func() { close(done) })
	<-done
	lists, listing := c.counts()
	if lists != lists0 || listing-listing0 >= onDisk {
		t.Errorf("%d new sessions listed the directory %d times and read %d listing files, with %d sessions on disk: a pass per session",
			burst, lists-lists0, listing-listing0, onDisk)
	}
}

// Stores that share a Retention (serve's, one per connection) share its
// schedule: many Stores opened on a directory of many sessions, each
// creating a session, make one retention pass between them, not one each
// (serve made one per connection: with 500 connections, a third of its
// CPU time went to reading listing files). A Store of its own still makes
// one at Open.
func TestStore_SharedRetentionOnePassForManyStores(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	const onDisk, stores = 200, 50
	now := clock.Now()
	for i := range onDisk {
		sid := fmt.Sprintf("old%d", i)
		create(t, s, sid, Meta{CreatedAt: now})
		s.Append(sid, Record{Kind: KindMeta, Cwd: "/w", At: now, Sync: true})
	}
	s.Close()
	c := &readCounter{FS: osFS{}}
	shared := &Retention{}
	for i := range stores {
		si := open(t, Options{Dir: dir, FS: c, Retention: shared})
		create(t, si, fmt.Sprintf("new%d", i), Meta{CreatedAt: now})
		done := make(chan struct{})
		si.Written(func() { close(done) })
		<-done
	}
	lists, listing := c.counts()
	if lists > 2 || listing > 2*(onDisk+stores) {
		t.Errorf("%d Stores sharing a Retention, each creating a session beside %d on disk, listed the directory %d times and read %d listing files: a pass per Store",
			stores, onDisk, lists, listing)
	}
	own := &readCounter{FS: osFS{}}
	open(t, Options{Dir: dir, FS: own})
	if lists, _ := own.counts(); lists == 0 {
		t.Errorf("a Store of its own made no retention pass at Open")
	}
}

// A session whose transcript is not a regular file (a directory, a FIFO, a
// symlink: put there by hand or by another user) cannot be loaded, and is
// not listed either: the list offers only what a load can open.
func TestStore_ListsOnlyLoadableTranscripts(t *testing.T) {
	for _, kind := range oddTranscripts {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			s := open(t, Options{Dir: dir})
			now := clock.Now()
			for _, sid := range []string{"good", "odd"} {
				create(t, s, sid, Meta{CreatedAt: now})
				s.Append(sid, Record{Kind: KindMeta, Cwd: "/w", At: now, Sync: true})
			}
			s.Close()
			tp := filepath.Join(dir, "odd.ndjson")
			err := os.Remove(tp)
			if err != nil {
				t.Fatal(err)
			}
			switch kind {
			case "directory":
				err = os.Mkdir(tp, 0o700)
			case "fifo":
				err = mkfifo(tp)
			case "symlink":
				err = os.Symlink(filepath.Join(dir, "good.ndjson"), tp)
			}
			if err != nil {
				t.Fatalf("making a %s transcript: %v", kind, err)
			}
			s2 := open(t, Options{Dir: dir})
			m, _ := list(t, s2, "", "", 0)
			if len(m) != 1 || m[0].SessionID != "good" {
				t.Errorf("listed %+v, want only the session whose transcript is a file", m)
			}
			if _, err := s2.Acquire("odd"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Acquire of a %s transcript = %v, want not found", kind, err)
			}
		})
	}
}
