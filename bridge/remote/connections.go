// The server's table of connections: opening one (bounded by
// MaxConnections, refused while shutting down), looking it up by its id,
// removing it, and reaping the idle ones.

package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"time"
)

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
