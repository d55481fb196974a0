// Package acpclient is a minimal ACP v1 client: the editor's side of a
// newline-delimited JSON-RPC connection to an agent (or to acp-bridge in
// front of one). The demo's scripted editor and the protocol-testing tools
// drive agents with it. It is hand-written, not acp-go-sdk, which is a
// test-only dependency and stays out of the binary; it passes params and
// results as raw JSON, so nothing an agent sends is lost or reshaped.
package acpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/acp-bridge/acp-bridge/internal/wire/ndjson"
	"github.com/acp-bridge/acp-bridge/translate"
)

// Handler receives what the agent sends that is not an answer. Its funcs
// run on the connection's reader goroutine, one at a time and in the order
// the lines arrived; they may call the Conn's methods (Call only with care:
// waiting in a handler stops the reading of its answer).
type Handler struct {
	// Request answers a request from the agent (session/request_permission,
	// fs/*, terminal/*). A nil Request answers every request -32601.
	Request func(method string, params json.RawMessage) (result any, err *Error)
	// Notification handles a notification (session/update, …); nil drops
	// them.
	Notification func(method string, params json.RawMessage)
	// Tap, if not nil, sees every line the connection reads (out false) or
	// writes (out true), borrowed for the call.
	Tap func(out bool, line []byte)
}

// Error is a JSON-RPC error answer.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

// ErrClosed is returned for calls that cannot be answered because the
// connection's input ended or Close was called.
var ErrClosed = errors.New("acpclient: the agent's output ended before an answer")

// Conn is one client connection. Its methods are safe for concurrent use.
type Conn struct {
	h      Handler
	w      io.WriteCloser
	frames chan []byte // to writeLoop; closed by Close

	mu      sync.Mutex
	closed  bool
	nextID  uint64
	pending map[uint64]*Pending

	readDone  chan struct{}
	writeDone chan struct{}
}

type answer struct {
	result json.RawMessage
	err    error // an *Error, or ErrClosed
}

// New starts a connection that reads the agent's output from r and writes
// the agent's input to w, one JSON-RPC message per line. Request ids count
// from 0. Close ends it.
func New(r io.Reader, w io.WriteCloser, h Handler) *Conn {
	c := &Conn{
		h:         h,
		w:         w,
		frames:    make(chan []byte, 64),
		pending:   make(map[uint64]*Pending),
		readDone:  make(chan struct{}),
		writeDone: make(chan struct{}),
	}
	go c.readLoop(r)
	go c.writeLoop()
	return c
}

// Call sends a request and waits for its answer: the raw result, or an
// *Error for an error answer, or ctx's error, or ErrClosed.
func (c *Conn) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p, err := c.Start(method, params)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Pending is a request whose answer has not been waited for yet.
type Pending struct {
	Method string
	ID     uint64
	done   chan struct{} // closed once a is set
	a      answer
}

// Start sends a request without waiting for its answer.
func (c *Conn) Start(method string, params any) (*Pending, error) {
	b, err := marshal(params)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	id := c.nextID
	c.nextID++
	p := &Pending{Method: method, ID: id, done: make(chan struct{})}
	c.pending[id] = p
	c.mu.Unlock()
	if err := c.send(translate.RequestFrame(translate.IntID(id), method, b)); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, err
	}
	return p, nil
}

// Done is closed when the answer has arrived (or can no longer arrive), for
// selecting on it together with other events.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait waits for the answer: the raw result, an *Error, ErrClosed, or ctx's
// error.
func (p *Pending) Wait(ctx context.Context) (json.RawMessage, error) {
	select {
	case <-p.done:
		if p.a.err != nil {
			return nil, p.a.err
		}
		return p.a.result, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// finish records the answer of p; called once, by readLoop.
func (p *Pending) finish(a answer) {
	p.a = a
	close(p.done)
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	b, err := marshal(params)
	if err != nil {
		return err
	}
	return c.send(translate.NotificationFrame(method, b))
}

// Done is closed when the agent's output has ended.
func (c *Conn) Done() <-chan struct{} { return c.readDone }

// Close writes what is queued, then closes the agent's input. It does not
// wait for the agent's output to end (see Done). Safe to call twice.
func (c *Conn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.frames)
	}
	c.mu.Unlock()
	<-c.writeDone
	return nil
}

func marshal(params any) (json.RawMessage, error) {
	switch p := params.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return p, nil
	}
	return json.Marshal(params)
}

func (c *Conn) send(frame []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.frames <- frame // writeLoop always drains, so this never blocks for long
	return nil
}

// writeLoop is the only writer of w. After a write error it keeps draining
// so that senders never block.
func (c *Conn) writeLoop() {
	defer close(c.writeDone)
	var werr error
	for frame := range c.frames {
		if werr != nil {
			continue
		}
		if c.h.Tap != nil {
			c.h.Tap(true, frame)
		}
		_, werr = c.w.Write(append(frame, '\n'))
	}
	c.w.Close()
}

// readLoop is the only reader of the agent's output. When it ends, every
// pending call is answered ErrClosed.
func (c *Conn) readLoop(r io.Reader) {
	defer func() {
		c.mu.Lock()
		for id, p := range c.pending {
			p.finish(answer{err: ErrClosed})
			delete(c.pending, id)
		}
		c.mu.Unlock()
		close(c.readDone)
	}()
	lines := ndjson.NewReader(r, 0)
	for {
		line, err := lines.Next()
		if err != nil {
			var tooLong *ndjson.TooLongError
			if errors.As(err, &tooLong) {
				continue
			}
			return
		}
		if c.h.Tap != nil {
			c.h.Tap(false, line)
		}
		c.handle(line)
	}
}

func (c *Conn) handle(line []byte) {
	env, perr := translate.ParseEnvelope(line)
	if perr != nil {
		return
	}
	switch {
	case env.IsResponse():
		id, err := strconv.ParseUint(string(env.ID), 10, 64)
		if err != nil {
			return
		}
		c.mu.Lock()
		p := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if p == nil {
			return
		}
		a := answer{result: env.Result}
		if env.Error != nil {
			e := &Error{}
			if json.Unmarshal(env.Error, e) != nil {
				e = &Error{Code: translate.CodeInternalError, Message: string(env.Error)}
			}
			a.err = e
		}
		p.finish(a)
	case env.IsNotification():
		if c.h.Notification != nil {
			c.h.Notification(env.Method, env.Params)
		}
	case env.IsRequest():
		c.answer(env.ID, env.Method, env.Params)
	}
}

// answer replies to one request from the agent.
func (c *Conn) answer(id json.RawMessage, method string, params json.RawMessage) {
	if c.h.Request == nil {
		c.reply(id, nil, &Error{Code: translate.CodeMethodNotFound, Message: fmt.Sprintf("this client does not implement %s", method)})
		return
	}
	result, rerr := c.h.Request(method, params)
	c.reply(id, result, rerr)
}

func (c *Conn) reply(id json.RawMessage, result any, rerr *Error) {
	if rerr != nil {
		b, _ := json.Marshal(rerr)
		_ = c.send(translate.ErrorFrame(id, b))
		return
	}
	b, err := marshal(result)
	if err != nil || b == nil {
		b = json.RawMessage("null")
	}
	_ = c.send(translate.ResultFrame(id, b))
}
