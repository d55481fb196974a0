package remote

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"
)

// TestBodiesBounded: a POST is looked up before its body is read, one
// without a connection id is an initialize of at most MaxInitialize bytes,
// and the body bytes read at once are bounded per connection and per
// server, with a 503 that says what to do beyond them.
func TestBodiesBounded(t *testing.T) {
	s := &Server{Engine: echoEngine, MaxMessage: 4 << 20, MaxReading: 6 << 20}
	ts := httptest.NewServer(s)
	defer ts.Close()
	defer s.Shutdown(context.Background())
	resp := do(t, "POST", ts.URL, map[string]string{"Content-Type": "application/json"}, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	id := resp.Header.Get(HeaderConnectionID)
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("initialize: %d", resp.StatusCode)
	}

	// post sends a body of n bytes, of unknown length when chunked, that
	// stalls after stall bytes (stall ≥ 0) until release is closed.
	type sent struct {
		status int
		text   string
	}
	post := func(conn string, n int64, chunked bool, stall int64, release chan struct{}) sent {
		body := &countingBody{n: n, stall: stall, release: release}
		req, _ := http.NewRequest("POST", ts.URL, body)
		req.ContentLength = n
		if chunked {
			req.ContentLength = -1
		}
		req.Header.Set("Content-Type", "application/json")
		if conn != "" {
			req.Header.Set(HeaderConnectionID, conn)
		}
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			return sent{status: -1, text: err.Error()}
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return sent{resp.StatusCode, string(b) + " Retry-After=" + resp.Header.Get("Retry-After")}
	}

	// Bodies that stall after 64 KiB until the test ends: answered, so
	// not read whole first.
	never := make(chan struct{})
	defer close(never)
	if got := post(strings.Repeat("f", 32), 3<<20, false, 64<<10, never); got.status != 404 {
		t.Errorf("3 MiB to an unknown connection: %d %q, want 404 before the body is read", got.status, got.text)
	}
	if got := post("", 2<<20, false, 64<<10, never); got.status != 413 || !strings.Contains(got.text, "must be initialize") {
		t.Errorf("2 MiB without a connection id: %d %q, want 413 saying it must be initialize", got.status, got.text)
	}
	if got := post("", 2<<20, true, -1, nil); got.status != 413 {
		t.Errorf("2 MiB chunked without a connection id: %d %q, want 413", got.status, got.text)
	}

	// A 3 MiB message held mid-body: the connection may send at most
	// 4 MiB at once, the server read 6 MiB.
	release := make(chan struct{})
	held := make(chan sent, 1)
	go func() { held <- post(id, 3<<20, false, 1<<20, release) }()
	waitFor(t, func() bool { return readingNow(s) >= 3<<20 })
	if got := post(id, 2<<20, false, -1, nil); got.status != 503 || !strings.Contains(got.text, "--max-message") || !strings.Contains(got.text, "Retry-After=1") {
		t.Errorf("2 MiB more on the same connection: %d %q, want 503 naming --max-message, with Retry-After", got.status, got.text)
	}
	if got := post(id, 2<<20, true, -1, nil); got.status != 503 {
		t.Errorf("2 MiB more chunked on the same connection: %d %q, want 503", got.status, got.text)
	}
	if got := post(id, 1<<10, false, -1, nil); got.status != 400 {
		// A small one fits (it is not JSON: 400 once read).
		t.Errorf("1 KiB more on the same connection: %d %q, want it read (400: not JSON)", got.status, got.text)
	}
	// Another connection: 3 MiB held + 4 MiB > 6 MiB for the server.
	resp = do(t, "POST", ts.URL, map[string]string{"Content-Type": "application/json"}, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	other := resp.Header.Get(HeaderConnectionID)
	if got := post(other, 4<<20, false, -1, nil); got.status != 503 || !strings.Contains(got.text, "twice --max-message") {
		t.Errorf("4 MiB on another connection while 3 MiB are read: %d %q, want 503 naming the server's limit", got.status, got.text)
	}
	close(release)
	if got := <-held; got.status != 400 {
		t.Errorf("the held message: %d %q, want it read whole (400: not JSON)", got.status, got.text)
	}
	waitFor(t, func() bool { return readingNow(s) == 0 })
	if got := post(other, 4<<20, false, -1, nil); got.status != 400 {
		t.Errorf("4 MiB on another connection once nothing is read: %d %q, want it read (400: not JSON)", got.status, got.text)
	}

	// Shutdown ends a body read in progress.
	release = make(chan struct{})
	defer close(release)
	go func() { held <- post(id, 3<<20, false, 1<<20, release) }()
	waitFor(t, func() bool { return readingNow(s) >= 3<<20 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go s.Shutdown(ctx)
	select {
	case got := <-held:
		if got.status != 503 || !strings.Contains(got.text, "shutting down") {
			t.Errorf("a body read at shutdown: %d %q, want 503 shutting down", got.status, got.text)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("a body read in progress held up Shutdown")
	}
}

func readingNow(s *Server) int64 {
	s.reading.mu.Lock()
	defer s.reading.mu.Unlock()
	return s.reading.used
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
	}
}

// countingBody is n bytes of 'x' that counts what was read of it and, past
// stall bytes (stall ≥ 0), waits for release.
type countingBody struct {
	n, stall int64
	release  chan struct{}
	read     atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	r := b.read.Load()
	if r >= b.n {
		return 0, io.EOF
	}
	if b.stall >= 0 && r >= b.stall {
		<-b.release
		b.stall = -1
	}
	k := min(int64(len(p)), b.n-r)
	if b.stall >= 0 {
		k = min(k, b.stall-r)
	}
	for i := range k {
		p[i] = 'x'
	}
	b.read.Add(k)
	return int(k), nil
}

// TestRefusalLog: a crowd of refused strangers logs one line a second, with
// the count of the ones it did not log.
func TestRefusalLog(t *testing.T) {
	var out strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Output: &out})
	var l refusalLog
	for range 100 {
		l.warn(log, "refused a request without a bearer token", "remote", "192.0.2.1:1")
	}
	if n := strings.Count(out.String(), "refused a request"); n != 1 {
		t.Fatalf("100 refusals at once logged %d lines, want 1:\n%s", n, out.String())
	}
	l.mu.Lock()
	l.last = l.last.Add(-time.Second)
	l.mu.Unlock()
	l.warn(log, "refused a request without a bearer token", "remote", "192.0.2.1:1")
	if !strings.Contains(out.String(), "refused_since_last_logged=99") {
		t.Errorf("the next line a second later does not count the 99 not logged:\n%s", out.String())
	}
}

// TestWebSocketBodiesBounded: a WebSocket message longer than wsFree waits
// for its share of the server's MaxReading while another one is read; a
// short one does not wait.
func TestWebSocketBodiesBounded(t *testing.T) {
	s := &Server{Engine: echoEngine, MaxMessage: 1 << 20, MaxReading: 1 << 20}
	ts := httptest.NewServer(s)
	defer ts.Close()
	defer s.Shutdown(context.Background())
	dial := func() *websocket.Conn {
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(ts.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		return ws
	}
	big := func(id int) string {
		return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"x","params":{"pad":"` + strings.Repeat("x", 200<<10) + `"}}`
	}
	// answers reads ws's messages, the first 40 bytes of each.
	answers := func(ws *websocket.Conn) chan string {
		ch := make(chan string, 8)
		go func() {
			defer close(ch)
			for {
				_, msg, err := ws.ReadMessage()
				if err != nil {
					return
				}
				ch <- string(msg[:min(len(msg), 40)])
			}
		}()
		return ch
	}
	next := func(ch chan string, d time.Duration) (string, bool) {
		select {
		case m, ok := <-ch:
			return m, ok
		case <-time.After(d):
			return "", false
		}
	}
	a, b := dial(), dial()
	fromA, fromB := answers(a), answers(b)
	// a's message, its first 100 KiB sent: it holds the server's share.
	w, err := a.NextWriter(websocket.TextMessage)
	if err != nil {
		t.Fatal(err)
	}
	msgA := big(1)
	if _, err := io.WriteString(w, msgA[:100<<10]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return readingNow(s) == 1<<20 })
	if err := b.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":2,"method":"x","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	if got, ok := next(fromB, 20*time.Second); !ok || !strings.Contains(got, `"id":2`) {
		t.Fatalf("a short message while another is read: %q", got)
	}
	if err := b.WriteMessage(websocket.TextMessage, []byte(big(3))); err != nil {
		t.Fatal(err)
	}
	if got, ok := next(fromB, 500*time.Millisecond); ok {
		t.Fatalf("a long message was read while another held the server's share: %q", got)
	}
	if _, err := io.WriteString(w, msgA[100<<10:]); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got, ok := next(fromA, 20*time.Second); !ok || !strings.Contains(got, `"id":1`) {
		t.Fatalf("the long message being read: %q", got)
	}
	if got, ok := next(fromB, 20*time.Second); !ok || !strings.Contains(got, `"id":3`) {
		t.Fatalf("the long message that waited: %q", got)
	}
	waitFor(t, func() bool { return readingNow(s) == 0 })
}
