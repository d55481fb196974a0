package tests

// What acp-bridge serve refuses, and how: each refusal a clear HTTP status
// and message, on plain HTTP and on a WebSocket upgrade alike, and nothing
// served (no connection opened, no agent started) for it.

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

// refusalToken is the bearer token of TestServeRefusals; it must never
// appear in serve's log.
const refusalToken = "s3cret-token-4f9a2c"

// servePost POSTs body to url with header and Content-Type: application/json
// and returns the status, the headers and the body of the answer.
func servePost(t *testing.T, url string, header http.Header, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if header != nil {
		req.Header = header.Clone()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// serveDialWS upgrades to a WebSocket; for a refused upgrade it returns the
// status and body of the HTTP answer.
func serveDialWS(t *testing.T, url string, header http.Header) (*websocket.Conn, int, string) {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	c, resp, err := d.Dial(url, header)
	if err == nil {
		t.Cleanup(func() { c.Close() })
		return c, http.StatusSwitchingProtocols, ""
	}
	if resp == nil {
		t.Fatalf("WebSocket dial %s: %v (no HTTP answer: the socket was dropped)", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return nil, resp.StatusCode, string(b)
}

func TestServeRefusals(t *testing.T) {
	agent := ChildTransport("acp").Start(t)
	srv := StartServe(t, append([]string{"--token-env", "REMOTE_TOKEN", "--max-connections", "2", "--max-message", "4KiB"}, agent.Args...),
		append([]string{"REMOTE_TOKEN=" + refusalToken}, agent.Env...))
	auth := http.Header{"Authorization": {"Bearer " + refusalToken}}
	wrong := http.Header{"Authorization": {"Bearer not-the-token"}}
	foreign := auth.Clone()
	foreign.Set("Origin", "https://evil.example")

	for _, tc := range []struct {
		name   string
		header http.Header
		status int
		says   string
	}{
		{"no token", nil, http.StatusUnauthorized, "Authorization: Bearer"},
		{"wrong token", wrong, http.StatusUnauthorized, "token is wrong"},
		{"foreign Origin", foreign, http.StatusForbidden, "--allow-origin https://evil.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := servePost(t, srv.Endpoint, tc.header, initializeBody)
			if status != tc.status || !strings.Contains(body, tc.says) {
				t.Errorf("POST initialize: %d %q, want %d saying %q", status, body, tc.status, tc.says)
			}
			if tc.status == http.StatusUnauthorized && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate: Bearer (got %q)", h.Get("WWW-Authenticate"))
			}
			if h.Get("Acp-Connection-Id") != "" {
				t.Errorf("a refused initialize got a connection id")
			}
			_, status, body = serveDialWS(t, srv.WSURL(), tc.header)
			if status != tc.status || !strings.Contains(body, tc.says) {
				t.Errorf("WebSocket upgrade: %d %q, want %d saying %q", status, body, tc.status, tc.says)
			}
		})
	}

	t.Run("oversized message", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{},"_meta":{"pad":"` +
			strings.Repeat("x", 5000) + `"}}}`
		status, _, body := servePost(t, srv.Endpoint, auth, big)
		if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "limit of 4096 bytes") {
			t.Errorf("oversized POST: %d %q, want 413 naming the limit", status, body)
		}
		ws, status, body := serveDialWS(t, srv.WSURL(), auth)
		if ws == nil {
			t.Fatalf("WebSocket with the token refused: %d %s", status, body)
		}
		if err := ws.WriteMessage(websocket.TextMessage, []byte(big)); err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, _, err := ws.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
			t.Errorf("oversized WebSocket message: read %v, want close 1009", err)
		}
	})

	t.Run("too many connections", func(t *testing.T) {
		// The oversized WebSocket's connection may still be closing; wait
		// until two new ones are open, then a third is refused.
		var open []*websocket.Conn
		deadline := time.Now().Add(30 * time.Second)
		for len(open) < 2 && time.Now().Before(deadline) {
			ws, status, _ := serveDialWS(t, srv.WSURL(), auth)
			if ws != nil {
				open = append(open, ws)
				continue
			}
			if status != http.StatusServiceUnavailable {
				t.Fatalf("WebSocket upgrade: %d", status)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(open) < 2 {
			t.Fatalf("could not open two connections")
		}
		_, status, body := serveDialWS(t, srv.WSURL(), auth)
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "too many connections") {
			t.Errorf("third WebSocket: %d %q, want 503 too many connections", status, body)
		}
		status, h, body := servePost(t, srv.Endpoint, auth, initializeBody)
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "--max-connections") || h.Get("Retry-After") == "" {
			t.Errorf("third connection by POST: %d %q (Retry-After %q), want 503 naming --max-connections", status, body, h.Get("Retry-After"))
		}
		// The open ones still work.
		if err := open[0].WriteMessage(websocket.TextMessage, []byte(initializeBody)); err != nil {
			t.Fatal(err)
		}
		_ = open[0].SetReadDeadline(time.Now().Add(sdkWait))
		_, msg, err := open[0].ReadMessage()
		if err != nil || !bytes.Contains(msg, []byte(`"result"`)) {
			t.Errorf("initialize on an accepted connection: %s, %v", msg, err)
		}
	})

	log := srv.Stderr()
	// Accepted: the oversized WebSocket and the two of the limit.
	if n := strings.Count(log, "connection opened"); n != 3 {
		t.Errorf("serve opened %d connections, want 3 (the refused ones must open none)", n)
	}
	if strings.Contains(log, refusalToken) {
		t.Errorf("the bearer token appears in serve's log")
	}
}

// TestServeBeyondLoopbackNeedsToken: serve refuses to listen beyond
// loopback without a bearer token, saying how to give one.
func TestServeBeyondLoopbackNeedsToken(t *testing.T) {
	cmd := exec.Command(BridgeBin, "serve", "--listen", "0.0.0.0:0", "--", "true")
	cmd.Env = hermeticEnv(t, nil)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("serve --listen 0.0.0.0:0 without a token: %v, want exit status 2\n%s", err, out)
	}
	if !strings.Contains(string(out), "--token-env") || strings.Contains(string(out), "listening") {
		t.Errorf("refusal does not say to use --token-env, or it listened anyway:\n%s", out)
	}
	cmd = exec.Command(BridgeBin, "serve", "--listen", "127.0.0.1:0", "--token-env", "UNSET_TOKEN_VAR", "--", "true")
	cmd.Env = hermeticEnv(t, nil)
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "UNSET_TOKEN_VAR is empty or not set") {
		t.Errorf("serve with an empty --token-env variable: %v\n%s", err, out)
	}
}

// TestServeHTTP2: serve speaks HTTP/2 (the RFD asks it of Streamable
// HTTP) in clear text with prior knowledge, next to HTTP/1.1.
func TestServeHTTP2(t *testing.T) {
	agent := ChildTransport("acp").Start(t)
	srv := StartServe(t, append([]string{"--no-sessions"}, agent.Args...), agent.Env)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &p}}
	resp, err := client.Post(srv.Endpoint, "application/json", strings.NewReader(initializeBody))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK || resp.Header.Get("Acp-Connection-Id") == "" {
		t.Errorf("initialize over h2c: %s %d %s", resp.Proto, resp.StatusCode, b)
	}
}

// TestServeSameOrigin: a web client served from the endpoint's own host
// (a reverse proxy that serves both) is served, over POST and WebSocket,
// without --allow-origin, as browsers and gorilla/websocket judge
// same-origin; a foreign origin is still refused on both, and so is a page
// that rebinds its own name to the loopback endpoint, whose requests are
// same-origin too.
func TestServeSameOrigin(t *testing.T) {
	agent := ChildTransport("acp").Start(t)
	srv := StartServe(t, append([]string{"--no-sessions"}, agent.Args...), agent.Env)
	u, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	own := "http://" + u.Host
	wsURL := "ws://" + u.Host + u.Path
	if status, _, body := servePost(t, srv.Endpoint, http.Header{"Origin": {own}}, initializeBody); status != http.StatusOK {
		t.Errorf("POST from the endpoint's own origin %s: %d %s", own, status, body)
	}
	if _, status, body := serveDialWS(t, wsURL, http.Header{"Origin": {own}}); status != http.StatusSwitchingProtocols {
		t.Errorf("WebSocket from the endpoint's own origin %s: %d %s", own, status, body)
	}
	const foreign = "http://editor.example"
	if status, _, body := servePost(t, srv.Endpoint, http.Header{"Origin": {foreign}}, initializeBody); status != http.StatusForbidden {
		t.Errorf("POST from a foreign origin: %d %s, want 403", status, body)
	}
	if _, status, body := serveDialWS(t, wsURL, http.Header{"Origin": {foreign}}); status != http.StatusForbidden {
		t.Errorf("WebSocket from a foreign origin: %d %s, want 403", status, body)
	}
	req, err := http.NewRequest(http.MethodPost, srv.Endpoint, strings.NewReader(initializeBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Host = "rebound.example:" + u.Port()
	req.Header.Set("Origin", "http://"+req.Host)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a same-origin request for the rebound host %s: %d %s, want 403", req.Host, resp.StatusCode, b)
	}
}
