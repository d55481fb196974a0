package legacy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/legacy"
	"github.com/gorilla/websocket"
)

// wsAgent serves a WebSocket agent whose behaviour is handle, on a plain or
// TLS httptest server, and returns its ws:// or wss:// URL. Cleanup closes
// the server and every agent-side connection and waits for the handlers.
func wsAgent(t testing.TB, tls bool, up *websocket.Upgrader, handle func(c *websocket.Conn, r *http.Request)) (string, *httptest.Server) {
	t.Helper()
	if up == nil {
		up = &websocket.Upgrader{}
	}
	var (
		mu    sync.Mutex
		conns []*websocket.Conn
		wg    sync.WaitGroup
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, c)
		wg.Add(1)
		mu.Unlock()
		defer wg.Done()
		defer c.Close()
		handle(c, r)
	})
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(func() {
		srv.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/acp"
	return u, srv
}

// echo answers every message with the same message.
func echo(c *websocket.Conn, _ *http.Request) {
	for {
		typ, b, err := c.ReadMessage()
		if err != nil {
			return
		}
		if err := c.WriteMessage(typ, b); err != nil {
			return
		}
	}
}

func dial(t *testing.T, w legacy.WebSocket) *legacy.WSConn {
	t.Helper()
	if w.Logger == nil {
		w.Logger, _ = testLogger(t)
	}
	c, err := w.Dial(t.Context())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readWithin(t *testing.T, c interface {
	Read(context.Context) ([]byte, error)
}, d time.Duration) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return c.Read(ctx)
}

func TestWebSocketTextFramesInOrder(t *testing.T) {
	url, _ := wsAgent(t, false, nil, echo)
	c := dial(t, legacy.WebSocket{URL: url})

	const n = 1000
	errc := make(chan error, 1)
	go func() {
		for i := range n {
			if err := c.Write(t.Context(), fmt.Appendf(nil, `{"seq":%d}`, i)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i := range n {
		got, err := readWithin(t, c, 5*time.Second)
		if err != nil {
			t.Fatalf("Read %d: %v", i, err)
		}
		if want := fmt.Sprintf(`{"seq":%d}`, i); string(got) != want {
			t.Fatalf("frame %d = %s, want %s", i, got, want)
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func TestWebSocketIgnoresBinaryFrames(t *testing.T) {
	url, _ := wsAgent(t, false, nil, func(c *websocket.Conn, _ *http.Request) {
		c.WriteMessage(websocket.BinaryMessage, []byte("\x00binary"))
		c.WriteMessage(websocket.TextMessage, []byte(`{"a":1}`))
		c.WriteMessage(websocket.BinaryMessage, []byte(`{"not":"a frame"}`))
		c.WriteMessage(websocket.TextMessage, []byte(`{"b":2}`))
		c.ReadMessage() // until the bridge closes
	})
	c := dial(t, legacy.WebSocket{URL: url})
	for _, want := range []string{`{"a":1}`, `{"b":2}`} {
		got, err := readWithin(t, c, 5*time.Second)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if string(got) != want {
			t.Fatalf("Read = %s, want %s", got, want)
		}
	}
	if got := c.Skipped(); got != 2 {
		t.Errorf("Skipped() = %d, want 2", got)
	}
}

func TestWebSocketLargeFrameBothWays(t *testing.T) {
	serverGot := make(chan int, 1)
	url, _ := wsAgent(t, false, nil, func(c *websocket.Conn, _ *http.Request) {
		typ, b, err := c.ReadMessage()
		if err != nil {
			return
		}
		serverGot <- len(b)
		c.WriteMessage(typ, b)
		c.ReadMessage()
	})
	c := dial(t, legacy.WebSocket{URL: url})
	frame := []byte(`{"data":"` + strings.Repeat("x", 40<<20) + `"}`)
	errc := make(chan error, 1)
	go func() { errc <- c.Write(t.Context(), frame) }()
	got, err := readWithin(t, c, 30*time.Second)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Write: %v", err)
	}
	if n := <-serverGot; n != len(frame) {
		t.Errorf("agent received one message of %d bytes, want %d", n, len(frame))
	}
	if !bytes.Equal(got, frame) {
		t.Errorf("echoed frame differs: %d bytes, want %d", len(got), len(frame))
	}
}

func TestWebSocketReadLimit(t *testing.T) {
	closeCode := make(chan int, 1)
	url, _ := wsAgent(t, false, nil, func(c *websocket.Conn, _ *http.Request) {
		c.WriteMessage(websocket.TextMessage, []byte(`{"small":1}`))
		c.WriteMessage(websocket.TextMessage, []byte(`{"big":"`+strings.Repeat("y", 2048)+`"}`))
		_, _, err := c.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			closeCode <- ce.Code
		}
		close(closeCode)
	})
	c := dial(t, legacy.WebSocket{URL: url, ReadLimit: 1024})
	if got, err := readWithin(t, c, 5*time.Second); err != nil || string(got) != `{"small":1}` {
		t.Fatalf("Read = %s, %v; want the small frame", got, err)
	}
	_, err := readWithin(t, c, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "1024-byte read limit") {
		t.Fatalf("Read error = %v, want one naming the 1024-byte read limit", err)
	}
	if !errors.Is(err, websocket.ErrReadLimit) {
		t.Errorf("Read error %v does not wrap websocket.ErrReadLimit", err)
	}
	if code := <-closeCode; code != websocket.CloseMessageTooBig {
		t.Errorf("agent saw close code %d, want %d", code, websocket.CloseMessageTooBig)
	}
}

func TestWebSocketHeadersAndSubprotocol(t *testing.T) {
	up := &websocket.Upgrader{Subprotocols: []string{"acp.v1"}}
	url, _ := wsAgent(t, false, up, func(c *websocket.Conn, r *http.Request) {
		b, _ := json.Marshal(map[string]string{
			"auth":        r.Header.Get("Authorization"),
			"custom":      r.Header.Get("X-Custom"),
			"subprotocol": c.Subprotocol(),
			"query":       r.URL.RawQuery,
		})
		c.WriteMessage(websocket.TextMessage, b)
		c.ReadMessage()
	})
	type seen struct{ Auth, Custom, Subprotocol, Query string }
	read := func(t *testing.T, w legacy.WebSocket) seen {
		c := dial(t, w)
		b, err := readWithin(t, c, 5*time.Second)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		var s seen
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("header", func(t *testing.T) {
		log, buf := testLogger(t)
		got := read(t, legacy.WebSocket{
			URL:          url + "?agent=a1",
			Header:       http.Header{"Authorization": {"Bearer s3cret-token"}, "X-Custom": {"yes"}},
			Subprotocols: []string{"other", "acp.v1"},
			Logger:       log,
		})
		want := seen{Auth: "Bearer s3cret-token", Custom: "yes", Subprotocol: "acp.v1", Query: "agent=a1"}
		if got != want {
			t.Errorf("agent saw %+v, want %+v", got, want)
		}
		if strings.Contains(buf.String(), "s3cret") {
			t.Errorf("the log shows a header value:\n%s", buf)
		}
	})
	t.Run("userinfo", func(t *testing.T) {
		got := read(t, legacy.WebSocket{URL: strings.Replace(url, "ws://", "ws://alice:pw@", 1)})
		if want := "Basic YWxpY2U6cHc="; got.Auth != want {
			t.Errorf("agent saw Authorization %q, want %q", got.Auth, want)
		}
	})
}

func TestWebSocketDialErrors(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, err = legacy.WebSocket{URL: "ws://" + addr + "/acp"}.Dial(t.Context())
		if err == nil {
			t.Fatal("Dial succeeded")
		}
		if want := "agent unreachable at ws://" + addr + "/acp: connection refused"; err.Error() != want {
			t.Errorf("Dial error = %q, want %q", err, want)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("Dial error does not wrap ECONNREFUSED")
		}
	})
	t.Run("401", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "invalid token for agent", http.StatusUnauthorized)
		}))
		defer srv.Close()
		u := strings.Replace(srv.URL, "http://", "ws://bob:hunter2@", 1) + "/acp?token=hunter2&agent=x"
		_, err := legacy.WebSocket{URL: u}.Dial(t.Context())
		if err == nil {
			t.Fatal("Dial succeeded")
		}
		msg := err.Error()
		want := "agent at " + strings.Replace(srv.URL, "http://", "ws://", 1) +
			"/acp?agent=REDACTED&token=REDACTED: handshake refused: HTTP 401 Unauthorized: invalid token for agent"
		if msg != want {
			t.Errorf("Dial error = %q, want %q", msg, want)
		}
		if strings.Contains(msg, "hunter2") || strings.Contains(msg, "bob") {
			t.Errorf("Dial error %q shows a secret from the URL", msg)
		}
		if !errors.Is(err, websocket.ErrBadHandshake) {
			t.Errorf("Dial error does not wrap websocket.ErrBadHandshake")
		}
	})
	t.Run("silent", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				accepted <- c
			}
			close(accepted)
		}()
		start := time.Now()
		_, err = legacy.WebSocket{URL: "ws://" + ln.Addr().String(), DialTimeout: 200 * time.Millisecond}.Dial(t.Context())
		if want := "agent at ws://" + ln.Addr().String() + ": no WebSocket handshake within 200ms"; err == nil || err.Error() != want {
			t.Errorf("Dial error = %v, want %q", err, want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Dial took %v with a 200ms DialTimeout", d)
		}
		ln.Close()
		if c, ok := <-accepted; ok {
			c.Close()
		}
	})
	t.Run("closed during handshake", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
			}
		}()
		_, err = legacy.WebSocket{URL: "ws://" + ln.Addr().String() + "/acp"}.Dial(t.Context())
		if want := "agent at ws://" + ln.Addr().String() + "/acp: WebSocket handshake failed: "; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Dial error = %v, want one starting %q", err, want)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := legacy.WebSocket{URL: "ws://127.0.0.1:1/acp"}.Dial(ctx)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "connecting stopped") {
			t.Errorf("Dial error = %v, want one saying the caller stopped it", err)
		}
	})
	t.Run("scheme", func(t *testing.T) {
		_, err := legacy.WebSocket{URL: "http://example.invalid/acp"}.Dial(t.Context())
		if err == nil || !strings.Contains(err.Error(), "scheme must be ws or wss") {
			t.Errorf("Dial error = %v, want a scheme error", err)
		}
	})
}

func TestWebSocketTLS(t *testing.T) {
	url, srv := wsAgent(t, true, nil, echo)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "wss://") {
		t.Fatalf("TLS agent URL %s", url)
	}

	t.Run("with CA file", func(t *testing.T) {
		c := dial(t, legacy.WebSocket{URL: url, CAFile: caFile})
		if err := c.Write(t.Context(), []byte(`{"tls":true}`)); err != nil {
			t.Fatal(err)
		}
		got, err := readWithin(t, c, 5*time.Second)
		if err != nil || string(got) != `{"tls":true}` {
			t.Fatalf("Read = %s, %v", got, err)
		}
	})
	t.Run("system roots", func(t *testing.T) {
		_, err := legacy.WebSocket{URL: url}.Dial(t.Context())
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("Dial error = %v, want a certificate error", err)
		}
	})
	t.Run("not PEM", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.pem")
		os.WriteFile(bad, []byte("not a certificate"), 0o600)
		_, err := legacy.WebSocket{URL: url, CAFile: bad}.Dial(t.Context())
		if err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
			t.Fatalf("Dial error = %v, want a CA file error", err)
		}
	})
}

func TestWebSocketDeadPeer(t *testing.T) {
	agents := map[string]func(*websocket.Conn, *http.Request){
		// Reads (so pings arrive) but never answers them.
		"no pongs": func(c *websocket.Conn, _ *http.Request) {
			c.SetPingHandler(func(string) error { return nil })
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		},
		// Completes the handshake, then goes silent: it swallows the raw
		// bytes, pings included, and writes nothing.
		"silent": func(c *websocket.Conn, _ *http.Request) {
			buf := make([]byte, 512)
			for {
				if _, err := c.NetConn().Read(buf); err != nil {
					return
				}
			}
		},
	}
	for name, agent := range agents {
		t.Run(name, func(t *testing.T) {
			url, _ := wsAgent(t, false, nil, agent)
			// The pong wait starts at dial: the lower bound is measured
			// from before it, the upper one from after it.
			beforeDial := time.Now()
			c := dial(t, legacy.WebSocket{URL: url, PongWait: 300 * time.Millisecond})
			afterDial := time.Now()
			_, err := readWithin(t, c, 5*time.Second)
			if want := "agent WebSocket " + url + ": no pong within 300ms"; err == nil || err.Error() != want {
				t.Fatalf("Read error = %v, want a pong timeout", err)
			}
			if d := time.Since(beforeDial); d < 300*time.Millisecond {
				t.Errorf("dead agent declared %v after the dial began, before the 300ms pong wait", d)
			}
			if d := time.Since(afterDial); d > 4*time.Second {
				t.Errorf("dead agent detected %v after the dial, want about 300ms", d)
			}
		})
	}
}

func TestWebSocketKeepaliveHoldsIdleConnection(t *testing.T) {
	url, _ := wsAgent(t, false, nil, echo)
	c := dial(t, legacy.WebSocket{URL: url, PongWait: 300 * time.Millisecond})
	// A Read waits through more than three PongWaits of silence but for
	// pongs, which alone must keep the deadline off.
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		b, err := readWithin(t, c, 10*time.Second)
		got <- result{b, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("idle Read returned %s, %v", r.b, r.err)
	case <-time.After(time.Second):
	}
	if err := c.Write(t.Context(), []byte(`{"still":"alive"}`)); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.err != nil || string(r.b) != `{"still":"alive"}` {
		t.Fatalf("Read after idle = %s, %v", r.b, r.err)
	}
	// Idle between Reads: the next Read counts silence from its start.
	time.Sleep(time.Second)
	if err := c.Write(t.Context(), []byte(`{"again":true}`)); err != nil {
		t.Fatal(err)
	}
	if b, err := readWithin(t, c, 5*time.Second); err != nil || string(b) != `{"again":true}` {
		t.Fatalf("Read after an idle caller = %s, %v", b, err)
	}
}

func TestWebSocketAgentCloses(t *testing.T) {
	cases := []struct {
		name  string
		agent func(*websocket.Conn, *http.Request)
		want  string // after the agent's URL
	}{
		{"close frame", func(c *websocket.Conn, _ *http.Request) {
			c.WriteMessage(websocket.TextMessage, []byte(`{"last":true}`))
			c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "restarting"), time.Now().Add(time.Second))
			c.ReadMessage()
		}, " closed: 1001 (going away): restarting"},
		{"dropped", func(c *websocket.Conn, _ *http.Request) {
			c.WriteMessage(websocket.TextMessage, []byte(`{"last":true}`))
			c.NetConn().Close()
		}, " closed: 1006 (abnormal closure)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := wsAgent(t, false, nil, tc.agent)
			c := dial(t, legacy.WebSocket{URL: url})
			if got, err := readWithin(t, c, 5*time.Second); err != nil || string(got) != `{"last":true}` {
				t.Fatalf("Read = %s, %v; want the last frame first", got, err)
			}
			for range 2 { // the error sticks
				_, err := readWithin(t, c, 5*time.Second)
				if want := "agent WebSocket " + url + tc.want; err == nil || err.Error() != want {
					t.Fatalf("Read error = %v, want %q", err, want)
				}
			}
		})
	}
}

func TestWebSocketCloseUnblocksRead(t *testing.T) {
	closeCode := make(chan int, 1)
	url, _ := wsAgent(t, false, nil, func(c *websocket.Conn, _ *http.Request) {
		_, _, err := c.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			closeCode <- ce.Code
		}
		close(closeCode)
	})
	c := dial(t, legacy.WebSocket{URL: url})
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(context.Background())
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, legacy.ErrClosed) {
			t.Errorf("pending Read returned %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not unblock Read")
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Read(t.Context()); !errors.Is(err, legacy.ErrClosed) {
		t.Errorf("Read after Close = %v, want ErrClosed", err)
	}
	if err := c.Write(t.Context(), []byte(`{}`)); !errors.Is(err, legacy.ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if code := <-closeCode; code != websocket.CloseNormalClosure {
		t.Errorf("agent saw close code %d, want %d", code, websocket.CloseNormalClosure)
	}
}

// A Read's ctx ends a pending Read promptly, and the connection with it:
// later Reads fail at once, and Close still says goodbye properly.
func TestWebSocketReadCancel(t *testing.T) {
	closeCode := make(chan int, 1)
	url, _ := wsAgent(t, false, nil, func(c *websocket.Conn, _ *http.Request) {
		_, _, err := c.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			closeCode <- ce.Code
		}
		close(closeCode)
	})
	c := dial(t, legacy.WebSocket{URL: url})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(ctx)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if err != context.Canceled {
			t.Fatalf("cancelled Read = %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("cancelling ctx did not end Read")
	}
	for range 2 {
		_, err := readWithin(t, c, 2*time.Second)
		if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "cancelled Read") {
			t.Fatalf("Read after a cancelled Read = %v, want an error saying so", err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if code := <-closeCode; code != websocket.CloseNormalClosure {
		t.Errorf("agent saw close code %d, want %d", code, websocket.CloseNormalClosure)
	}
}

// A ctx that ends between Reads (each Read with its own ctx, cancelled once
// it returns) leaves the connection as it was.
func TestWebSocketReadCtxEndsBetweenReads(t *testing.T) {
	url, _ := wsAgent(t, false, nil, echo)
	c := dial(t, legacy.WebSocket{URL: url})
	done, cancelDone := context.WithCancel(t.Context())
	cancelDone()
	if _, err := c.Read(done); err != context.Canceled {
		t.Fatalf("Read with a done ctx = %v, want context.Canceled", err)
	}
	for i := range 50 {
		want := fmt.Sprintf(`{"i":%d}`, i)
		if err := c.Write(t.Context(), []byte(want)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		got, err := c.Read(ctx)
		cancel()
		if err != nil || string(got) != want {
			t.Fatalf("Read %d = %s, %v; want %s", i, got, err, want)
		}
	}
	// The same ctx again after it was cancelled, then a fresh one.
	ctx, cancel := context.WithCancel(t.Context())
	if err := c.Write(t.Context(), []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Read(ctx); err != nil || string(got) != `{"x":1}` {
		t.Fatalf("Read = %s, %v", got, err)
	}
	cancel()
	time.Sleep(10 * time.Millisecond) // let the ctx's callback run
	if _, err := c.Read(ctx); err != context.Canceled {
		t.Fatalf("Read with the cancelled ctx = %v, want context.Canceled", err)
	}
	if err := c.Write(t.Context(), []byte(`{"x":2}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := readWithin(t, c, 5*time.Second); err != nil || string(got) != `{"x":2}` {
		t.Fatalf("Read after a cancelled ctx = %s, %v", got, err)
	}
}

func TestWebSocketSlowMessageIsNotADeadPeer(t *testing.T) {
	// One frame trickles in over about three PongWaits from an agent that
	// never answers pings: the bytes themselves must keep the link alive.
	payload := []byte(`{"slow":"` + strings.Repeat("z", 990) + `"}`)
	url, _ := wsAgent(t, false, nil, func(c *websocket.Conn, _ *http.Request) {
		nc := c.NetConn()
		go func() { // swallow pings without answering
			buf := make([]byte, 512)
			for {
				if _, err := nc.Read(buf); err != nil {
					return
				}
			}
		}()
		// An unmasked final text frame with a 16-bit length (RFC 6455 §5.2).
		header := []byte{0x81, 126, byte(len(payload) >> 8), byte(len(payload))}
		if _, err := nc.Write(header); err != nil {
			return
		}
		for chunk := range slices.Chunk(payload, len(payload)/10+1) {
			time.Sleep(100 * time.Millisecond)
			if _, err := nc.Write(chunk); err != nil {
				return
			}
		}
	})
	c := dial(t, legacy.WebSocket{URL: url, PongWait: 300 * time.Millisecond})
	got, err := readWithin(t, c, 5*time.Second)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Errorf("Read = %d bytes, want the %d-byte slow message", len(got), len(payload))
	}
}

// writeRawFrame writes one unmasked frame, as an agent (a server) sends it
// (RFC 6455 §5.2): op is 1 for text, 2 for binary, 0 for a continuation.
func writeRawFrame(w io.Writer, op byte, fin bool, payload []byte) error {
	if fin {
		op |= 0x80
	}
	var h []byte
	switch n := len(payload); {
	case n < 126:
		h = []byte{op, byte(n)}
	case n < 1<<16:
		h = []byte{op, 126, byte(n >> 8), byte(n)}
	default:
		h = binary.BigEndian.AppendUint64([]byte{op, 127}, uint64(n))
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// pattern returns n bytes of JSON-safe text that differs from offset to
// offset, so that a misplaced chunk shows.
func pattern(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte((off+i)%23)
	}
	return b
}

// Messages of every size around the reader's internal boundaries arrive
// whole, in exact-size slices, whether sent in one frame or in fragments,
// with binary messages of the same sizes skipped between them.
func TestWebSocketMessageSizes(t *testing.T) {
	sizes := []int{0, 1, 200, 4095, 4096, 4097, 8192, 64 << 10, 64<<10 + 4095, 64<<10 + 4096, 64<<10 + 4097, 200 << 10, 1 << 20}
	fragments := []int{0, 1, 1000, 4096, 70000} // 0: one frame
	url, _ := wsAgent(t, false, nil, func(c *websocket.Conn, _ *http.Request) {
		w := bufio.NewWriter(c.NetConn())
		for _, frag := range fragments {
			for _, n := range sizes {
				writeRawFrame(w, 2, true, pattern(1, n))
				msg := pattern(n, n)
				if frag == 0 || n == 0 {
					writeRawFrame(w, 1, true, msg)
					continue
				}
				op := byte(1)
				for len(msg) > 0 {
					k := min(frag, len(msg))
					writeRawFrame(w, op, k == len(msg), msg[:k])
					msg, op = msg[k:], 0
				}
			}
		}
		w.Flush()
		c.ReadMessage()
	})
	c := dial(t, legacy.WebSocket{URL: url})
	for _, frag := range fragments {
		for _, n := range sizes {
			// A MiB in one-byte fragments is a million frames: under -race
			// on a loaded machine that takes seconds, and this test is about
			// what arrives, not how fast.
			got, err := readWithin(t, c, 60*time.Second)
			if err != nil {
				t.Fatalf("Read of %d bytes in fragments of %d: %v", n, frag, err)
			}
			if !bytes.Equal(got, pattern(n, n)) {
				t.Fatalf("Read of %d bytes in fragments of %d: got %d bytes, not the message", n, frag, len(got))
			}
			if got == nil || cap(got) != n {
				t.Errorf("Read of %d bytes: cap %d (nil %v), want an exact-size slice", n, cap(got), got == nil)
			}
		}
	}
	if want := int64(len(sizes) * len(fragments)); c.Skipped() != want {
		t.Errorf("Skipped() = %d, want %d", c.Skipped(), want)
	}
}

// A 60 MiB message, just under a 64 MiB ReadLimit and sent in 1 MiB
// fragments, arrives whole.
func TestWebSocket60MiBMessage(t *testing.T) {
	const size, frag = 60 << 20, 1 << 20
	url, _ := wsAgent(t, false, nil, func(c *websocket.Conn, _ *http.Request) {
		nc := c.NetConn()
		for off := 0; off < size; off += frag {
			op := byte(0)
			if off == 0 {
				op = 1
			}
			if err := writeRawFrame(nc, op, off+frag >= size, pattern(off, frag)); err != nil {
				return
			}
		}
		c.ReadMessage()
	})
	c := dial(t, legacy.WebSocket{URL: url, ReadLimit: 64 << 20})
	got, err := readWithin(t, c, 60*time.Second)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(got) != size {
		t.Fatalf("Read = %d bytes, want %d", len(got), size)
	}
	for off := 0; off < size; off += frag {
		if !bytes.Equal(got[off:off+frag], pattern(off, frag)) {
			t.Fatalf("bytes at %d differ from what the agent sent", off)
		}
	}
}

// Close may be called twice at once, while a Read waits and a Write is
// under way; both end with ErrClosed, and no goroutine is left (TestMain
// checks).
func TestWebSocketConcurrentClose(t *testing.T) {
	stop := make(chan struct{})
	url, _ := wsAgent(t, false, nil, func(c *websocket.Conn, _ *http.Request) {
		c.ReadMessage()
		<-stop // read no more: the bridge's Write blocks
	})
	t.Cleanup(func() { close(stop) }) // before wsAgent's cleanup
	c := dial(t, legacy.WebSocket{URL: url})
	readErr := make(chan error, 1)
	go func() {
		_, err := c.Read(t.Context())
		readErr <- err
	}()
	writeErr := make(chan error, 1)
	go func() {
		big := []byte(`"` + strings.Repeat("w", 32<<20) + `"`)
		for {
			if err := c.Write(t.Context(), big); err != nil {
				writeErr <- err
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	wg.Wait()
	for name, ch := range map[string]chan error{"Read": readErr, "Write": writeErr} {
		select {
		case err := <-ch:
			if !errors.Is(err, legacy.ErrClosed) {
				t.Errorf("%s during Close = %v, want ErrClosed", name, err)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("Close did not end %s", name)
		}
	}
}

// Read returns each message in memory of its own, of any size and
// however it was read (from the connection's buffer, or gathered in
// pieces): appending to one cannot write into the next, and each stays
// intact whatever is read after it.
func TestWebSocketReadOwns(t *testing.T) {
	sizes := []int{1, 200, 4095, 4096, 4097, 64 << 10, 3, 1 << 20, 5}
	url, _ := wsAgent(t, false, nil, func(c *websocket.Conn, _ *http.Request) {
		for round := range 2 {
			for _, n := range sizes {
				if err := c.WriteMessage(websocket.TextMessage, pattern(n+round, n)); err != nil {
					return
				}
			}
		}
		c.ReadMessage()
	})
	c := dial(t, legacy.WebSocket{URL: url})
	type message struct{ got, want []byte }
	var kept []message // checked after all the reads
	for round := range 2 {
		for _, n := range sizes {
			got, err := readWithin(t, c, 30*time.Second)
			want := pattern(n+round, n)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Read of %d bytes: %v, %d bytes, not the message", n, err, len(got))
			}
			if cap(got) != len(got) {
				t.Errorf("Read of %d bytes: cap %d: an append would write past the message", n, cap(got))
			}
			kept = append(kept, message{got, want})
		}
	}
	for _, m := range kept {
		if !bytes.Equal(m.got, m.want) {
			t.Errorf("a %d-byte message changed after later reads", len(m.want))
		}
	}
}
