package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// replayEngine answers session/load and session/resume as a durable
// session does: first n updates of the session (its history, each about
// size bytes), then the answer. Anything else is answered at once.
func replayEngine(n, size int) Engine {
	text := strings.Repeat("h", size)
	return func(ctx context.Context, id string, in io.Reader, out io.Writer) error {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					SessionID string `json:"sessionId"`
				} `json:"params"`
			}
			if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
				continue
			}
			if m.Method == "session/load" || m.Method == "session/resume" {
				for i := range n {
					fmt.Fprintf(out, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d %s"}}}}`+"\n", m.Params.SessionID, i, text)
				}
			}
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
		}
		return nil
	}
}

// sseEvent is one message read from one of a connection's streams.
type sseEvent struct {
	stream string // "connection" or the session's id
	msg    json.RawMessage
}

// readSSE sends every message of the stream body to events until it ends.
func readSSE(stream string, body io.Reader, events chan<- sseEvent) {
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events <- sseEvent{stream, json.RawMessage(data)}
		}
	}
}

// TestReplayBeforeAnswer: the history a session/load or session/resume
// replays reaches the client on the stream its answer comes on, all of it
// before the answer, whether the client reads the session's stream too or
// only the connection's, and when the history is far larger than what a
// connection buffers (it streams, the engine held while the client
// reads). The official SDK's client opens the session's stream before it
// sends either request and takes the answer from either stream.
func TestReplayBeforeAnswer(t *testing.T) {
	const stall = 2 * time.Minute // must not be played
	for _, c := range []struct {
		method      string
		sessionRead bool // the client reads the session's stream too
		n, size     int
	}{
		{"session/load", true, 2000, 100},
		{"session/load", false, 2000, 100},
		{"session/load", true, 2000, 1000},  // 2 MB: over MaxBuffered
		{"session/load", false, 2000, 1000}, // 2 MB: over MaxBuffered
		{"session/resume", true, 2000, 100},
		{"session/resume", true, 2000, 1000},
	} {
		name := fmt.Sprintf("%s/session stream %v/%d×%dB", c.method, c.sessionRead, c.n, c.size)
		t.Run(name, func(t *testing.T) {
			s := &Server{Engine: replayEngine(c.n, c.size), MaxBuffered: 64 << 10, StallTimeout: stall}
			ts := httptest.NewServer(s)
			defer ts.Close()
			defer s.Shutdown(context.Background())
			resp := do(t, "POST", ts.URL, map[string]string{"Content-Type": "application/json"}, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
			id := resp.Header.Get(HeaderConnectionID)
			if id == "" {
				t.Fatal("no connection id")
			}
			events := make(chan sseEvent, 64)
			open := func(session string) {
				h := map[string]string{"Accept": "text/event-stream", HeaderConnectionID: id}
				stream := "connection"
				if session != "" {
					h[HeaderSessionID] = session
					stream = session
				}
				resp := do(t, "GET", ts.URL, h, "")
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s stream: %d", stream, resp.StatusCode)
				}
				go readSSE(stream, resp.Body, events)
			}
			open("")
			if c.sessionRead {
				open("s-1")
			}
			post := do(t, "POST", ts.URL, map[string]string{"Content-Type": "application/json", HeaderConnectionID: id, HeaderSessionID: "s-1"},
				`{"jsonrpc":"2.0","id":"load","method":"`+c.method+`","params":{"sessionId":"s-1","cwd":"/w","mcpServers":[]}}`)
			if post.StatusCode != http.StatusAccepted {
				t.Fatalf("POST %s: %d", c.method, post.StatusCode)
			}
			before := map[string]int{} // updates read per stream
			deadline := time.After(stall / 2)
			for {
				var ev sseEvent
				select {
				case ev = <-events:
				case <-deadline:
					t.Fatalf("no answer to %s; updates read so far %v", c.method, before)
				}
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				_ = json.Unmarshal(ev.msg, &m)
				if m.Method == "session/update" {
					before[ev.stream]++
					continue
				}
				if string(m.ID) != `"load"` {
					t.Fatalf("unexpected message on the %s stream: %s", ev.stream, ev.msg)
				}
				if before[ev.stream] != c.n || len(before) != 1 {
					t.Errorf("the answer came on the %s stream after %v updates per stream, want all %d there before it", ev.stream, before, c.n)
				}
				return
			}
		})
	}
}
