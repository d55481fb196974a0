package store

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func deleteSession(s *Store, sid string) error {
	ch := make(chan error, 1)
	s.Delete(sid, func(err error) { ch <- err })
	return <-ch
}

// A record for a session nobody created or acquired creates nothing: no
// "phantom" session with an empty cwd in the listing.
func TestStore_RecordsOfUnheldSessionsCreateNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	s.Append("ghost", Record{Kind: KindMeta, Cwd: "/w"})
	s.AppendSessionUpdate("ghost", []byte(`{"sessionUpdate":"plan","entries":[]}`))
	l := s.Lines()
	l.Update("ghost", []byte(`{"x":1}`))
	l.Flush()
	s.Append("ghost", Record{Kind: KindStop, Body: json.RawMessage(`{}`), Sync: true})
	if m, _ := list(t, s, "", "", 0); len(m) != 0 {
		t.Fatalf("listed: %+v", m)
	}
	if exists(t, filepath.Join(dir, "ghost.ndjson")) || exists(t, filepath.Join(dir, "ghost.json")) {
		t.Fatal("a record of an unheld session created its files")
	}
	if s.Unowned() != 4 {
		t.Fatalf("Unowned %d, want the 4 records", s.Unowned())
	}
}

// Deleting a session in the middle of a turn: nothing queued, buffered
// or appended later for it brings its files back, sidecar included.
func TestStore_DeleteDuringATurnStaysDeleted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir, FlushEvery: time.Millisecond})
	create(t, s, "s1", Meta{Cwd: "/w"})
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("hi")})
	l := s.Lines()
	for i := range 100 {
		l.SessionUpdate("s1", fmt.Appendf(nil, `{"sessionUpdate":"agent_message_chunk","n":%d}`, i))
		if i == 50 {
			l.Flush()
			s.Append("s1", Record{Kind: KindBackend, Backend: "b-1", Link: "own"})
			if err := deleteSession(s, "s1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	l.Flush()
	s.Append("s1", Record{Kind: KindStop, Body: json.RawMessage(`{}`), Sync: true})
	time.Sleep(20 * time.Millisecond) // flush ticks pass
	s.barrier()
	s.Close()
	for _, n := range []string{"s1.ndjson", "s1.json", "s1.lock"} {
		if exists(t, filepath.Join(dir, n)) {
			t.Fatalf("%s is back after Delete", n)
		}
	}
	if s.Unowned() == 0 {
		t.Fatal("records after Delete not counted")
	}
}

// Ids too long for the "x-"+hex name get a hashed one; every id that had
// a name before keeps it.
func TestStore_LongIDs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	ids := []string{strings.Repeat("a", 100), strings.Repeat("é", 61), strings.Repeat("/", 123), strings.Repeat("/", 124), strings.Repeat("b", 300), strings.Repeat("ü", 2000)}
	for i, sid := range ids {
		create(t, s, sid, Meta{Cwd: "/w"})
		s.Append(sid, Record{Kind: KindPrompt, Body: prompt(fmt.Sprint("turn ", i)), Sync: true})
	}
	for i, sid := range ids {
		tr, err := load(t, s, sid)
		if err != nil || tr.Meta.SessionID != sid || tr.Meta.Title != fmt.Sprint("turn ", i) {
			t.Fatalf("id of %d bytes: %+v %v", len(sid), tr, err)
		}
	}
	m, _ := list(t, s, "/w", "", 0)
	if len(m) != len(ids) {
		t.Fatalf("listed %d of %d", len(m), len(ids))
	}
	// The names earlier versions gave.
	for sid, want := range map[string]string{
		ids[0]: ids[0], "a/b c": "x-" + hex.EncodeToString([]byte("a/b c")), "x-1": "x-" + hex.EncodeToString([]byte("x-1")),
		ids[2]: "x-" + hex.EncodeToString([]byte(ids[2])),
	} {
		if got := name(sid); got != want {
			t.Errorf("name(%q) = %q, want %q", sid, got, want)
		}
	}
	if n := name(ids[3]); !strings.HasPrefix(n, "h-") || len(n)+len(".ndjson") > maxName {
		t.Errorf("name of a 124-byte id: %q", n)
	}
}

// A transcript line with invalid UTF-8 is read back repaired, never raw.
func TestStore_InvalidUTF8Repaired(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	create(t, s, "s1", Meta{Cwd: "/w"})
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("hi"), Sync: true})
	s.Close()
	f, err := os.OpenFile(filepath.Join(dir, "s1.ndjson"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("{\"t\":\"update\",\"body\":{\"text\":\"bad \xff\xfe bytes\"}}\n{\"t\":\"u\",\"u\":{\"text\":\"\xc3\"}}\n")
	f.Close()
	s2 := open(t, Options{Dir: dir})
	tr, err := load(t, s2, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Records) != 3 {
		t.Fatalf("records %q", bodies(tr))
	}
	for _, r := range tr.Records {
		if !utf8.Valid(r.Body) || !json.Valid(r.Body) {
			t.Fatalf("record handed out raw: %q", r.Body)
		}
	}
	if !strings.Contains(string(tr.Records[1].Body), "bad \uFFFD bytes") || !strings.Contains(string(tr.Records[2].Body), "\uFFFD") {
		t.Fatalf("records %q", bodies(tr))
	}
}

// Symbolic links planted in the state directory, in place of a
// transcript, a sidecar or a lock file, are never written through nor
// read.
func TestStore_PlantedSymlinksNeverFollowed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	victim := filepath.Join(t.TempDir(), "victim")
	secret := `{"sessionId":"planted","cwd":"/secret","title":"secret"}` + "\n"
	if err := os.WriteFile(victim, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"t1.ndjson", "t2.json", "t2.ndjson", "t3.lock", "planted.json"} {
		if err := os.Symlink(victim, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	// t1: a transcript link: the id counts as taken, nothing written.
	if err := s.Create("t1", Meta{Cwd: "/w"}); !errors.Is(err, ErrTaken) {
		t.Fatalf("Create over a planted transcript: %v", err)
	}
	if _, err := s.Acquire("t1"); err == nil {
		t.Fatal("Acquire of a planted transcript")
	}
	// t2: transcript and sidecar links: not loadable.
	if tr, err := load(t, s, "t2"); err == nil {
		t.Fatalf("a planted transcript loads: %+v", tr)
	}
	// t3: a lock link: no claim through it.
	if err := s.Create("t3", Meta{Cwd: "/w"}); err == nil {
		t.Fatal("Create through a planted lock file")
	}
	// t4: a real session whose sidecar is replaced by a link: rewriting
	// it replaces the link, not its target.
	create(t, s, "t4", Meta{Cwd: "/w"})
	s.barrier()
	os.Remove(filepath.Join(dir, "t4.json"))
	if err := os.Symlink(victim, filepath.Join(dir, "t4.json")); err != nil {
		t.Fatal(err)
	}
	s.Append("t4", Record{Kind: KindPrompt, Body: prompt("mine"), Sync: true})
	for _, x := range []string{"t1", "t2", "t3"} {
		s.Append(x, Record{Kind: KindPrompt, Body: prompt("mine"), Sync: true})
	}
	m, _ := list(t, s, "", "", 0)
	if len(m) != 1 || m[0].SessionID != "t4" || m[0].Title != "mine" {
		t.Fatalf("listed %+v: want t4 alone", m)
	}
	s.Close()
	if b, _ := os.ReadFile(victim); string(b) != secret {
		t.Fatalf("written through a link: %q", b)
	}
	if st, err := os.Lstat(filepath.Join(dir, "t4.json")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("t4.json: %v %v", st, err)
	}
}

// An existing state directory keeps its mode: a shared 1777 directory
// keeps its sticky bit.
func TestOpen_KeepsAnExistingDirectorysMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	s := open(t, Options{Dir: dir})
	create(t, s, "s1", Meta{})
	s.Close()
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&(os.ModePerm|os.ModeSticky) != 0o777|os.ModeSticky {
		t.Fatalf("mode %v, want drwxrwxrwt", st.Mode())
	}
	if st, _ := os.Stat(filepath.Join(dir, "s1.ndjson")); st.Mode().Perm() != 0o600 {
		t.Fatalf("transcript mode %v", st.Mode())
	}
}

// A state directory another user owns is refused.
func TestOpen_RefusesADirectoryOfAnotherUser(t *testing.T) {
	dir := "/" // root's: another user's unless we are root
	if os.Geteuid() == 0 {
		dir = filepath.Join(t.TempDir(), "theirs")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Open(Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "not to you") {
		t.Fatalf("Open of another user's directory: %v", err)
	}
}

// Without a home directory the state directory is the user's own in the
// temporary directory: made 0700, refused when open to others, another
// user's, or a link.
func TestDefaultDir_WithoutHome(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("HOME", "")
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("TMPDIR", tmp)
	dir := DefaultDir()
	if want := filepath.Join(tmp, "acp-bridge-"+uid()); dir != want {
		t.Fatalf("DefaultDir() = %q, want %q", dir, want)
	}
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v", st.Mode())
	}
	os.Chmod(dir, 0o755)
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "accessible to other users") {
		t.Fatalf("a 0755 directory at the predictable path: %v", err)
	}
	os.Remove(dir)
	other := filepath.Join(tmp, "elsewhere")
	os.Mkdir(other, 0o700)
	os.Symlink(other, dir)
	if _, err := Open(Options{Dir: dir}); err == nil {
		t.Fatal("a link at the predictable path is followed")
	}
	if os.Geteuid() == 0 {
		os.Remove(dir)
		os.Mkdir(dir, 0o700)
		os.Chown(dir, 4242, 4242)
		if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "not to you") {
			t.Fatalf("another user's directory at the predictable path: %v", err)
		}
	}
}

// The agent-side session and its link are recorded and given back, and
// sessions are listed by agent.
func TestStore_BackendAndListByAgent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	create(t, s, "s1", Meta{Cwd: "/w", Agent: "claude"})
	create(t, s, "s2", Meta{Cwd: "/w", Agent: "gemini"})
	s.Append("s1", Record{Kind: KindBackend, Backend: "agent-7", Link: "own", Sync: true})
	s.Append("s2", Record{Kind: KindSwitch, Agent: "claude", Sync: true})
	s.Append("s2", Record{Kind: KindBackend, Backend: "agent-8", Link: "shared", Sync: true})
	s.Close()
	s2 := open(t, Options{Dir: dir})
	tr, err := load(t, s2, "s1")
	if err != nil || tr.Meta.Backend != "agent-7" || tr.Meta.Link != "own" || tr.Records[0].Backend != "agent-7" {
		t.Fatalf("s1: %+v %v", tr, err)
	}
	ch := make(chan []Meta, 1)
	s2.List("/w", "gemini", "", 0, func(m []Meta, _ string, _ error) { ch <- m })
	if m := <-ch; len(m) != 0 {
		t.Fatalf("gemini's sessions: %+v", m)
	}
	s2.List("", "claude", "", 0, func(m []Meta, _ string, _ error) { ch <- m })
	m := <-ch
	i := slices.IndexFunc(m, func(x Meta) bool { return x.SessionID == "s2" })
	if len(m) != 2 || i < 0 || m[i].Backend != "agent-8" || m[i].Link != "shared" {
		t.Fatalf("claude's sessions: %+v", m)
	}
}
