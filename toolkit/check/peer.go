package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// Msg is one message on the wire, as check saw it.
type Msg struct {
	// N is the message's index in the connection's transcript.
	N int
	// Out is true for what check wrote (toward the agent).
	Out bool
	// At is the time since the connection was opened.
	At time.Duration
	// Raw is the message as it was on the wire, without its line ending.
	Raw []byte

	obj    bool   // a JSON object
	id     string // raw id, "" when absent
	method string
}

// Object reports whether the message is a JSON object.
func (m Msg) Object() bool { return m.obj }

// ID is the message's raw id ("" when it has none).
func (m Msg) ID() string { return m.id }

// Method is the message's method ("" for a response).
func (m Msg) Method() string { return m.method }

// IsResponse: an object with an id and no method.
func (m Msg) IsResponse() bool { return m.obj && m.id != "" && m.method == "" }

// IsRequest: a method and an id.
func (m Msg) IsRequest() bool { return m.method != "" && m.id != "" }

// IsNotification: a method and no id.
func (m Msg) IsNotification() bool { return m.method != "" && m.id == "" }

// Get reads a gjson path from the message.
func (m Msg) Get(path string) gjson.Result { return gjson.GetBytes(m.Raw, path) }

// IsError: a response carrying an error.
func (m Msg) IsError() bool { return m.IsResponse() && m.Get("error").Exists() }

func newMsg(raw []byte) Msg {
	m := Msg{Raw: raw}
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		m.obj = true
		if id := gjson.GetBytes(t, "id"); id.Exists() {
			m.id = id.Raw
		}
		if meth := gjson.GetBytes(t, "method"); meth.Type == gjson.String {
			m.method = meth.Str
		} else if meth.Exists() {
			m.method = meth.Raw
		}
	}
	return m
}

var (
	errTimeout = errors.New("timed out")
	errEOF     = errors.New("the agent closed the connection")
)

// peer is check's side of one connection: it plays the editor, keeps the
// transcript, and answers the agent's requests the way a plain editor does.
type peer struct {
	conn  Conn
	start time.Time
	opts  *Options
	// ctx is the run's context; stopWatch releases its close-on-cancel.
	ctx       context.Context
	stopWatch func() bool

	mu         sync.Mutex
	transcript []Msg
	queue      []Msg         // received, not yet consumed by next
	signal     chan struct{} // a message was queued or the connection ended
	ended      bool
	readErr    error

	nextID  int
	sent    map[string]string // our request ids → method
	answers map[string]int    // our request ids → transcript index of the answer

	// holdPermissions keeps session/request_permission unanswered (in held)
	// instead of allowing it.
	holdPermissions bool
	held            []Msg
}

// dialPeer connects to the agent, giving the dial o.Timeout. Cancelling
// ctx (a signal) closes the connection, which ends every wait on it.
func dialPeer(ctx context.Context, o *Options) (*peer, error) {
	dctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	c, err := o.Dialer.Dial(dctx)
	if err != nil {
		return nil, err
	}
	p := &peer{conn: c, start: time.Now(), opts: o, ctx: ctx, signal: make(chan struct{}, 1),
		sent: map[string]string{}, answers: map[string]int{}}
	p.stopWatch = context.AfterFunc(ctx, func() { c.Close() })
	go p.read()
	return p, nil
}

func (p *peer) read() {
	for {
		raw, err := p.conn.Recv()
		p.mu.Lock()
		if err != nil {
			p.ended = true
			p.readErr = err
			p.mu.Unlock()
			p.wake()
			return
		}
		m := newMsg(raw)
		m.At = time.Since(p.start)
		m.N = len(p.transcript)
		if m.IsResponse() {
			if _, ok := p.sent[m.id]; ok {
				if _, dup := p.answers[m.id]; !dup {
					p.answers[m.id] = m.N
				}
			}
		}
		p.transcript = append(p.transcript, m)
		p.queue = append(p.queue, m)
		p.mu.Unlock()
		p.wake()
	}
}

func (p *peer) wake() {
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

func (p *peer) close() {
	p.stopWatch()
	p.conn.Close()
}

// record appends an outgoing message to the transcript and sends it.
func (p *peer) write(raw []byte) (Msg, error) {
	p.mu.Lock()
	m := newMsg(raw)
	m.Out = true
	m.At = time.Since(p.start)
	m.N = len(p.transcript)
	p.transcript = append(p.transcript, m)
	if m.IsRequest() {
		// Requests written raw (invalid on purpose) get answers too.
		if _, ok := p.sent[m.id]; !ok {
			p.sent[m.id] = m.method
		}
	}
	p.mu.Unlock()
	return m, p.conn.Send(raw)
}

// request sends a request and returns its raw id.
func (p *peer) request(method string, params any) (string, error) {
	p.mu.Lock()
	p.nextID++
	id := strconv.Itoa(p.nextID)
	p.sent[id] = method
	p.mu.Unlock()
	raw, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": p.nextIDValue(id), "method": method, "params": params})
	if err != nil {
		return "", err
	}
	_, err = p.write(raw)
	return id, err
}

func (p *peer) nextIDValue(id string) json.RawMessage { return json.RawMessage(id) }

// notify sends a notification and returns it as recorded.
func (p *peer) notify(method string, params any) (Msg, error) {
	raw, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if err != nil {
		return Msg{}, err
	}
	return p.write(raw)
}

func (p *peer) reply(id string, result any, code int, message string) {
	m := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id)}
	if message != "" {
		m["error"] = map[string]any{"code": code, "message": message}
	} else {
		m["result"] = result
	}
	raw, _ := json.Marshal(m)
	_, _ = p.write(raw)
}

// next returns the next received message, answering the agent's requests
// on the way, or errTimeout / errEOF.
func (p *peer) next(deadline time.Time) (Msg, error) {
	for {
		p.mu.Lock()
		if len(p.queue) > 0 {
			m := p.queue[0]
			p.queue = p.queue[1:]
			p.mu.Unlock()
			if m.IsRequest() {
				p.serve(m)
			}
			return m, nil
		}
		ended := p.ended
		p.mu.Unlock()
		if ended {
			return Msg{}, errEOF
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return Msg{}, errTimeout
		}
		t := time.NewTimer(wait)
		select {
		case <-p.signal:
		case <-t.C:
		}
		t.Stop()
	}
}

// await consumes messages until one satisfies pred, for at most d.
func (p *peer) await(d time.Duration, pred func(Msg) bool) (Msg, error) {
	deadline := time.Now().Add(d)
	for {
		m, err := p.next(deadline)
		if err != nil {
			return Msg{}, err
		}
		if pred(m) {
			return m, nil
		}
	}
}

// response waits for the answer to our request id.
func (p *peer) response(id string, d time.Duration) (Msg, error) {
	return p.await(d, func(m Msg) bool { return m.IsResponse() && m.id == id })
}

// call sends a request and waits for its answer.
func (p *peer) call(method string, params any) (Msg, error) {
	id, err := p.request(method, params)
	if err != nil {
		return Msg{}, fmt.Errorf("%s: cannot send it (has the agent exited?): %w", method, err)
	}
	m, err := p.response(id, p.opts.Timeout)
	if err != nil {
		return Msg{}, fmt.Errorf("%s: no answer: %w", method, err)
	}
	return m, nil
}

// drain consumes everything for the quiet period, returning early at EOF.
func (p *peer) drain(d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		if _, err := p.next(deadline); err != nil {
			return
		}
	}
}

// settle sends a request no agent implements and waits for its answer and
// then a quiet period: whatever the agent had queued before it is in the
// transcript afterwards. It returns the answer's transcript index (-1
// when none came).
func (p *peer) settle() int {
	id, err := p.request("acp-check/barrier", map[string]any{})
	n := -1
	if err == nil {
		if m, err := p.response(id, p.opts.Timeout); err == nil {
			n = m.N
		}
	}
	p.drain(p.opts.Quiet)
	return n
}

// serve answers a request from the agent as a plain editor that offers
// only fs/read_text_file does.
func (p *peer) serve(m Msg) {
	switch m.method {
	case "session/request_permission":
		if p.holdPermissions {
			p.held = append(p.held, m)
			return
		}
		opts := m.Get("params.options").Array()
		choice := ""
		for _, o := range opts {
			if k := o.Get("kind").Str; k == "allow_once" || k == "allow_always" {
				choice = o.Get("optionId").Str
				break
			}
		}
		if choice == "" && len(opts) > 0 {
			choice = opts[0].Get("optionId").Str
		}
		if choice == "" {
			p.reply(m.id, map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}, 0, "")
			return
		}
		p.reply(m.id, map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": choice}}, 0, "")
	case "fs/read_text_file":
		path := m.Get("params.path").Str
		if !filepath.IsAbs(path) {
			p.reply(m.id, nil, -32602, fmt.Sprintf("Invalid params: path %q is not absolute; ACP paths must be absolute", path))
			return
		}
		rel, err := filepath.Rel(p.opts.Cwd, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			p.reply(m.id, nil, -32602, fmt.Sprintf("Invalid params: %s is outside the session's cwd %s", path, p.opts.Cwd))
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			p.reply(m.id, nil, -32002, "Resource not found: "+err.Error())
			return
		}
		p.reply(m.id, map[string]any{"content": string(b)}, 0, "")
	default:
		p.reply(m.id, nil, -32601, fmt.Sprintf("Method not found: %s (acp-bridge check offers only fs/read_text_file and session/request_permission)", m.method))
	}
}

// answerHeld answers every held permission request "cancelled".
func (p *peer) answerHeld() {
	for _, m := range p.held {
		p.reply(m.id, map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}, 0, "")
	}
	p.held = nil
}

// awaitCancelled answers "cancelled" the permission requests held, and
// those that come meanwhile, and consumes messages until one satisfies
// pred, for at most d: a client seeing a cancelled turn to its end. With
// no request held back it is await.
func (p *peer) awaitCancelled(d time.Duration, pred func(Msg) bool) (Msg, error) {
	p.answerHeld()
	return p.await(d, func(m Msg) bool {
		if m.method == "session/request_permission" {
			p.answerHeld()
		}
		return pred(m)
	})
}

// messages returns a copy of the transcript.
func (p *peer) messages() []Msg {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Msg(nil), p.transcript...)
}

// methodOf returns the method of our request id.
func (p *peer) methodOf(id string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.sent[id]
	return m, ok
}
