package fakeagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// ServeFunc runs one agent connection: frames in on in, frames out on out
// (one whole line per Write), until in reaches EOF. WSServer calls it once
// per WebSocket connection, so any agent written for stdio can be served.
type ServeFunc func(in io.Reader, out io.Writer, opt Options) error

// WSServer serves an agent at ws://127.0.0.1:PORT/acp, one JSON-RPC message
// per text frame, the shape of the ACP WebSocket transport RFD
// (one JSON-RPC message per text frame). Each connection gets its own agent.
type WSServer struct {
	// URL is the agent's ws:// address, for the bridge's --url.
	URL string
	// Addr is the "host:port" the server listens on.
	Addr string

	srv    *httptest.Server
	serve  ServeFunc
	indent bool
	log    *slog.Logger

	mu      sync.Mutex
	closed  bool
	conns   map[*websocket.Conn]bool
	headers []http.Header
	dials   int
}

// WSOptions shape a WSServer.
type WSOptions struct {
	// Serve runs each connection (Serve when nil).
	Serve ServeFunc
	// Log receives the server's logs; it must be safe for concurrent use.
	// nil discards them.
	Log io.Writer
	// Addr is the "host:port" to listen on; "" picks a free loopback port.
	// A test that restarts an agent on the port the bridge knows passes the
	// previous server's Addr.
	Addr string
	// Indent pretty-prints every message the agent sends (json.Indent, two
	// spaces): one message per text frame, spread over several lines. The
	// transport RFD only asks for one message per frame, so a bridge must
	// not assume a frame is a single line.
	Indent bool
}

// NewWSServer starts a server whose connections run serve (Serve when nil).
// Logs go to logw, which must be safe for concurrent use; nil discards them.
func NewWSServer(serve ServeFunc, logw io.Writer) *WSServer {
	s, err := StartWSServer(WSOptions{Serve: serve, Log: logw})
	if err != nil {
		panic(err) // a free loopback port is always available, as for httptest
	}
	return s
}

// StartWSServer starts a server shaped by o.
func StartWSServer(o WSOptions) (*WSServer, error) {
	if o.Serve == nil {
		o.Serve = Serve
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	s := &WSServer{
		serve:  o.Serve,
		indent: o.Indent,
		log:    slog.New(slog.NewTextHandler(o.Log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		conns:  make(map[*websocket.Conn]bool),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/acp", s.handle)
	s.srv = httptest.NewUnstartedServer(mux)
	if o.Addr != "" {
		l, err := net.Listen("tcp", o.Addr)
		if err != nil {
			s.srv.Close()
			return nil, fmt.Errorf("fake agent: listening on %s: %w", o.Addr, err)
		}
		s.srv.Listener.Close()
		s.srv.Listener = l
	}
	s.srv.Start()
	s.Addr = s.srv.Listener.Addr().String()
	s.URL = "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/acp"
	return s, nil
}

// Close stops the server and drops every open connection (no close frame:
// the TCP connections just end), as a killed agent server would. The port
// is free again when Close returns.
func (s *WSServer) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.srv.Close()
}

// Dials reports how many WebSocket connections the server has accepted.
func (s *WSServer) Dials() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dials
}

// Headers returns the HTTP headers of every handshake, oldest first.
func (s *WSServer) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *WSServer) handle(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.log.Error("upgrade", "err", err)
		return
	}
	s.mu.Lock()
	if s.closed { // upgraded while Close ran: it would not see this one
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.conns[conn] = true
	s.headers = append(s.headers, r.Header.Clone())
	s.dials++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
	}()

	out := &wsWriter{conn: conn, indent: s.indent}
	agentIn, toAgent := io.Pipe()
	go s.readPump(conn, toAgent)
	opt := Options{
		Transport: "ws",
		// Die resets the TCP connection with no close frame, as a crashed
		// server or a broken network would.
		Die: func() {
			out.stop()
			if tcp, ok := conn.NetConn().(*net.TCPConn); ok {
				_ = tcp.SetLinger(0) // RST, not FIN
			}
			conn.NetConn().Close()
		},
		// Close ends the connection the polite way: close frame, then TCP.
		Close: func() {
			out.stop()
			msg := websocket.FormatCloseMessage(websocket.CloseGoingAway, "fake agent closing")
			_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
			conn.Close()
		},
		Logger: s.log,
	}
	if err := s.serve(agentIn, out, opt); err != nil {
		s.log.Info("agent ended", "err", err)
	}
}

// readPump feeds each text frame to the agent as one line. Binary frames are
// ignored, as the transport RFD says.
func (s *WSServer) readPump(conn *websocket.Conn, toAgent *io.PipeWriter) {
	for {
		typ, msg, err := conn.ReadMessage()
		if err != nil {
			toAgent.CloseWithError(io.EOF)
			return
		}
		if typ != websocket.TextMessage {
			continue
		}
		if bytes.IndexByte(msg, '\n') >= 0 {
			s.log.Error("text frame contains a raw newline", "len", len(msg))
		}
		if _, err := toAgent.Write(append(msg, '\n')); err != nil {
			return
		}
	}
}

// wsWriter sends each line written to it as one text frame, synchronously,
// so that a frame written before Die is on the wire before the connection
// drops. After stop it discards everything. With indent, each message is
// pretty-printed over several lines inside its one frame.
type wsWriter struct {
	mu      sync.Mutex
	conn    *websocket.Conn
	indent  bool
	stopped bool
}

func (w *wsWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return 0, errors.New("fake agent: connection stopped")
	}
	frame := bytes.TrimRight(p, "\n")
	if bytes.IndexByte(frame, '\n') >= 0 {
		return 0, fmt.Errorf("fake agent: %d-byte write is more than one line", len(p))
	}
	if w.indent {
		var buf bytes.Buffer
		if err := json.Indent(&buf, frame, "", "  "); err != nil {
			return 0, fmt.Errorf("fake agent: indenting a %d-byte message: %w", len(frame), err)
		}
		frame = buf.Bytes()
	}
	if err := w.conn.WriteMessage(websocket.TextMessage, frame); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *wsWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}
