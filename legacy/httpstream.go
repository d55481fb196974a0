package legacy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// HTTPStream configures a connection to an ACP agent served over the
// Streamable HTTP transport of the ACP remote-transport RFD (as the
// TypeScript SDK's AcpServer and acp-bridge serve speak it). The zero value
// of each field other than URL means the default in its comment.
//
// The transport's rules, from the client's side: the first frame must be
// initialize, POSTed without Acp-Connection-Id; its answer (200) carries the
// connection id and the initialize response. Every later frame is a POST
// with the id (and Acp-Session-Id when it concerns a session), answered 202;
// what the agent sends arrives on SSE streams: the connection's, opened
// after initialize, and one per session, opened before the first message
// that names the session or when a response names a new one. A response to
// an agent request goes back with the session of the stream the request
// came on. Close DELETEs the connection. 401, 403, 404 and 410 mean the
// connection is gone (the agent restarted, or the credentials were
// refused): the link fails, and the bridge's supervisor dials a new one,
// which initializes a new connection and re-attaches sessions with
// session/load or session/resume, as for any lost agent. Servers refuse
// initialize on an existing connection (400), so a repeated initialize is
// answered by the transport with the connection's own initialize result,
// the connection and its sessions going on; after a failed initialize
// (answered 200 with a connection id all the same) the next one opens a
// new connection, the old one's stream ending without failing the link.
type HTTPStream struct {
	// URL is the agent's http:// or https:// endpoint. A user:password in it
	// is sent as HTTP Basic authorization unless Header has one.
	URL string
	// Header holds extra headers for every request (Authorization, say),
	// their values already resolved. Values are never logged.
	Header http.Header
	// CAFile names a PEM bundle whose certificates replace the system roots
	// for https://; "" means the system roots.
	CAFile string
	// DialTimeout bounds connecting and the TLS handshake of each request;
	// 0 means 10 s. A POST is answered within postWait (an initialize may
	// wait for the agent to start).
	DialTimeout time.Duration
	// PongWait is how long the connection's stream may stay silent before
	// the link fails; 0 means 45 s, negative never. Servers send a
	// keep-alive every 15 s, so a shorter wait (a WebSocket's --pong-wait)
	// counts as 45 s.
	PongWait time.Duration
	// ReadLimit is the largest message accepted from the agent; 0 means
	// 64 MiB.
	ReadLimit int64
	// Jar keeps the cookies a load balancer sets for affinity, across the
	// connections of one agent; nil means none are kept.
	Jar http.CookieJar
	// Logger receives the connection's logs; nil means no logging.
	Logger hclog.Logger
}

// HTTPConn is a Streamable HTTP connection to an agent, made by
// HTTPStream.Dial. It has the methods of bridge.Link.
type HTTPConn struct {
	cfg     HTTPStream
	url     string // without user info
	where   string // redacted, for logs and errors
	what    string // "agent HTTP <where>"
	header  http.Header
	client  *http.Client
	stream  *http.Client // no overall timeout: streams stay open
	log     hclog.Logger
	limit   int64
	timeout time.Duration

	ctx    context.Context // ends with Close; bounds every request
	cancel context.CancelFunc
	frames chan []byte   // what the SSE streams read, in order per stream
	dead   chan struct{} // closed with err set: the connection is gone
	err    error
	once   sync.Once
	closed sync.Once
	wg     sync.WaitGroup

	mu       sync.Mutex
	connID   string
	connCtx  context.Context    // the connection's streams; ends when it is left
	leave    context.CancelFunc // ends connCtx
	initDone json.RawMessage    // the result of the connection's initialize, when it succeeded
	sessions map[string]bool    // sessions whose stream is open
	replies  map[string]string  // agent request id → the session it came on
}

const (
	defaultSSEWait = 45 * time.Second
	// postWait bounds a POST, answer included: the server answers 202 once
	// it has taken the message, and initialize once the agent answered it.
	postWait = 60 * time.Second
	// errorBodyLimit bounds what of a refusal's body is read and quoted.
	errorBodyLimit = 8 << 10
)

// Dial checks the configuration and returns the connection; nothing is
// sent until the first Write, which must be initialize.
func (h HTTPStream) Dial(ctx context.Context) (*HTTPConn, error) {
	u, err := url.Parse(h.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("agent HTTP: invalid URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("agent HTTP %s: URL scheme must be http or https", redactURL(u))
	}
	header := h.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	if u.User != nil {
		if header.Get("Authorization") == "" {
			pass, _ := u.User.Password()
			header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass)))
		}
		u.User = nil
	}
	tlsConf, err := tlsConfig(h.CAFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConf
	timeout := h.DialTimeout
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	tr.TLSHandshakeTimeout = timeout
	nd := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	tr.DialContext = nd.DialContext
	limit := h.ReadLimit
	if limit <= 0 {
		limit = defaultReadLimit
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &HTTPConn{
		cfg:      h,
		url:      u.String(),
		where:    redactURL(u),
		header:   header,
		client:   &http.Client{Transport: tr, Jar: h.Jar},
		stream:   &http.Client{Transport: tr, Jar: h.Jar},
		log:      orNull(h.Logger),
		limit:    limit,
		timeout:  timeout,
		ctx:      cctx,
		cancel:   cancel,
		frames:   make(chan []byte, 64),
		dead:     make(chan struct{}),
		sessions: map[string]bool{},
		replies:  map[string]string{},
	}
	c.what = "agent HTTP " + c.where
	c.log.Debug("agent HTTP endpoint", "url", c.where, "headers", headerNames(header))
	return c, nil
}

// Read returns the next message from the agent.
func (c *HTTPConn) Read(ctx context.Context) ([]byte, error) {
	if c.ctx.Err() != nil {
		return nil, closedError(c.what)
	}
	select {
	case f := <-c.frames:
		return f, nil
	default:
	}
	select {
	case f := <-c.frames:
		return f, nil
	case <-c.dead:
		// What the streams read before the end still comes first.
		select {
		case f := <-c.frames:
			return f, nil
		default:
			return nil, c.err
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write sends one frame: initialize opens the connection, anything else is
// POSTed on it.
func (c *HTTPConn) Write(ctx context.Context, frame []byte) error {
	select {
	case <-c.dead:
		return c.err
	default:
	}
	env := routing(frame, "params")
	if env.Method == "initialize" && env.ID != nil {
		c.mu.Lock()
		result := c.initDone
		c.mu.Unlock()
		if result != nil {
			// The transport has no second initialize on a connection
			// (servers refuse it with 400), and a new connection would
			// leave the agent's sessions behind: the connection's own
			// answer is the answer, as on a WebSocket the agent gives
			// one and keeps its sessions.
			c.log.Debug("agent HTTP: a repeated initialize answered with the connection's")
			return c.push(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, env.ID, result))
		}
		return c.initialize(ctx, frame)
	}
	c.mu.Lock()
	id := c.connID
	session := env.SessionID
	if env.Method == "" && env.ID != nil {
		// A response goes back with the session its request came on.
		session = c.replies[string(env.ID)]
		delete(c.replies, string(env.ID))
	}
	c.mu.Unlock()
	if id == "" {
		return &linkError{msg: c.what + ": the first message on an ACP HTTP connection must be initialize, not " + env.Method, err: errors.New("not initialized")}
	}
	if session != "" {
		if err := c.openStream(session); err != nil {
			return err
		}
	}
	resp, err := c.post(ctx, frame, id, session)
	if err != nil {
		return c.fail(&linkError{msg: c.what + ": sending a message failed: " + dialCause(err), err: err})
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode/100 == 2:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, errorBodyLimit))
		return nil
	case connectionGone(resp.StatusCode):
		return c.fail(c.refusal("the server dropped the connection", resp))
	case env.Method != "" && env.ID != nil:
		// Only this request failed: answer it, as the SDK's client does.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
		data, _ := json.Marshal(map[string]any{"status": resp.StatusCode, "body": snippet(body, 500)})
		answer := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"the agent's HTTP endpoint refused the request: HTTP %d","data":%s}}`, env.ID, resp.StatusCode, data)
		c.log.Warn("agent HTTP endpoint refused a request", "method", env.Method, "status", resp.Status, "body", snippet(body, 200))
		return c.push(answer)
	default:
		return c.fail(c.refusal("the server refused a message", resp))
	}
}

func connectionGone(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound || status == http.StatusGone
}

func (c *HTTPConn) refusal(what string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	msg := fmt.Sprintf("%s: %s: HTTP %s", c.what, what, resp.Status)
	if s := snippet(body, 200); s != "" {
		msg += ": " + s
	}
	return &linkError{msg: msg, err: fmt.Errorf("HTTP %d", resp.StatusCode)}
}

func (c *HTTPConn) post(ctx context.Context, frame []byte, connID, session string) (*http.Response, error) {
	rctx, cancel := context.WithTimeout(c.ctx, postWait)
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.url, bytes.NewReader(frame))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header = c.header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if connID != "" {
		req.Header.Set("Acp-Connection-Id", connID)
	}
	if session != "" {
		req.Header.Set("Acp-Session-Id", session)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// initialize opens a new connection with frame, leaving any earlier one
// (whose initialize failed): its streams end without failing the link.
func (c *HTTPConn) initialize(ctx context.Context, frame []byte) error {
	c.mu.Lock()
	old := c.connID
	c.connID = ""
	if c.leave != nil {
		c.leave()
		c.connCtx, c.leave = nil, nil
	}
	c.sessions = map[string]bool{}
	c.replies = map[string]string{}
	c.mu.Unlock()
	if old != "" {
		c.deleteConn(old)
	}
	resp, err := c.post(ctx, frame, "", "")
	if err != nil {
		return c.fail(dialError(ctx, c.where, c.timeout, nil, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.fail(c.refusal("initialize refused", resp))
	}
	id := resp.Header.Get("Acp-Connection-Id")
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.limit+1))
	switch {
	case err != nil:
		return c.fail(&linkError{msg: c.what + ": reading the initialize answer: " + dialCause(err), err: err})
	case int64(len(body)) > c.limit:
		return c.fail(&linkError{msg: fmt.Sprintf("%s: the initialize answer is over the %d-byte limit", c.what, c.limit), err: errSSETooLong})
	case id == "":
		return c.fail(&linkError{msg: c.what + ": the initialize answer has no Acp-Connection-Id: is this an ACP remote endpoint? " + snippet(body, 200), err: errors.New("no connection id")})
	}
	line := oneJSONLine(body)
	c.mu.Lock()
	c.connID = id
	c.connCtx, c.leave = context.WithCancel(c.ctx)
	var answer map[string]json.RawMessage
	if json.Unmarshal(line, &answer) == nil && answer["result"] != nil && answer["error"] == nil {
		c.initDone = answer["result"]
	}
	c.mu.Unlock()
	c.log.Info("agent HTTP connected", "url", c.where, "connection_id", id)
	if err := c.push(line); err != nil {
		return err
	}
	return c.openStream("")
}

// openStream opens the connection's SSE stream (session "") or a
// session's, unless it is open.
func (c *HTTPConn) openStream(session string) error {
	c.mu.Lock()
	id, ctx := c.connID, c.connCtx
	if c.sessions[session] || id == "" {
		c.mu.Unlock()
		return nil
	}
	c.sessions[session] = true
	c.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return err
	}
	req.Header = c.header.Clone()
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Acp-Connection-Id", id)
	if session != "" {
		req.Header.Set("Acp-Session-Id", session)
	}
	resp, err := c.stream.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the connection was left meanwhile
		}
		c.forget(session)
		return c.fail(&linkError{msg: c.what + ": opening the event stream failed: " + dialCause(err), err: err})
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		c.forget(session)
		if resp.StatusCode == http.StatusConflict && session != "" {
			// Another receiver has the session's stream: its messages go
			// there; the session is not this link's to follow.
			c.log.Warn("agent HTTP session stream taken by another receiver", "session", session)
			return nil
		}
		return c.fail(c.refusal("opening the event stream refused", resp))
	}
	c.wg.Add(1)
	go c.readStream(ctx, resp.Body, session)
	return nil
}

func (c *HTTPConn) forget(session string) {
	c.mu.Lock()
	delete(c.sessions, session)
	c.mu.Unlock()
}

// readStream reads one SSE stream of the connection whose streams live in
// ctx, until it ends.
func (c *HTTPConn) readStream(ctx context.Context, body io.ReadCloser, session string) {
	defer c.wg.Done()
	defer body.Close()
	wait := c.cfg.PongWait
	if wait >= 0 && wait < defaultSSEWait {
		wait = defaultSSEWait
	}
	var watchdog *time.Timer
	if wait > 0 && session == "" {
		watchdog = time.AfterFunc(wait, func() {
			if ctx.Err() != nil {
				return
			}
			c.fail(&linkError{msg: fmt.Sprintf("%s: nothing on the event stream for %s (not even a keep-alive)", c.what, wait), err: errors.New("stream silent")})
			body.Close()
		})
		defer watchdog.Stop()
	}
	r := newSSEReader(&touchReader{r: body, touch: func() {
		if watchdog != nil {
			watchdog.Reset(wait)
		}
	}}, int(min(c.limit, 1<<30)))
	for {
		data, err := r.Next()
		if err != nil {
			if ctx.Err() != nil {
				return // closed, or the connection was left
			}
			if session != "" {
				// A session's stream may end; the next message for the
				// session opens it again.
				c.forget(session)
				c.log.Debug("agent HTTP session stream ended", "session", session, "error", err)
				return
			}
			cause := "the server closed it"
			if err != io.EOF {
				cause = dialCause(err)
			}
			c.fail(&linkError{msg: c.what + ": the event stream ended: " + cause, err: err})
			return
		}
		frame := oneJSONLine(data)
		env := routing(frame, "result")
		if env.Method != "" && env.ID != nil {
			c.mu.Lock()
			c.replies[string(env.ID)] = session
			c.mu.Unlock()
		}
		if s := env.SessionID; s != "" && env.Method == "" {
			// A new session: follow its stream from now on.
			go func() { _ = c.openStream(s) }()
		}
		if c.push(frame) != nil {
			return
		}
	}
}

// push queues a frame for Read.
func (c *HTTPConn) push(frame []byte) error {
	select {
	case c.frames <- frame:
		return nil
	case <-c.ctx.Done():
		return closedError(c.what)
	}
}

// fail records why the connection is gone (the first reason only) and
// returns err.
func (c *HTTPConn) fail(err error) error {
	c.once.Do(func() {
		c.err = err
		close(c.dead)
		if !errors.Is(err, ErrClosed) {
			c.log.Warn("agent HTTP connection lost", "error", err)
		}
	})
	return err
}

// Close DELETEs the connection (best effort, briefly) and stops its streams.
func (c *HTTPConn) Close() error {
	c.closed.Do(func() {
		c.fail(closedError(c.what))
		c.mu.Lock()
		id := c.connID
		c.mu.Unlock()
		if id != "" {
			c.deleteConn(id)
		}
		c.cancel()
		c.wg.Wait()
	})
	return nil
}

func (c *HTTPConn) deleteConn(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), closeWait*4)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return
	}
	req.Header = c.header.Clone()
	req.Header.Set("Acp-Connection-Id", id)
	if resp, err := c.client.Do(req); err == nil {
		resp.Body.Close()
	}
}

// oneJSONLine returns a JSON message on one line: as is when it is, else
// without its insignificant whitespace (a frame must not break the
// editor's newline-delimited stream).
func oneJSONLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if !bytes.ContainsAny(b, "\r\n") {
		return bytes.Clone(b)
	}
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return bytes.Map(func(r rune) rune {
			if r == '\r' || r == '\n' {
				return ' '
			}
			return r
		}, b)
	}
	return out.Bytes()
}

// touchReader calls touch after every read that returned bytes.
type touchReader struct {
	r     io.Reader
	touch func()
}

func (t *touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.touch()
	}
	return n, err
}

// routed is what the HTTP transport routes a message by.
type routed struct {
	ID        json.RawMessage // nil when absent
	Method    string
	SessionID string // the sessionId of the member routing was asked for
}

// routing reads a message's id, method and the sessionId of its member
// named in (params or result) by their exact names: JSON-RPC's are
// case-sensitive, where encoding/json's struct tags would also take "Id"
// or "METHOD" for them.
func routing(frame []byte, in string) routed {
	var m map[string]json.RawMessage
	if json.Unmarshal(frame, &m) != nil {
		return routed{}
	}
	r := routed{ID: m["id"]}
	_ = json.Unmarshal(m["method"], &r.Method)
	var inner map[string]json.RawMessage
	if json.Unmarshal(m[in], &inner) == nil {
		_ = json.Unmarshal(inner["sessionId"], &r.SessionID)
	}
	return r
}
