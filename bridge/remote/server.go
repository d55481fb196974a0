package remote

import (
	"context"
	"crypto/subtle"
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
