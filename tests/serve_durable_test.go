package tests

// What `acp-bridge serve` promises about the transcripts when it is killed
// (kill -9) in the middle of streams: every update an editor received is
// replayed by a later session/load, or the transcript has a gap record
// where it is missing.

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestServeKill9_ReceivedIsReplayedOrMarked: six editors (three over
// WebSocket, three over Streamable HTTP) stream a long turn each through
// one serve recording into a state directory; when one of them has
// received a random number of chunks (seeded, logged; ACP_TEST_SEED
// repeats a run), serve is killed with SIGKILL. A new serve on the same
// state directory then loads every session: its replay must hold the
// turn's chunks in order with none missing or repeated, and either every
// chunk that editor had received, or a gap record after the last one it
// has (the turn was interrupted). Several rounds, each with its own kill
// point.
func TestServeKill9_ReceivedIsReplayedOrMarked(t *testing.T) {
	t.Parallel()
	const (
		sessions = 6
		chunks   = 5000 // per turn: the kill lands mid-stream
	)
	rounds := 2
	if v, err := strconv.Atoi(os.Getenv("ACP_TEST_KILL_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("ACP_TEST_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (ACP_TEST_SEED=%d repeats this run)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	agent := WSTransport(nil).Start(t)
	want := expectedChunks(chunks)
	totalLost, totalGaps, unmarked := 0, 0, 0
	for round := range rounds {
		victim := rng.IntN(sessions)
		at := 20 + rng.IntN(500)
		t.Logf("round %d: kill -9 when session %d has received %d chunks", round, victim, at)
		t0 := time.Now()
		dir := t.TempDir()
		args := append([]string{"--state-dir", dir}, agent.Args...)
		srv := StartServe(t, args, agent.Env)

		type stream struct {
			c   *remoteClient
			sid string
			mu  sync.Mutex
			got strings.Builder // the chunks received, joined
			n   int
		}
		streams := make([]*stream, sessions)
		killNow := make(chan struct{})
		var once sync.Once
		readersDone := make(chan struct{})
		var wg sync.WaitGroup
		for i := range sessions {
			st := &stream{}
			streams[i] = st
			ws := i%2 == 0
			c, err := dialServed(t, srv, ws)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			defer c.stop()
			st.c = c
			if m, err := c.Next(sdkWait); err != nil || !m.Get("result").Exists() {
				t.Fatalf("initialize %d: %s %v", i, m.Raw, err)
			}
			if err := c.Send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, ""); err != nil {
				t.Fatal(err)
			}
			m, err := c.Next(sdkWait)
			st.sid = m.Get("result.sessionId").Str
			if err != nil || st.sid == "" {
				t.Fatalf("session/new %d: %s %v", i, m.Raw, err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var r received
					select {
					case r = <-c.recv:
					case <-readersDone:
						// Every reader has ended: what is left was
						// received before serve died.
						select {
						case r = <-c.recv:
						default:
							return
						}
					}
					if r.err != nil {
						continue // serve is gone
					}
					u := gjson.GetBytes(r.msg, "params.update")
					if u.Get("sessionUpdate").Str != "agent_message_chunk" {
						continue
					}
					st.mu.Lock()
					st.got.WriteString(u.Get("content.text").Str)
					st.n++
					n := st.n
					st.mu.Unlock()
					if n == 1 {
						// The turn's start is in the transcript before
						// any of its updates reaches the editor: a kill
						// from now on leaves an open turn to mark.
						b, err := os.ReadFile(filepath.Join(dir, transcriptName(st.sid)))
						if err != nil || !bytes.Contains(b, []byte(`{"t":"prompt"`)) {
							t.Errorf("round %d session %d: the turn's first update reached the editor before its prompt was in the transcript (%v): %q", round, i, err, b)
						}
					}
					if i == victim && n == at {
						once.Do(func() { close(killNow) })
					}
				}
			}()
		}
		for _, st := range streams {
			// (An HTTP client's POST waits for its 202: sent from
			// goroutines, the six turns start together.)
			go st.c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"stream %d"}]}}`, st.sid, chunks), st.sid)
		}
		select {
		case <-killNow:
		case <-time.After(2 * sdkWait):
			t.Fatalf("round %d: session %d never received %d chunks", round, victim, at)
		}
		tKill := time.Since(t0)
		srv.Kill9()
		for _, st := range streams {
			st.c.stop()
			st.c.readers.Wait()
		}
		close(readersDone)
		wg.Wait()

		// A new serve on the same directory loads each session.
		again := StartServe(t, append([]string{"--state-dir", dir}, agent.Args...), agent.Env)
		for i, st := range streams {
			st.mu.Lock()
			got, n := st.got.String(), st.n
			st.mu.Unlock()
			replayed, gap, err := loadReplay(t, again, st.sid, i%2 == 0)
			if err != nil {
				t.Fatalf("round %d session %d: %v", round, i, err)
			}
			if !strings.HasPrefix(want, got) {
				t.Fatalf("round %d session %d: received out of order: %q…", round, i, truncate(got, 200))
			}
			if !strings.HasPrefix(want, replayed) {
				t.Errorf("round %d session %d: the replay is not the turn's chunks in order, none missing or repeated: %q…", round, i, truncate(replayed, 300))
				continue
			}
			lost := max(0, countChunks(got)-countChunks(replayed))
			switch {
			case lost > 0 && !gap:
				t.Errorf("round %d session %d: the editor received %d chunks, the replay has %d and no gap record: %d received updates lost unmarked", round, i, n, countChunks(replayed), lost)
				unmarked += lost
			case gap:
				totalGaps++
			}
			totalLost += lost
			t.Logf("round %d session %d: received %d chunks, on disk %d, gap record %v", round, i, n, countChunks(replayed), gap)
		}
		again.Stop(20 * time.Second)
		t.Logf("round %d: killed after %v, round took %v", round, tKill.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	}
	t.Logf("%d rounds: %d received chunks not on disk (%d of them with no gap record); %d interrupted turns marked", rounds, totalLost, unmarked, totalGaps)
}

// transcriptName is the file name of session sid's transcript in the
// state directory: the id itself when it is a plain file name, else "x-"
// and its hex (docs/sessions.md, the store's package comment).
func transcriptName(sid string) string {
	plain := sid != "" && len(sid) <= 100 && sid[0] != '.' && !strings.HasPrefix(sid, "x-") &&
		strings.IndexFunc(sid, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
		}) < 0
	if plain {
		return sid + ".ndjson"
	}
	return "x-" + hex.EncodeToString([]byte(sid)) + ".ndjson"
}

// expectedChunks is what the fake agent's "stream n" sends, joined.
func expectedChunks(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "chunk-%04d", i)
	}
	return b.String()
}

// countChunks counts the whole chunks in joined.
func countChunks(joined string) int { return strings.Count(joined, "chunk-") }

// loadReplay opens a connection to srv, loads session sid and returns the
// text of the agent chunks replayed before the first gap record, and
// whether there was one (after them, and nothing of the turn after it).
func loadReplay(t *testing.T, srv *Served, sid string, ws bool) (string, bool, error) {
	c, err := dialServed(t, srv, ws)
	if err != nil {
		return "", false, err
	}
	defer c.stop()
	if m, err := c.Next(sdkWait); err != nil || !m.Get("result").Exists() {
		return "", false, fmt.Errorf("initialize: %s %v", m.Raw, err)
	}
	if err := c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":%q,"cwd":"/tmp","mcpServers":[]}}`, sid), sid); err != nil {
		return "", false, err
	}
	var text strings.Builder
	gap := false
	for {
		m, err := c.Next(sdkWait)
		if err != nil {
			return "", false, fmt.Errorf("during the load: %v", err)
		}
		if m.Get("id").Int() == 2 {
			if !m.Get("result").Exists() {
				return "", false, fmt.Errorf("session/load failed: %s", m.Raw)
			}
			return text.String(), gap, nil
		}
		u := m.Get("params.update")
		if u.Get("sessionUpdate").Str != "agent_message_chunk" {
			continue
		}
		if g := u.Get(`_meta.acp-bridge.gap`); g.Exists() {
			if !g.Get("interrupted").Bool() {
				return "", false, fmt.Errorf("a gap record other than the interrupted turn's: %s", g.Raw)
			}
			gap = true
			continue
		}
		if gap {
			return "", false, fmt.Errorf("an update replayed after the gap record: %s", u.Raw)
		}
		text.WriteString(u.Get("content.text").Str)
	}
}
