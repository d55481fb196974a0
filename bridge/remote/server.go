package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"
)

// The transport's header names.
const (
	HeaderConnectionID = "Acp-Connection-Id"
	HeaderSessionID    = "Acp-Session-Id"
)

// Defaults for the zero-valued fields of Server.
const (
	DefaultMaxConnections = 64
	DefaultMaxMessage     = 64 << 20
	DefaultMaxBuffered    = 8 << 20
	DefaultStallTimeout   = 60 * time.Second
	DefaultIdleTimeout    = 5 * time.Minute
)

const (
	keepAlive  = 15 * time.Second // SSE comment interval, as the SDK's
	pingPeriod = 20 * time.Second // WebSocket pings
	pongWait   = 60 * time.Second // a WebSocket silent this long is dead
)

// Engine serves one connection: it reads the editor's ACP messages, one a
// line, from in and writes its own to out, one a line, until in ends or ctx
// is done, answering what is pending before it returns (bridge.Bridge.Serve
// does all that). id is the connection's id, for logs.
type Engine func(ctx context.Context, id string, in io.Reader, out io.Writer) error

// Server serves ACP over Streamable HTTP and WebSocket at one endpoint; see
// the package documentation for the wire rules. The zero value of each field
// other than Engine means the default in its comment. A Server is an
// http.Handler for the endpoint's path; Shutdown ends it.
type Server struct {
	// Engine serves each connection; required.
	Engine Engine
	// Token, when not empty, must come as "Authorization: Bearer TOKEN" on
	// every request.
	Token string
	// AllowOrigins lists the Origin values (scheme://host[:port]) whose
	// requests are served besides the endpoint's own origin (an Origin
	// whose host is the request's Host, as browsers and gorilla/websocket
	// judge same-origin); a request with any other Origin is refused. "*"
	// allows every origin.
	AllowOrigins []string
	// MaxConnections bounds the open connections; 0 means 64.
	MaxConnections int
	// MaxMessage bounds one message from the client, in bytes; 0 means 64 MiB.
	MaxMessage int64
	// MaxBuffered bounds the output a connection holds that its client has
	// not read, in bytes; 0 means 8 MiB.
	MaxBuffered int64
	// StallTimeout is how long a full connection waits for its client to
	// read before it is closed; 0 means 60 s.
	StallTimeout time.Duration
	// IdleTimeout closes an HTTP connection with no open stream and no
	// message for this long; 0 means 5 min, negative never.
	IdleTimeout time.Duration
	// MaxReading bounds the bytes of message bodies being read at once,
	// over all connections; 0 means twice MaxMessage, at least 16 MiB. A
	// POST beyond it is answered 503 with Retry-After.
	MaxReading int64
	// Authenticated, when set, is called for each request that passed the
	// Origin and token checks, before it is served: serve tells the sockets
	// of editors from a stranger's with it.
	Authenticated func(*http.Request)
	// Logger receives the server's logs; nil means none.
	Logger hclog.Logger

	mu       sync.Mutex
	conns    map[string]*conn
	closing  bool
	engines  sync.WaitGroup // one per connection's engine
	handlers sync.WaitGroup // SSE streams and WebSocket pumps
	reaper   sync.Once
	stop     chan struct{}
	reading  budget // body bytes being read, over all connections
	refusals refusalLog
	lifeOnce sync.Once
	life     context.Context // done when Shutdown begins
	end      context.CancelFunc
}

// lifetime is a context done when Shutdown begins.
func (s *Server) lifetime() context.Context {
	s.lifeOnce.Do(func() { s.life, s.end = context.WithCancel(context.Background()) })
	return s.life
}

func (s *Server) log() hclog.Logger {
	if s.Logger == nil {
		return hclog.NewNullLogger()
	}
	return s.Logger
}

func (s *Server) maxConnections() int {
	if s.MaxConnections > 0 {
		return s.MaxConnections
	}
	return DefaultMaxConnections
}

func (s *Server) maxMessage() int64 {
	if s.MaxMessage > 0 {
		return s.MaxMessage
	}
	return DefaultMaxMessage
}

func (s *Server) maxReading() int64 {
	if s.MaxReading > 0 {
		return s.MaxReading
	}
	return max(2*s.maxMessage(), 16<<20)
}

func (s *Server) maxBuffered() int64 {
	if s.MaxBuffered > 0 {
		return s.MaxBuffered
	}
	return DefaultMaxBuffered
}

func (s *Server) stallTimeout() time.Duration {
	if s.StallTimeout > 0 {
		return s.StallTimeout
	}
	return DefaultStallTimeout
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout == 0 {
		return DefaultIdleTimeout
	}
	return s.IdleTimeout
}

// refuse answers a request the server will not serve: status, and a
// one-line plain-text reason that says what to do.
func refuse(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintf(w, "acp-bridge: "+format+"\n", args...)
}

// RefuseStranger is refuse for a request that has not authenticated: the
// answer closes its socket, so that a peer without the token holds none of
// the sockets editors need (an HTTP/2 connection is told to go away).
func RefuseStranger(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Connection", "close")
	refuse(w, status, format, args...)
}

// ServeHTTP serves the endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r.Host) && !s.originAllowed(origin) {
		s.refusals.warn(s.log(), "refused a request from a web page", "origin", origin, "remote", r.RemoteAddr)
		RefuseStranger(w, http.StatusForbidden, "requests from web pages (Origin %s) are refused; to allow this origin start serve with --allow-origin %s", origin, origin)
		return
	}
	if s.Token != "" {
		got, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="acp-bridge"`)
			s.refusals.warn(s.log(), "refused a request without a bearer token", "remote", r.RemoteAddr)
			RefuseStranger(w, http.StatusUnauthorized, "this endpoint needs \"Authorization: Bearer TOKEN\" with the token serve was started with (--token-env, --token-file or its configuration's serve block)")
			return
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="acp-bridge", error="invalid_token"`)
			s.refusals.warn(s.log(), "refused a request with a wrong bearer token", "remote", r.RemoteAddr)
			RefuseStranger(w, http.StatusUnauthorized, "the bearer token is wrong: send the token serve was started with (--token-env, --token-file or its configuration's serve block)")
			return
		}
	}
	if s.Authenticated != nil {
		s.Authenticated(r)
	}
	switch r.Method {
	case http.MethodPost:
		s.post(w, r)
	case http.MethodGet:
		if websocket.IsWebSocketUpgrade(r) {
			s.upgrade(w, r)
		} else {
			s.get(w, r)
		}
	case http.MethodDelete:
		s.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		refuse(w, http.StatusMethodNotAllowed, "method %s is not part of the ACP remote transport: POST messages, GET the SSE stream or a WebSocket, DELETE the connection", r.Method)
	}
}

// refusalLog logs the refusals of requests that did not authenticate, at
// most one a second with a count of the others since: a crowd of strangers
// does not fill the log.
type refusalLog struct {
	mu      sync.Mutex
	last    time.Time
	skipped int
}

func (l *refusalLog) warn(log hclog.Logger, msg string, args ...any) {
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.last) < time.Second {
		l.skipped++
		l.mu.Unlock()
		return
	}
	l.last = now
	skipped := l.skipped
	l.skipped = 0
	l.mu.Unlock()
	if skipped > 0 {
		args = append(args, "refused_since_last_logged", skipped)
	}
	log.Warn(msg, args...)
}

// sameOrigin reports whether origin is the endpoint's own: its host and
// port are the request's Host. A page served from the endpoint's host (a
// reverse proxy that serves both the web client and the endpoint) is not
// a foreign page. A page that rebinds its own name to this address is
// same-origin too; on a loopback listener without a token, the Host check
// in front of the server refuses it first.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

func (s *Server) originAllowed(origin string) bool {
	for _, o := range s.AllowOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// track counts a stream or socket handler in, unless Shutdown has begun
// (a WaitGroup must not grow while it is waited on).
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.handlers.Add(1)
	return true
}

// open makes a connection and starts its engine, or says why not.
func (s *Server) open(transport string, r *http.Request) (*conn, error) {
	s.reaper.Do(func() {
		s.stop = make(chan struct{})
		if d := s.idleTimeout(); d > 0 {
			go s.reap(d)
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, errShuttingDown
	}
	if n := len(s.conns); n >= s.maxConnections() {
		return nil, errTooMany
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	c := &conn{
		id: id, srv: s, transport: transport, cancel: cancel, inW: inW,
		log:      s.log().With("connection", id[:8], "transport", transport),
		done:     make(chan struct{}),
		progress: make(chan struct{}),
		main:     &mailbox{},
		sessions: map[string]*mailbox{},
		routes:   map[string]string{},
		replies:  map[string]string{},
		loads:    map[string]string{},
		loading:  map[string]int{},
		initial:  make(chan []byte, 1),
		wsReady:  make(chan struct{}),
		last:     time.Now(),
	}
	if s.conns == nil {
		s.conns = map[string]*conn{}
	}
	s.conns[id] = c
	s.engines.Add(1)
	c.log.Info("connection opened", "remote", r.RemoteAddr, "open", len(s.conns))
	go func() {
		defer s.engines.Done()
		err := s.Engine(ctx, id, inR, &lineWriter{c: c})
		inR.CloseWithError(errConnClosed)
		c.finish(err)
	}()
	return c, nil
}

var (
	errTooMany      = errors.New("too many connections")
	errShuttingDown = errors.New("shutting down")
	errConnClosed   = errors.New("connection closed")
)

func (s *Server) refuseOpen(w http.ResponseWriter, err error) {
	if errors.Is(err, errTooMany) {
		w.Header().Set("Retry-After", "5")
		s.log().Warn("refused a connection: the limit is reached", "max_connections", s.maxConnections())
		refuse(w, http.StatusServiceUnavailable, "too many connections: all %d are in use (--max-connections); try again later", s.maxConnections())
		return
	}
	refuse(w, http.StatusServiceUnavailable, "the server is shutting down")
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *conn {
	id := r.Header.Get(HeaderConnectionID)
	if id == "" {
		refuse(w, http.StatusBadRequest, "missing %s header: open a connection by POSTing initialize first", HeaderConnectionID)
		return nil
	}
	s.mu.Lock()
	c := s.conns[id]
	s.mu.Unlock()
	if c == nil {
		refuse(w, http.StatusNotFound, "unknown %s (the connection is closed or belongs to another server): open a new connection with initialize", HeaderConnectionID)
		return nil
	}
	return c
}

// remove forgets c; it is called once c is closed.
func (s *Server) remove(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns[c.id] == c {
		delete(s.conns, c.id)
	}
}

// reap closes idle HTTP connections until Shutdown.
func (s *Server) reap(idle time.Duration) {
	t := time.NewTicker(max(idle/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		conns := make([]*conn, 0, len(s.conns))
		for _, c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		for _, c := range conns {
			if c.idleFor() > idle {
				c.log.Info("closing an idle connection", "idle", idle)
				c.close()
			}
		}
	}
}

// Shutdown stops accepting connections, ends every engine (each answers
// what is still pending, and its answers are delivered to streams still
// open) and waits for them and the streams until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.reaper.Do(func() { s.stop = make(chan struct{}) })
	s.lifetime()
	s.end()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	for _, c := range conns {
		// Both the ctx and the end of input tell an engine to answer what
		// is pending and stop; the streams stay open for those answers.
		c.cancel()
		c.inW.Close()
	}
	done := make(chan struct{})
	go func() {
		s.engines.Wait()
		s.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// post handles a POST: one message for a connection, or initialize to open
// one.
func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if !strings.EqualFold(strings.TrimSpace(ct), "application/json") {
		refuse(w, http.StatusUnsupportedMediaType, "POST one JSON-RPC message as Content-Type: application/json")
		return
	}
	// The connection is looked up before the body is read: a message for
	// no connection is refused unread, and one without a connection id
	// must be initialize, small.
	var c *conn
	limit := s.maxMessage()
	if r.Header.Get(HeaderConnectionID) != "" {
		if c = s.lookup(w, r); c == nil {
			return
		}
	} else {
		limit = min(limit, MaxInitialize)
	}
	body, release, ok := s.readBody(w, r, c, limit)
	if !ok {
		return
	}
	defer release()
	line, err := oneLine(body)
	if err != nil {
		if errors.Is(err, errBatch) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"JSON-RPC batches are not supported"}}`+"\n")
			return
		}
		refuse(w, http.StatusBadRequest, "%v", err)
		return
	}
	env := parseEnvelope(line)
	if env.method == "initialize" && env.isRequest() && c == nil {
		s.initialize(w, r, line, env)
		return
	}
	// A repeated initialize on an existing connection is the engine's,
	// like any other message: it answers one on stdio and on a WebSocket,
	// and the SDK's client POSTs one with the connection's id and reads
	// the answer from the connection stream.
	if c == nil {
		refuse(w, http.StatusBadRequest, "missing %s header: open a connection by POSTing initialize first", HeaderConnectionID)
		return
	}
	header := r.Header.Get(HeaderSessionID)
	if header != "" && env.session != "" && header != env.session {
		refuse(w, http.StatusBadRequest, "%s %q does not match the message's sessionId %q", HeaderSessionID, header, env.session)
		return
	}
	if env.method == "" && env.id != "" {
		// A response to one of the agent's requests.
		if want, ok := c.replyRoute(env.id); ok && want != "" && header != "" && header != want {
			refuse(w, http.StatusBadRequest, "%s %q does not match the session %q the request came on", HeaderSessionID, header, want)
			return
		}
	} else if env.id != "" {
		route := env.session
		if route == "" {
			route = header
		}
		if env.method == "session/load" {
			c.setLoad(env.id, route)
		} else {
			c.setRoute(env.id, route)
		}
	}
	if err := c.send(r.Context(), line); err != nil {
		refuse(w, http.StatusNotFound, "the connection closed before it took the message: open a new connection with initialize")
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// MaxInitialize bounds the body of a POST without Acp-Connection-Id, which
// must be an initialize (it opens a connection), in bytes; MaxMessage when
// that is smaller.
const MaxInitialize = 1 << 20

var (
	errReadingFull = errors.New("the server is reading as many message bytes as it may at once")
	errConnFull    = errors.New("the connection is sending as many message bytes as it may at once")
)

// readBody reads r's body, at most limit bytes, within the bytes the server
// reads at once (MaxReading) and, for a message to c (nil for initialize),
// the bytes c sends at once (MaxMessage). When it cannot, it answers the
// request itself and ok is false; else release gives the bytes back once
// the body has been handed on.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, c *conn, limit int64) (body []byte, release func(), ok bool) {
	if r.ContentLength > limit {
		s.tooLarge(w, r, limit)
		return nil, nil, false
	}
	br := &budgetReader{r: http.MaxBytesReader(w, r.Body, limit)}
	br.budgets = append(br.budgets, budgetOf{&s.reading, s.maxReading(), errReadingFull})
	if c != nil {
		br.budgets = append(br.budgets, budgetOf{&c.reading, s.maxMessage(), errConnFull})
	}
	var buf bytes.Buffer
	var err error
	if r.ContentLength > 0 {
		// Reserved whole before a byte is read, and read into one buffer
		// of its size.
		err = br.take(r.ContentLength)
		if err == nil {
			buf.Grow(int(r.ContentLength) + bytes.MinRead)
		}
	}
	if err == nil {
		// Shutdown ends a read in progress: a slow body holds it up no more.
		rc := http.NewResponseController(w)
		aborted := make(chan struct{})
		stop := context.AfterFunc(s.lifetime(), func() {
			_ = rc.SetReadDeadline(time.Now())
			close(aborted)
		})
		_, err = buf.ReadFrom(br)
		if !stop() {
			<-aborted
			if err != nil {
				err = errShuttingDown
			}
		}
	}
	if err == nil {
		return buf.Bytes(), br.giveBack, true
	}
	br.giveBack()
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		s.tooLarge(w, r, tooBig.Limit)
	case errors.Is(err, errReadingFull):
		w.Header().Set("Retry-After", "1")
		s.log().Warn("refused a message: the server is reading as many bytes as it may at once", "limit", s.maxReading(), "remote", r.RemoteAddr)
		refuse(w, http.StatusServiceUnavailable, "serve is reading %d bytes of other messages at once, its limit (twice --max-message, at least 16 MiB); try again shortly", s.maxReading())
	case errors.Is(err, errConnFull):
		w.Header().Set("Retry-After", "1")
		refuse(w, http.StatusServiceUnavailable, "this connection is sending more than %d bytes of messages at once (serve's --max-message): send them one after the other", s.maxMessage())
	case errors.Is(err, errShuttingDown):
		refuse(w, http.StatusServiceUnavailable, "the server is shutting down")
	default:
		refuse(w, http.StatusBadRequest, "reading the message: %v", err)
	}
	return nil, nil, false
}

func (s *Server) tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	s.log().Warn("refused an oversized message", "limit", limit, "remote", r.RemoteAddr)
	if r.Header.Get(HeaderConnectionID) == "" && limit < s.maxMessage() {
		refuse(w, http.StatusRequestEntityTooLarge, "a POST without %s must be initialize, and is at most %d bytes: send other messages with the %s initialize answered", HeaderConnectionID, limit, HeaderConnectionID)
		return
	}
	refuse(w, http.StatusRequestEntityTooLarge, "the message is larger than the limit of %d bytes (serve's --max-message)", limit)
}

// budget counts bytes in use against a limit.
type budget struct {
	mu    sync.Mutex
	used  int64
	freed chan struct{} // closed and replaced when bytes are given back
}

// wait takes n, waiting until it is free, or returns false once done is.
func (b *budget) wait(done <-chan struct{}, n, limit int64) bool {
	for {
		b.mu.Lock()
		if b.used+n <= limit {
			b.used += n
			b.mu.Unlock()
			return true
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-done:
			return false
		}
	}
}

func (b *budget) take(n, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > limit {
		return false
	}
	b.used += n
	return true
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}

type budgetOf struct {
	b     *budget
	limit int64
	full  error
}

// budgetReader takes what it reads from its budgets, up front (take) or as
// it reads (a body of unknown length); a read beyond one fails with its
// error.
type budgetReader struct {
	r       io.Reader
	budgets []budgetOf
	taken   int64
	read    int64
}

func (br *budgetReader) take(n int64) error {
	for i, b := range br.budgets {
		if !b.b.take(n, b.limit) {
			for _, t := range br.budgets[:i] {
				t.b.give(n)
			}
			return b.full
		}
	}
	br.taken += n
	return nil
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	br.read += int64(n)
	if br.read > br.taken {
		if terr := br.take(br.read - br.taken); terr != nil {
			return 0, terr
		}
	}
	return n, err
}

func (br *budgetReader) giveBack() {
	for _, b := range br.budgets {
		b.b.give(br.taken)
	}
	br.taken = 0
}

func (s *Server) initialize(w http.ResponseWriter, r *http.Request, line []byte, env envelope) {
	c, err := s.open("http", r)
	if err != nil {
		s.refuseOpen(w, err)
		return
	}
	c.mu.Lock()
	c.initID = env.id
	c.mu.Unlock()
	if err := c.send(r.Context(), line); err != nil {
		c.close()
		refuse(w, http.StatusInternalServerError, "the engine did not take initialize: %v", err)
		return
	}
	select {
	case resp := <-c.initial:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(HeaderConnectionID, c.id)
		w.WriteHeader(http.StatusOK)
		w.Write(resp)
		w.Write([]byte("\n"))
	case <-c.done:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"Initialize failed","data":"the bridge stopped before it answered initialize; see its log"}}`+"\n", env.id)
	case <-r.Context().Done():
		c.close()
	}
}

// get opens an SSE stream: the connection's, or a session's.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(strings.ToLower(r.Header.Get("Accept")), "text/event-stream") {
		refuse(w, http.StatusNotAcceptable, "GET opens the SSE stream and needs Accept: text/event-stream (or Upgrade: websocket)")
		return
	}
	c := s.lookup(w, r)
	if c == nil {
		return
	}
	session := r.Header.Get(HeaderSessionID)
	mb, ok := c.lease(session)
	if !ok {
		refuse(w, http.StatusConflict, "this stream already has a receiver: one GET per stream")
		return
	}
	if !s.track() {
		c.release(session, mb)
		refuse(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	defer s.handlers.Done()
	defer c.release(session, mb)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	var ev bytes.Buffer
	for {
		msg, wait, end := c.next(mb)
		if end {
			return
		}
		if msg == nil {
			select {
			case <-wait:
				continue
			case <-r.Context().Done():
				return
			case <-tick.C:
				ev.Reset()
				ev.WriteString(":\n\n")
			}
		} else {
			ev.Reset()
			ev.WriteString("data: ")
			ev.Write(msg)
			ev.WriteString("\n\n")
		}
		_ = rc.SetWriteDeadline(time.Now().Add(s.stallTimeout()))
		if _, err := w.Write(ev.Bytes()); err != nil {
			c.log.Debug("SSE stream ended", "error", err)
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	c := s.lookup(w, r)
	if c == nil {
		return
	}
	c.log.Info("connection closed by the client")
	c.close()
	w.WriteHeader(http.StatusAccepted)
}

// upgrade serves a WebSocket connection.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) {
	c, err := s.open("websocket", r)
	if err != nil {
		s.refuseOpen(w, err)
		return
	}
	up := websocket.Upgrader{
		ReadBufferSize:  64 << 10,
		WriteBufferSize: 64 << 10,
		// Origin was checked in ServeHTTP, with the configured list.
		CheckOrigin: func(*http.Request) bool { return true },
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			refuse(w, status, "WebSocket upgrade failed: %v", reason)
		},
	}
	// Headers a handler in front set (an affinity cookie, say) go out on
	// the 101 too: the upgrader writes only the ones it is given.
	h := w.Header().Clone()
	h.Set(HeaderConnectionID, c.id)
	if !s.track() {
		c.close()
		refuse(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	}
	ws, err := up.Upgrade(w, r, h)
	if err != nil {
		s.handlers.Done()
		c.close()
		return
	}
	go func() {
		defer s.handlers.Done()
		c.serveWebSocket(ws)
	}()
}

// oneLine checks that body is one JSON object and returns it on one line
// (the engine's input is newline-delimited): as is when it already is one,
// else without its insignificant whitespace.
func oneLine(body []byte) ([]byte, error) {
	// JSON's own whitespace only: bytes.TrimSpace would also take a
	// trailing \v or U+0085 that makes the body invalid JSON.
	trimmed := bytes.Trim(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' && json.Valid(trimmed) {
		return nil, errBatch
	}
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, errors.New("the body is not a JSON-RPC message (one JSON object)")
	}
	if bytes.ContainsAny(trimmed, "\r\n") {
		var b bytes.Buffer
		_ = json.Compact(&b, trimmed)
		return b.Bytes(), nil
	}
	return trimmed, nil
}

var errBatch = errors.New("JSON-RPC batches are not supported")

// envelope is what routing needs from a message.
type envelope struct {
	id      string // the raw id, "" when absent
	method  string
	session string // params.sessionId, or result.sessionId of a response
}

func (e envelope) isRequest() bool { return e.method != "" && e.id != "" }

// parseEnvelope reads a message's members by their exact names: JSON-RPC's
// are case-sensitive, where encoding/json's struct tags would also take
// "Id" or "METHOD" for them (FuzzEnvelope found `{"Id":{}}` routed as a
// message with an id).
func parseEnvelope(line []byte) envelope {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return envelope{}
	}
	var e envelope
	if id := m["id"]; len(id) > 0 {
		e.id = string(id)
	}
	_ = json.Unmarshal(m["method"], &e.method)
	if sid, ok := sessionIDOf(m["params"]); ok {
		e.session = sid
	} else if sid, ok := sessionIDOf(m["result"]); ok {
		e.session = sid
	}
	return e
}

// sessionIDOf returns raw's "sessionId" member when raw is an object whose
// sessionId, if any, is a string (ok); "" when it has none.
func sessionIDOf(raw json.RawMessage) (string, bool) {
	var obj map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &obj) != nil || obj == nil {
		return "", false
	}
	sid, ok := obj["sessionId"]
	if !ok {
		return "", true
	}
	var s string
	if json.Unmarshal(sid, &s) != nil {
		return "", false
	}
	return s, true
}
