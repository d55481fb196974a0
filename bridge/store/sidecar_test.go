package store

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/clock"
)

// renameCounter counts the sidecar rewrites of one session (each is a
// rename onto its sidecar).
type renameCounter struct {
	FS
	sidecar string
	mu      sync.Mutex
	n       int
}

func (c *renameCounter) Rename(oldname, newname string) error {
	if strings.HasSuffix(newname, c.sidecar) {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
	return c.FS.Rename(oldname, newname)
}

func (c *renameCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// A session streaming for minutes, with a turn every ten seconds, has its
// sidecar (listing data, written with an fsync) rewritten for its
// updatedAt at most once per metaEvery, not at every flush (once a second)
// and every turn's end; what the listing shows besides the date is
// written at once, and the last updatedAt when the session is released.
// In fake time (synctest), so the test takes no wall-clock minutes.
func TestSidecar_StreamRewritesItAtMostOncePerMetaEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		c := &renameCounter{FS: osFS{}, sidecar: string(os.PathSeparator) + "s1.json"}
		s, err := Open(Options{Dir: dir, FS: c})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Create("s1", Meta{Cwd: "/w"}); err != nil {
			t.Fatal(err)
		}
		s.Append("s1", Record{Kind: KindMeta, Agent: "a", Dialect: "acp", Cwd: "/w", Sync: true})
		written := func() {
			done := make(chan struct{})
			s.Written(func() { close(done) })
			<-done
		}
		const stream = 3 * time.Minute
		var last time.Time
		for i := range int(stream / (200 * time.Millisecond)) {
			last = clock.Now()
			switch {
			case i%50 == 0: // a turn every ten seconds
				s.Append("s1", Record{Kind: KindPrompt, Body: prompt("turn"), At: last})
			case i%50 == 49:
				s.Append("s1", Record{Kind: KindStop, Body: json.RawMessage(`{"stopReason":"end_turn"}`), At: last, Sync: true})
			default:
				s.Append("s1", Record{Kind: KindUpdate, Body: json.RawMessage(`{"sessionUpdate":"agent_message_chunk"}`), At: last})
			}
			if i == 0 {
				written()
				if m := readSidecar(t, s, "s1"); m.Title != "turn" {
					t.Fatalf("after the first prompt the sidecar's title is %q: a title must be listed at once", m.Title)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		written()
		n := c.count()
		// The creation, the agent, the title, then one per metaEvery.
		if most := 3 + int(stream/metaEvery) + 1; n > most {
			t.Errorf("the sidecar was rewritten %d times in %v of streaming (a turn every 10 s): want at most %d, one per %v for its date",
				n, stream, most, metaEvery)
		}
		s.Append("s1", Record{Kind: KindUpdate, Body: json.RawMessage(`{"sessionUpdate":"agent_message_chunk"}`), At: clock.Now()})
		last = clock.Now()
		s.Append("s1", Record{Kind: KindStop, Body: json.RawMessage(`{"stopReason":"end_turn"}`), At: last})
		s.Release("s1")
		written()
		if m := readSidecar(t, s, "s1"); !m.UpdatedAt.Equal(last) {
			t.Errorf("after the session was released its sidecar says updatedAt %v, want the last record's %v", m.UpdatedAt, last)
		}
		t.Logf("%d sidecar rewrites in %v of streaming", n, stream)
	})
}

func readSidecar(t *testing.T, s *Store, sid string) Meta {
	t.Helper()
	_, mp := s.paths(sid)
	b, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", mp, err)
	}
	return m
}
