// Streamable HTTP: POST (initialize opening a connection, any other
// message to its engine), GET of a connection's or session's SSE stream,
// and DELETE.

package remote

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

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
