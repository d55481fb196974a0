package cli

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestLimitListenerTakesAStrangersPlace: when every socket is in use, a new
// one takes the place of the oldest that has not authenticated; an
// authenticated one (over HTTP/1.1 or HTTP/2 in clear text) is never taken,
// and a new socket finds no place when all have authenticated.
func TestLimitListenerTakesAStrangersPlace(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(raw, 3)
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/auth" {
				trustSocket(r)
			}
			io.WriteString(w, "ok")
		}),
		ConnContext: socketContext,
	}
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	go hs.Serve(ln)
	defer hs.Close()
	addr := raw.Addr().String()

	get := func(c net.Conn, path string) error {
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err != nil
	}

	editor := dial()
	if err := get(editor, "/auth"); err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2 := &http.Client{Transport: &http.Transport{Protocols: &p}}
	defer h2.CloseIdleConnections()
	resp, err := h2.Get("http://" + addr + "/auth")
	if err != nil || resp.ProtoMajor != 2 {
		t.Fatalf("HTTP/2 request: %v %v", resp, err)
	}
	resp.Body.Close()
	stranger := dial()
	waitOpen(t, ln, 3)
	newcomer := dial()
	if !closed(stranger) {
		t.Fatalf("the stranger's socket was not closed for a new one")
	}
	if err := get(newcomer, "/"); err != nil {
		t.Fatalf("the new socket: %v", err)
	}
	if err := get(editor, "/"); err != nil {
		t.Fatalf("the editor's socket after a new one came: %v", err)
	}
	if resp, err := h2.Get("http://" + addr + "/"); err != nil || resp.ProtoMajor != 2 {
		t.Fatalf("the editor's HTTP/2 connection after a new one came: %v", err)
	} else {
		resp.Body.Close()
	}
	if err := get(newcomer, "/auth"); err != nil {
		t.Fatal(err)
	}
	full := dial()
	if !closed(full) {
		t.Fatalf("a socket found a place when all had authenticated")
	}
	if err := get(editor, "/"); err != nil {
		t.Fatalf("the editor's socket: %v", err)
	}
}

func waitOpen(t *testing.T, l *limitListener, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l.mu.Lock()
		k := len(l.open)
		l.mu.Unlock()
		if k == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sockets open, want %d", k, n)
		}
	}
}
