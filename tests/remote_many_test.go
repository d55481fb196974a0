package tests

// Many editors at once on one acp-bridge serve: each connection its own
// engine, its own session, its own streamed prompt, and no message of
// another connection's.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"
)

// remoteClient is a minimal editor on the ACP remote transport, written
// from the wire rules (not from our server's code): send one message,
// receive the next one whatever stream it came on.
type remoteClient struct {
	t    *testing.T
	in   *EditorInput // records what was sent, for the validator
	v    *validator
	recv chan received // messages and errors, in the order they happened
	send func(msg []byte, session string) error
	stop func()
	// readers are the goroutines reading the connection's streams into
	// recv: once stop is called, Wait returns when they have all ended.
	readers sync.WaitGroup
}

func newRemoteClient(t *testing.T) *remoteClient {
	in := &EditorInput{w: nopWriteCloser{}, sent: map[string][]string{}}
	return &remoteClient{t: t, in: in, v: newValidator(in), recv: make(chan received, 256)}
}

type received struct {
	msg []byte
	err error
}

// dialRemoteWS opens a WebSocket connection to url.
func dialRemoteWS(t *testing.T, url string) (*remoteClient, error) {
	c := newRemoteClient(t)
	ws, resp, err := (&websocket.Dialer{HandshakeTimeout: sdkWait}).Dial(url, nil)
	if err != nil {
		return nil, err
	}
	if resp.Header.Get("Acp-Connection-Id") == "" {
		ws.Close()
		return nil, errors.New("the 101 response has no Acp-Connection-Id")
	}
	var wmu sync.Mutex
	c.send = func(msg []byte, _ string) error {
		wmu.Lock()
		defer wmu.Unlock()
		return ws.WriteMessage(websocket.TextMessage, msg)
	}
	c.stop = func() { ws.Close() }
	c.readers.Add(1)
	go func() {
		defer c.readers.Done()
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				c.recv <- received{err: err}
				return
			}
			c.recv <- received{msg: msg}
		}
	}()
	return c, nil
}

// dialServed opens a connection to srv over a WebSocket (ws) or Streamable
// HTTP, with initialize (initializeBody) sent: its answer is the
// connection's first message either way.
// servedTurn reads c's initialize answer, opens a session and prompts it
// with text, and returns the session once a line containing started has
// come (the agent's word that the turn is under way).
func servedTurn(t *testing.T, c *remoteClient, text, started string) string {
	t.Helper()
	if m, err := c.Next(sdkWait); err != nil || !m.Get("result").Exists() {
		t.Fatalf("initialize: %s %v", m.Raw, err)
	}
	if err := c.Send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, ""); err != nil {
		t.Fatal(err)
	}
	m, err := c.Next(sdkWait)
	sid := m.Get("result.sessionId").Str
	if err != nil || sid == "" {
		t.Fatalf("session/new: %s %v", m.Raw, err)
	}
	if err := c.Send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":`+strconv.Quote(text)+`}]}}`, sid); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.Next(sdkWait)
		if err != nil {
			t.Fatalf("waiting for %q: %v", started, err)
		}
		if strings.Contains(m.Raw, started) {
			return sid
		}
	}
}

func dialServed(t *testing.T, srv *Served, ws bool) (*remoteClient, error) {
	if !ws {
		return dialRemoteHTTP(t, srv.Endpoint, []byte(initializeBody))
	}
	c, err := dialRemoteWS(t, srv.WSURL())
	if err == nil {
		if err = c.Send(initializeBody, ""); err != nil {
			c.stop()
		}
	}
	return c, err
}

// dialRemoteHTTP opens a Streamable HTTP connection to url by POSTing
// initialize (init), and opens the connection's SSE stream; a session's
// stream is opened when a response names the session.
func dialRemoteHTTP(t *testing.T, url string, init []byte) (*remoteClient, error) {
	c := newRemoteClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	resp, err := http.Post(url, "application/json", bytes.NewReader(init))
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Acp-Connection-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		return nil, fmt.Errorf("initialize: %s %s", resp.Status, body)
	}
	c.in.Write(append(bytes.Clone(init), '\n'))
	var mu sync.Mutex
	streams := map[string]bool{}
	var open func(session string)
	open = func(session string) {
		mu.Lock()
		defer mu.Unlock()
		if streams[session] {
			return
		}
		streams[session] = true
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Acp-Connection-Id", id)
		if session != "" {
			req.Header.Set("Acp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			c.recv <- received{err: fmt.Errorf("GET stream %q: %v %v", session, resp, err)}
			return
		}
		c.readers.Add(1)
		go func() {
			defer c.readers.Done()
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				if sid := gjson.Get(data, "result.sessionId"); sid.Exists() {
					open(sid.Str)
				}
				c.recv <- received{msg: []byte(data)}
			}
		}()
	}
	open("")
	c.recv <- received{msg: body}
	c.send = func(msg []byte, session string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Acp-Connection-Id", id)
		if session != "" {
			open(session) // before the message, so nothing of it is missed
			req.Header.Set("Acp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("POST: %s %s", resp.Status, b)
		}
		return nil
	}
	return c, nil
}

// Send sends msg (recorded for the validator) on the stream of session.
func (c *remoteClient) Send(msg, session string) error {
	c.in.Write([]byte(msg + "\n"))
	return c.send([]byte(msg), session)
}

// Next returns the next message, checked against the ACP schema.
func (c *remoteClient) Next(timeout time.Duration) (gjson.Result, error) {
	select {
	case r := <-c.recv:
		if r.err != nil {
			return gjson.Result{}, r.err
		}
		for _, p := range c.v.check(append(bytes.Clone(r.msg), '\n')) {
			c.t.Errorf("message %s: %s", truncate(string(r.msg), 300), p)
		}
		return gjson.ParseBytes(r.msg), nil
	case <-time.After(timeout):
		return gjson.Result{}, errors.New("timed out waiting for a message")
	}
}

// oneRemoteSession runs initialize (over WebSocket; HTTP's was sent by
// dialRemoteHTTP), session/new and the prompt "stream N" on c, and
// requires that every message it gets is its own: its session's id only,
// the chunks in order, the answers to its own ids. It returns the session's
// id.
func oneRemoteSession(c *remoteClient, ws bool, n int) (string, error) {
	const wait = 2 * sdkWait
	if ws {
		if err := c.Send(initializeBody, ""); err != nil {
			return "", err
		}
	}
	m, err := c.Next(wait)
	if err != nil || m.Get("id").Int() != 1 || !m.Get("result").Exists() {
		return "", fmt.Errorf("initialize: %s %v", m.Raw, err)
	}
	if err := c.Send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, ""); err != nil {
		return "", err
	}
	m, err = c.Next(wait)
	sid := m.Get("result.sessionId").Str
	if err != nil || m.Get("id").Int() != 2 || sid == "" {
		return "", fmt.Errorf("session/new: %s %v", m.Raw, err)
	}
	if err := c.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"stream %d"}]}}`, sid, n), sid); err != nil {
		return "", err
	}
	var chunks []string
	for {
		m, err := c.Next(wait)
		if err != nil {
			return "", fmt.Errorf("during the prompt (after %d chunks): %v", len(chunks), err)
		}
		if m.Get("method").Str == "session/update" {
			if got := m.Get("params.sessionId").Str; got != sid {
				return "", fmt.Errorf("cross-talk: an update of session %s on the connection of session %s", got, sid)
			}
			if m.Get("params.update.sessionUpdate").Str == "agent_message_chunk" {
				chunks = append(chunks, m.Get("params.update.content.text").Str)
			}
			continue
		}
		if m.Get("id").Int() != 3 || m.Get("result.stopReason").Str != "end_turn" {
			return "", fmt.Errorf("prompt answer: %s", m.Raw)
		}
		break
	}
	for i, ch := range chunks {
		if want := fmt.Sprintf("chunk-%04d", i); ch != want || len(chunks) != n {
			return "", fmt.Errorf("session %s: chunks %q, want chunk-0000…chunk-%04d", sid, chunks, n-1)
		}
	}
	return sid, nil
}

// TestServeManyConnections: 50 editors at once, half over WebSocket and half
// over Streamable HTTP, each with its own session and streamed prompt, see
// only their own messages. Each connection streams a different number of
// chunks (2…51), so a chunk, update or answer of another connection's breaks
// the exact sequence each one requires, even where the agent numbers
// sessions alike on every link. Durable sessions are on, all 50 bridges
// recording into one state dir, which gives every session an id of its own:
// no two connections may see the same one.
func TestServeManyConnections(t *testing.T) {
	const n = 50
	agent := WSTransport(nil).Start(t)
	srv := StartServe(t, append([]string{"--max-connections", "64"}, agent.Args...), agent.Env)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sids := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := i%2 == 0
			var c *remoteClient
			var err error
			if ws {
				c, err = dialRemoteWS(t, srv.WSURL())
			} else {
				c, err = dialRemoteHTTP(t, srv.Endpoint, []byte(initializeBody))
			}
			if err != nil {
				errs <- fmt.Errorf("connection %d: %v", i, err)
				return
			}
			defer c.stop()
			sid, err := oneRemoteSession(c, ws, 2+i)
			if err != nil {
				errs <- fmt.Errorf("connection %d (websocket %v): %v", i, ws, err)
			}
			sids <- sid
		}()
	}
	wg.Wait()
	close(errs)
	close(sids)
	for err := range errs {
		t.Error(err)
	}
	seen := map[string]bool{}
	for sid := range sids {
		if sid != "" && seen[sid] {
			t.Errorf("session id %s was handed to two connections", sid)
		}
		seen[sid] = true
	}
	if got := strings.Count(srv.Stderr(), "connection opened"); got != n {
		t.Errorf("serve opened %d connections, want %d", got, n)
	}
}

// TestServeShutdownAnswersPending: SIGTERM stops serve gracefully: a
// prompt still running on each connection (HTTP and WebSocket) is answered
// before the connection ends, and serve exits 0.
func TestServeShutdownAnswersPending(t *testing.T) {
	agent := ChildTransport("acp").Start(t)
	srv := StartServe(t, append([]string{"--no-sessions"}, agent.Args...), agent.Env)
	type held struct {
		c   *remoteClient
		sid string
	}
	var conns []held
	for _, ws := range []bool{false, true} {
		c, err := dialServed(t, srv, ws)
		if err != nil {
			t.Fatal(err)
		}
		defer c.stop()
		// The turn has started once the agent says it is holding.
		sid := servedTurn(t, c, "hold forever", "holding:forever")
		conns = append(conns, held{c, sid})
	}
	if code, ok := srv.Stop(20 * time.Second); !ok || code != 0 {
		t.Fatalf("serve after SIGTERM: status %d, exited %v", code, ok)
	}
	for i, h := range conns {
		answered := false
		for !answered {
			m, err := h.c.Next(5 * time.Second)
			if err != nil {
				t.Errorf("connection %d: the pending prompt was not answered before the connection ended: %v", i, err)
				break
			}
			answered = m.Get("id").Int() == 3 && !m.Get("method").Exists()
		}
	}
}

// TestServeIdleAndOrigin: an HTTP connection with no stream and no message
// is closed after --idle-timeout; an origin given with --allow-origin is
// served.
func TestServeIdleAndOrigin(t *testing.T) {
	agent := ChildTransport("acp").Start(t)
	srv := StartServe(t, append([]string{"--no-sessions", "--idle-timeout", "1s", "--allow-origin", "https://editor.example"}, agent.Args...), agent.Env)
	status, h, body := servePost(t, srv.Endpoint, http.Header{"Origin": {"https://editor.example"}}, initializeBody)
	id := h.Get("Acp-Connection-Id")
	if status != http.StatusOK || id == "" {
		t.Fatalf("initialize from an allowed origin: %d %s", status, body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _, _ := servePost(t, srv.Endpoint, http.Header{"Acp-Connection-Id": {id}}, `{"jsonrpc":"2.0","method":"_x/ping"}`)
		if status == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an idle connection was not closed")
		}
		// Each message counts as activity: wait past the timeout first.
		time.Sleep(2500 * time.Millisecond)
	}
	if !strings.Contains(srv.Stderr(), "closing an idle connection") {
		t.Errorf("serve did not log the idle close")
	}
	// Without a token, a loopback endpoint answers loopback host names
	// only: a page that rebinds its domain to 127.0.0.1 is refused.
	req, _ := http.NewRequest(http.MethodPost, srv.Endpoint, strings.NewReader(initializeBody))
	req.Header.Set("Content-Type", "application/json")
	req.Host = "rebound.example:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "not this loopback endpoint") {
		t.Errorf("a request for Host rebound.example: %d %s", resp.StatusCode, b)
	}
}
