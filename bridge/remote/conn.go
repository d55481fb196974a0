package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"
)

// engineGrace is how long a closed connection's engine has to answer what
// is pending and stop after its input ended, before its ctx is cancelled.
const engineGrace = 10 * time.Second

// conn is one client connection and its engine.
type conn struct {
	id        string
	srv       *Server
	transport string // "http" or "websocket"
	log       hclog.Logger
	cancel    context.CancelFunc // the engine's ctx

	inMu sync.Mutex // one message at a time into inW
	inW  *io.PipeWriter

	reading budget // body bytes of POSTs to it being read or sent

	done      chan struct{} // closed when the engine has returned
	closeOnce sync.Once

	mu       sync.Mutex
	progress chan struct{} // closed and replaced on every change below
	closed   bool          // by the client, idle or a limit: streams end now
	finished bool          // the engine returned: streams end once drained
	last     time.Time     // the last message either way, or stream release
	// HTTP: the initialize answer, the streams and the routes.
	initID   string
	started  bool
	initial  chan []byte
	main     *mailbox
	sessions map[string]*mailbox
	buffered int64
	routes   map[string]string // client request id → session ("" = connection)
	replies  map[string]string // agent request id → session it went to
	// loads maps the id of each session/load in flight to its session,
	// loading counts them per session: until a load is answered, the
	// session's messages (its replay) go where the answer goes, the
	// connection stream, ahead of it.
	loads   map[string]string
	loading map[string]int
	// WebSocket.
	ws      *websocket.Conn
	wsReady chan struct{}
	wsMu    sync.Mutex // one writer at a time
}

// mailbox holds one stream's messages until its receiver takes them.
type mailbox struct {
	q      [][]byte
	leased bool
}

// changed wakes everything waiting on c; c.mu is held.
func (c *conn) changed() {
	close(c.progress)
	c.progress = make(chan struct{})
}

// send hands one message (a line without its newline) to the engine.
func (c *conn) send(ctx context.Context, line []byte) error {
	c.mu.Lock()
	c.last = time.Now()
	closed := c.closed || c.finished
	c.mu.Unlock()
	if closed {
		return errConnClosed
	}
	msg := make([]byte, 0, len(line)+1)
	msg = append(append(msg, line...), '\n')
	c.inMu.Lock()
	defer c.inMu.Unlock()
	_, err := c.inW.Write(msg)
	return err
}

// close ends the connection from this side: streams end, the engine sees
// the end of its input, answers what is pending and stops.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.changed()
		c.mu.Unlock()
		c.inW.Close()
		c.srv.remove(c)
		go func() {
			select {
			case <-c.done:
			case <-time.After(engineGrace):
				c.cancel()
			}
		}()
	})
}

// finish records the engine's end.
func (c *conn) finish(err error) {
	c.mu.Lock()
	c.finished = true
	c.changed()
	c.mu.Unlock()
	c.srv.remove(c)
	c.cancel()
	close(c.done)
	if err != nil {
		c.log.Warn("connection closed", "error", err)
	} else {
		c.log.Info("connection closed")
	}
}

// idleFor is how long an HTTP connection has had no message and no open
// stream; 0 for one with an open stream, and for a WebSocket.
func (c *conn) idleFor() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.transport != "http" || c.main.leased {
		return 0
	}
	for _, mb := range c.sessions {
		if mb.leased {
			return 0
		}
	}
	return time.Since(c.last)
}

func (c *conn) setRoute(id, session string) {
	c.mu.Lock()
	c.routes[id] = session
	c.mu.Unlock()
}

// setLoad routes the answer to the session/load id, and the session's
// messages until then, to the connection stream.
func (c *conn) setLoad(id, session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.routes[id] = ""
	if session == "" {
		return
	}
	if old, ok := c.loads[id]; ok {
		c.loaded(id, old) // a reused id: its earlier load will not be answered apart
	}
	c.loads[id] = session
	c.loading[session]++
}

// loaded ends the window of the session/load id of session; c.mu is held.
func (c *conn) loaded(id, session string) {
	delete(c.loads, id)
	if c.loading[session]--; c.loading[session] <= 0 {
		delete(c.loading, session)
	}
}

// replyRoute returns, and forgets, the session an agent request went to.
func (c *conn) replyRoute(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.replies[id]
	delete(c.replies, id)
	return s, ok
}

// lease attaches a receiver to the connection's stream (session "") or a
// session's; false when it has one already or the connection is closed.
func (c *conn) lease(session string) (*mailbox, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false
	}
	mb := c.main
	if session != "" {
		if mb = c.sessions[session]; mb == nil {
			mb = &mailbox{}
			c.sessions[session] = mb
		}
	}
	if mb.leased {
		return nil, false
	}
	mb.leased = true
	return mb, true
}

func (c *conn) release(session string, mb *mailbox) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mb.leased = false
	c.last = time.Now()
	if session != "" && len(mb.q) == 0 && c.sessions[session] == mb {
		delete(c.sessions, session)
	}
}

// next takes mb's next message. With none, it returns a channel that is
// closed when there may be one, or end when the stream is over.
func (c *conn) next(mb *mailbox) (msg []byte, wait <-chan struct{}, end bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, true
	}
	if len(mb.q) > 0 {
		msg = mb.q[0]
		mb.q[0] = nil
		mb.q = mb.q[1:]
		c.buffered -= int64(len(msg))
		c.changed()
		return msg, nil, false
	}
	if c.finished {
		return nil, nil, true
	}
	return nil, c.progress, false
}

// deliver routes one message of the engine's to its client.
func (c *conn) deliver(line []byte) {
	if c.transport == "websocket" {
		c.deliverWebSocket(line)
		return
	}
	env := parseEnvelope(line)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if !c.started && env.method == "" && env.id != "" && env.id == c.initID {
		c.started = true
		c.initial <- line
		return
	}
	mb := c.main
	switch {
	case env.method == "" && env.id != "":
		// A response goes where its request came from.
		if s, ok := c.routes[env.id]; ok {
			delete(c.routes, env.id)
			mb = c.session(s)
		}
		if s, ok := c.loads[env.id]; ok {
			c.loaded(env.id, s)
		}
	case env.session != "" && c.loading[env.session] > 0:
		// A load's replay: on the connection stream, before its answer.
		if env.id != "" {
			c.replies[env.id] = ""
		}
	case env.session != "":
		mb = c.session(env.session)
		if env.id != "" {
			c.replies[env.id] = env.session
		}
	case env.id != "":
		c.replies[env.id] = ""
	}
	mb.q = append(mb.q, line)
	c.buffered += int64(len(line))
	c.changed()
	// Hold the engine while the client is behind; give up on a client that
	// reads nothing for StallTimeout.
	stall := c.srv.stallTimeout()
	for c.buffered >= c.srv.maxBuffered() && !c.closed {
		wait := c.progress
		c.mu.Unlock()
		select {
		case <-wait:
			c.mu.Lock()
		case <-time.After(stall):
			c.mu.Lock()
			if c.closed {
				return
			}
			c.log.Warn("closing the connection: its client read none of its output", "buffered", c.buffered, "max_buffered", c.srv.maxBuffered(), "stall", stall)
			c.mu.Unlock()
			c.close()
			c.mu.Lock()
		}
	}
}

// session returns a session's mailbox, made if need be; c.mu is held.
func (c *conn) session(id string) *mailbox {
	if id == "" {
		return c.main
	}
	mb := c.sessions[id]
	if mb == nil {
		mb = &mailbox{}
		c.sessions[id] = mb
	}
	return mb
}

func (c *conn) deliverWebSocket(line []byte) {
	select {
	case <-c.wsReady:
	case <-c.done:
		return
	}
	c.mu.Lock()
	c.last = time.Now()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return
	}
	c.wsMu.Lock()
	defer c.wsMu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.srv.stallTimeout()))
	if err := c.ws.WriteMessage(websocket.TextMessage, line); err != nil {
		c.log.Warn("closing the connection: writing to the WebSocket failed", "error", err)
		go c.close()
	}
}

// wsFree is how much of a WebSocket message is read without a share of the
// server's MaxReading: the messages of most turns.
const wsFree = 64 << 10

// readWebSocket reads the client's next message. One longer than wsFree
// first reserves MaxMessage of the server's MaxReading, waiting for it (the
// client waits on TCP meanwhile; a reservation is whole, so readers never
// wait on each other's halves); release gives it back.
func (c *conn) readWebSocket(ws *websocket.Conn) (typ int, data []byte, release func(), err error) {
	release = func() {}
	typ, r, err := ws.NextReader()
	if err != nil {
		return 0, nil, release, err
	}
	var buf bytes.Buffer
	if _, err = io.CopyN(&buf, r, wsFree+1); err == io.EOF {
		return typ, buf.Bytes(), release, nil
	} else if err != nil {
		return 0, nil, release, err
	}
	s := c.srv
	n := min(s.maxMessage(), s.maxReading())
	if !s.reading.wait(c.done, n, s.maxReading()) {
		return 0, nil, release, errConnClosed
	}
	release = func() { s.reading.give(n) }
	_ = ws.SetReadDeadline(time.Now().Add(pongWait))
	if _, err = buf.ReadFrom(r); err != nil {
		release()
		return 0, nil, func() {}, err
	}
	return typ, buf.Bytes(), release, nil
}

// serveWebSocket pumps the client's messages to the engine until either
// side ends, then closes the socket.
func (c *conn) serveWebSocket(ws *websocket.Conn) {
	c.ws = ws
	close(c.wsReady)
	ws.SetReadLimit(c.srv.maxMessage())
	_ = ws.SetReadDeadline(time.Now().Add(pongWait))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(pongWait)) })
	go func() {
		t := time.NewTicker(pingPeriod)
		defer t.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-t.C:
				c.wsMu.Lock()
				err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(10*time.Second))
				c.wsMu.Unlock()
				if err != nil {
					return
				}
			}
		}
	}()
	go func() {
		// Once the engine has stopped (its answers all written), say so
		// and close, which also ends the read loop below.
		<-c.done
		c.wsMu.Lock()
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "acp-bridge connection closed"), time.Now().Add(time.Second))
		c.wsMu.Unlock()
		ws.Close()
	}()
	for {
		typ, data, release, err := c.readWebSocket(ws)
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				c.log.Warn("closing the connection: the client sent a message over the limit (close 1009)", "limit", c.srv.maxMessage())
			} else {
				c.log.Debug("WebSocket read ended", "error", err)
			}
			break
		}
		_ = ws.SetReadDeadline(time.Now().Add(pongWait))
		if typ != websocket.TextMessage {
			c.log.Debug("ignored a binary WebSocket message", "bytes", len(data))
			release()
			continue
		}
		line := bytes.TrimSpace(data)
		if bytes.ContainsAny(line, "\r\n") {
			if l, err := oneLine(line); err == nil {
				line = l
			} else {
				// Not JSON: let the engine answer it, on one line.
				line = bytes.Map(func(r rune) rune {
					if r == '\r' || r == '\n' {
						return ' '
					}
					return r
				}, line)
			}
		}
		err = c.send(context.Background(), line)
		release()
		if err != nil {
			break
		}
	}
	c.close()
	<-c.done
}

// lineWriter splits the engine's output into lines and delivers each.
type lineWriter struct {
	c       *conn
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.partial = append(w.partial, p...)
			break
		}
		var line []byte
		if len(w.partial) > 0 {
			line = append(w.partial, p[:i]...)
			w.partial = nil
		} else {
			line = bytes.Clone(p[:i])
		}
		p = p[i+1:]
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 {
			continue
		}
		// SSE splits lines at a bare CR too; in JSON one is whitespace
		// (inside a string it is escaped), so a space keeps the message.
		for j, b := range line {
			if b == '\r' {
				line[j] = ' '
			}
		}
		w.c.deliver(line)
	}
	return n, nil
}
