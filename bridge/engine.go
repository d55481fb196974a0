package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/ndjson"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
)

const (
	defaultRequestTimeout = 60 * time.Second
	defaultCancelGrace    = 5 * time.Second
)

// request is one editor request the engine has not answered yet, or an
// internal request the engine made itself (the initialize replayed on a new
// per-session link). Answering deletes it from engine.pending: the only
// retire path, so nothing is answered twice.
type request struct {
	ref     translate.Ref
	id      json.RawMessage // the editor's raw id; nil for internal requests
	key     string          // canonical form of id, for $/cancel_request
	method  string
	link    *link
	session string // sessionId the request names, if any
	cwd     string // session/new, load, resume: the cwd asked for
	timer   *time.Timer
}

// call is a request the engine sent to the editor on a translator's behalf.
type call struct {
	id   json.RawMessage // the editor-side id the engine gave it
	link *link
	ref  translate.Ref
}

// session is what the engine knows of one ACP session.
type session struct {
	id   string
	link *link
	cwd  string
	// prompts are the session/prompt requests still pending, oldest first.
	prompts []translate.Ref
	// draining is set when the engine answered a prompt itself after the
	// cancel grace period: updates the agent still sends for that turn are
	// dropped until its own late answer arrives or the next prompt starts.
	draining bool
	// graceArmed is true while a cancel grace timer is running.
	graceArmed bool
}

// engine is the state of one Serve call. The fields under "loop-owned" are
// touched only by the loop goroutine (and, after it has returned, by Serve).
type engine struct {
	b   *Bridge
	log hclog.Logger
	ctx context.Context

	out      *editorWriter
	lines    chan editorLine
	frames   chan agentFrame
	tasks    chan func() // work handed back to the loop by timers and helpers
	done     chan struct{}
	linkWG   sync.WaitGroup
	helperWG sync.WaitGroup

	// loop-owned
	nextRef    translate.Ref
	nextLinkID int
	nextCallID uint64
	pending    map[translate.Ref]*request
	byEditorID map[string]translate.Ref
	calls      map[string]*call
	sessions   map[string]*session
	// abandoned maps prompts the engine answered after the cancel grace to
	// their session, until the agent's own late answer arrives.
	abandoned  map[translate.Ref]string
	links      []*link
	control    *link
	init       initState
	initParams json.RawMessage // the editor's initialize params, replayed on new session links
	// held are editor messages that arrived while initialize was pending;
	// they are handled, in order, once it has been answered.
	held       [][]byte
	editorCaps clientCaps
	// giveUp, once set (at shutdown), is closed when writes to the editor
	// must stop waiting for room; nil means wait as long as it takes.
	giveUp <-chan struct{}
	// dropped counts messages the editor could not be given (see writeEditor).
	dropped int
}

type agentFrame struct {
	link  *link
	frame []byte
	err   error // non-nil: the link is lost
}

// Serve serves one editor: it reads ACP messages from editorIn and writes
// ACP messages to editorOut until editorIn ends or ctx is done. Then it
// answers every request still pending, closes every agent link (stopping
// child processes) and returns. It returns nil on a clean end of input.
func (b *Bridge) Serve(ctx context.Context, editorIn io.Reader, editorOut io.Writer) error {
	e := &engine{
		b:          b,
		log:        b.Logger,
		out:        newEditorWriter(editorOut),
		lines:      make(chan editorLine),
		frames:     make(chan agentFrame, 64),
		tasks:      make(chan func(), 16),
		done:       make(chan struct{}),
		pending:    make(map[translate.Ref]*request),
		byEditorID: make(map[string]translate.Ref),
		calls:      make(map[string]*call),
		sessions:   make(map[string]*session),
		abandoned:  make(map[translate.Ref]string),
	}
	if e.log == nil {
		e.log = hclog.NewNullLogger()
	}
	if b.NewTranslator == nil || b.Dial == nil {
		return errors.New("bridge: NewTranslator and Dial are required")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.ctx = ctx

	go e.out.writeLoop()
	reader := &editorReader{r: ndjson.NewReader(editorIn, b.MaxMessage), lines: e.lines}
	go reader.readLoop(ctx)

	err := e.loop(ctx)

	// Shut down within a few seconds whatever the peers do: links close in
	// parallel (each child gets its staged stop) while pending requests are
	// answered, and writes to an editor that stopped reading give up.
	close(e.done) // from here on, link goroutines and timers stop reporting
	links := slices.Clone(e.links)
	linksClosed := make(chan struct{})
	go func() {
		defer close(linksClosed)
		for _, l := range links {
			e.closeLinkAsync(l)
		}
		e.linkWG.Wait()
	}()
	giveUp := make(chan struct{})
	defer time.AfterFunc(shutdownWriteWait, func() { close(giveUp) }).Stop()
	e.giveUp = giveUp
	shutting := translate.Errorf(translate.CodeInternalError, "acp-bridge is shutting down")
	for _, req := range e.pendingInOrder() {
		e.fail(req, shutting)
	}
	for _, frame := range e.held { // held behind an initialize that never finished
		if env, perr := translate.ParseEnvelope(frame); perr == nil && env.IsRequest() {
			e.writeEditor(translate.ErrorFrame(env.ID, shutting.JSON()))
		}
	}
	<-linksClosed
	cancel()
	e.helperWG.Wait()
	if e.dropped > 1 {
		e.log.Warn("messages for the editor dropped while it was gone or not reading", "count", e.dropped)
	}
	if werr := e.out.close(shutdownWriteWait); werr != nil && err == nil {
		err = fmt.Errorf("writing to the editor: %w", werr)
	}
	return err
}

// shutdownWriteWait bounds each of the two waits on the editor at shutdown
// (queueing the last answers, flushing them), so that the bridge exits even
// when the editor no longer reads.
const shutdownWriteWait = time.Second

// loop is the engine: the one goroutine that owns translators, sessions and
// the pending tables. It never blocks on an agent; it blocks on the editor
// only when the editor stops reading (backpressure).
func (e *engine) loop(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			e.log.Info("stopping", "reason", context.Cause(ctx))
			return nil
		case <-e.out.done:
			return fmt.Errorf("writing to the editor: %w", e.out.err)
		case l := <-e.lines:
			if l.err != nil {
				var tooLong *ndjson.TooLongError
				if errors.As(l.err, &tooLong) {
					e.tooLong(tooLong)
					continue
				}
				if errors.Is(l.err, io.EOF) {
					e.log.Info("editor closed its input; shutting down")
					return nil
				}
				return fmt.Errorf("reading from the editor: %w", l.err)
			}
			e.fromEditor(l.frame)
		case f := <-e.frames:
			if f.err != nil {
				e.linkLost(f.link, f.err)
				continue
			}
			e.fromAgent(f.link, f.frame)
		case task := <-e.tasks:
			task()
		}
		e.releaseHeld()
	}
}

// releaseHeld handles the messages held while initialize was pending, once
// it no longer is (answered or failed: then they get the usual error).
func (e *engine) releaseHeld() {
	for len(e.held) > 0 && e.init != initPending {
		frame := e.held[0]
		e.held = e.held[1:]
		e.fromEditor(frame)
	}
}

// post runs f on the loop. It is how timers and helper goroutines report.
func (e *engine) post(f func()) {
	select {
	case e.tasks <- f:
	case <-e.done:
	}
}

// closeLinkAsync closes l off the loop: stopping a child process can take
// its whole grace period.
func (e *engine) closeLinkAsync(l *link) {
	e.linkWG.Add(1)
	go func() {
		defer e.linkWG.Done()
		l.close()
	}()
}

// --- editor → engine ---------------------------------------------------------

// tooLong answers a line over the size limit. The id is recovered from the
// start of the line when it comes before the large payload, as it does in
// the SDKs' serialisations.
func (e *engine) tooLong(err *ndjson.TooLongError) {
	id := json.RawMessage("null")
	if r := gjson.GetBytes(err.Head, "id"); r.Exists() && (r.Type == gjson.Number || r.Type == gjson.String) {
		id = json.RawMessage(r.Raw)
	}
	// When the id comes after the payload it is lost with it; then the
	// answer has id null, the JSON-RPC rule for a request whose id cannot
	// be read. Staying silent could leave an editor request waiting forever.
	e.log.Warn("editor message over the size limit; answered with an error", "limit", err.Max, "id", string(id),
		"method", gjson.GetBytes(err.Head, "method").Str)
	e.writeEditor(translate.ErrorFrame(id, translate.Errorf(translate.CodeInvalidRequest,
		"message larger than the %d-byte limit (raise max_message / --max-message)", err.Max).JSON()))
}

func (e *engine) fromEditor(frame []byte) {
	if e.log.IsTrace() {
		e.log.Trace("editor → bridge", "message", truncate(frame, 2048))
	}
	env, perr := translate.ParseEnvelope(frame)
	if perr == nil && env.Version != "2.0" {
		perr = translate.Errorf(translate.CodeInvalidRequest, `"jsonrpc" must be "2.0"`)
	}
	if perr != nil {
		if perr.Code != translate.CodeParseError && env.ID == nil && env.Method != "" {
			e.log.Warn("invalid notification from the editor ignored", "error", perr)
			return
		}
		id := env.ID
		if id == nil || perr.Code == translate.CodeParseError {
			id = json.RawMessage("null")
		}
		e.log.Warn("invalid message from the editor", "error", perr)
		e.writeEditor(translate.ErrorFrame(id, perr.JSON()))
		return
	}
	if e.init == initPending && env.Method != "initialize" {
		// An editor may pipeline session/new behind initialize; hold it
		// rather than refuse it, and keep the order.
		e.held = append(e.held, frame)
		return
	}
	switch {
	case env.IsResponse():
		e.editorResponse(&env)
	case env.IsNotification():
		e.editorNotification(&env)
	default:
		e.editorRequest(&env)
	}
}

func (e *engine) editorRequest(env *translate.Envelope) {
	e.nextRef++
	req := &request{
		ref:    e.nextRef,
		id:     append(json.RawMessage(nil), env.ID...),
		key:    idKey(env.ID),
		method: env.Method,
	}
	e.pending[req.ref] = req
	e.byEditorID[req.key] = req.ref

	if err := checkParams(env.Method, env.Params); err != nil {
		e.fail(req, err)
		return
	}
	if env.Method == "initialize" {
		e.initialize(req, env.Params)
		return
	}
	if e.init != initDone {
		e.fail(req, translate.Errorf(translate.CodeInvalidRequest, "the first request must be initialize"))
		return
	}
	if !knownAgentMethod(env.Method) {
		e.fail(req, translate.Errorf(translate.CodeMethodNotFound, "%q is not an ACP v1 agent method", env.Method))
		return
	}
	e.armTimeout(req)
	req.session = gjson.GetBytes(env.Params, "sessionId").Str
	switch env.Method {
	case "session/new":
		req.cwd = gjson.GetBytes(env.Params, "cwd").Str
		if e.b.Dialect.PerSession {
			e.newSessionLink(req, env.Params)
			return
		}
	case "session/load", "session/resume":
		req.cwd = gjson.GetBytes(env.Params, "cwd").Str
	case "session/prompt":
		if e.sessions[req.session] == nil && !e.b.Dialect.PerSession && e.control != nil {
			// A session the engine did not see created (session/fork, an
			// extension): it lives on the one agent link, and its prompts
			// still need cancel-grace tracking.
			e.sessions[req.session] = &session{id: req.session, link: e.control}
		}
		if s := e.sessions[req.session]; s != nil {
			s.prompts = append(s.prompts, req.ref)
			if s.draining {
				e.log.Debug("new prompt ends the drop of late updates", "session", s.id)
				s.draining = false
			}
		}
	}
	l, err := e.route(req.session)
	if err != nil {
		e.fail(req, err)
		return
	}
	req.link = l
	e.feed(l, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: env.Method, Body: env.Params})
}

// route picks the link for a message naming sessionID ("" for none).
func (e *engine) route(sessionID string) (*link, *translate.Error) {
	if s := e.sessions[sessionID]; s != nil {
		if s.link.down != nil {
			return nil, e.lostError(s.link)
		}
		return s.link, nil
	}
	if sessionID != "" && e.b.Dialect.PerSession {
		return nil, translate.Errorf(translate.CodeInvalidParams, "unknown sessionId %q", sessionID)
	}
	if e.control == nil {
		return nil, translate.Errorf(translate.CodeInternalError, "no agent connection")
	}
	if e.control.down != nil {
		return nil, e.lostError(e.control)
	}
	return e.control, nil
}

func (e *engine) editorNotification(env *translate.Envelope) {
	if e.init != initDone {
		e.log.Debug("notification before initialize ignored", "method", env.Method)
		return
	}
	sid := gjson.GetBytes(env.Params, "sessionId").Str
	switch env.Method {
	case "$/cancel_request":
		r := gjson.GetBytes(env.Params, "requestId")
		if !r.Exists() {
			return
		}
		ref, ok := e.byEditorID[idKey(json.RawMessage(r.Raw))]
		req := e.pending[ref]
		if !ok || req == nil || req.link == nil || req.link.down != nil {
			return // already answered, or never seen: ignored (acp-spec.md §13.2)
		}
		e.feed(req.link, translate.Msg{Kind: translate.CancelRequest, Ref: ref})
		return
	case "session/cancel":
		l, err := e.route(sid)
		if err != nil {
			e.log.Debug("session/cancel for an unroutable session ignored", "session", sid, "error", err)
			return
		}
		e.feed(l, translate.Msg{Kind: translate.Notification, Method: env.Method, Body: env.Params})
		e.armCancelGrace(sid)
		return
	}
	if !knownAgentNotification(env.Method) {
		e.log.Debug("unknown notification from the editor ignored", "method", env.Method)
		return
	}
	l, err := e.route(sid)
	if err != nil {
		e.log.Debug("notification for an unroutable session ignored", "method", env.Method, "error", err)
		return
	}
	e.feed(l, translate.Msg{Kind: translate.Notification, Method: env.Method, Body: env.Params})
}

func (e *engine) editorResponse(env *translate.Envelope) {
	key := idKey(env.ID)
	c := e.calls[key]
	if c == nil {
		e.log.Warn("response from the editor to an unknown request dropped", "id", string(env.ID))
		return
	}
	delete(e.calls, key)
	delete(c.link.calls, c.ref)
	if c.link.down != nil {
		return
	}
	e.feed(c.link, translate.Msg{Kind: translate.Response, Ref: c.ref, Body: env.Result, Error: env.Error})
}

// --- engine ↔ translator -------------------------------------------------------

func (e *engine) feed(l *link, m translate.Msg) {
	outs, err := l.tr.FromEditor(m)
	// Outputs first: a translator that also returns an error may already
	// have answered the request more precisely than -32603 can.
	e.apply(l, outs)
	if err != nil {
		e.log.Error("translator failed on an editor message", "link", l.String(), "method", m.Method, "error", err)
		if m.Kind == translate.Request {
			if req := e.pending[m.Ref]; req != nil {
				e.fail(req, translate.Errorf(translate.CodeInternalError, "%v", err))
			}
		}
	}
}

func (e *engine) fromAgent(l *link, frame []byte) {
	if l.down != nil {
		return
	}
	if e.log.IsTrace() {
		e.log.Trace("agent → bridge", "link", l.String(), "frame", truncate(frame, 2048))
	}
	outs, err := l.tr.FromAgent(frame)
	if err != nil {
		e.log.Warn("unusable frame from the agent", "link", l.String(), "error", err, "frame", truncate(frame, 200))
	}
	e.apply(l, outs)
}

// apply carries out a translator's outputs in order. This is the ordering
// guarantee: a turn's updates are written before its prompt response because
// the translator returned them first and nothing here reorders.
func (e *engine) apply(l *link, outs []translate.Out) {
	for _, o := range outs {
		switch o.Kind {
		case translate.Reply, translate.Fail:
			e.translatorAnswer(l, o)
		case translate.Notify:
			e.notify(o)
		case translate.Call:
			e.callEditor(l, o)
		case translate.CancelCall:
			if c := e.calls[l.calls[o.Ref]]; c != nil {
				e.cancelEditorCall(c)
			}
		case translate.Frame:
			if e.log.IsTrace() {
				e.log.Trace("bridge → agent", "link", l.String(), "frame", truncate(o.Body, 2048))
			}
			l.out.push(o.Body)
		default:
			e.log.Error("translator returned an output of unknown kind", "kind", o.Kind)
		}
	}
}

func (e *engine) notify(o translate.Out) {
	if o.Method == "session/update" {
		sid := gjson.GetBytes(o.Body, "sessionId").Str
		if s := e.sessions[sid]; s != nil && s.draining {
			e.log.Info("late update after the bridge ended a cancelled turn dropped", "session", sid,
				"update", gjson.GetBytes(o.Body, "update.sessionUpdate").Str)
			return
		}
	}
	e.writeEditor(translate.NotificationFrame(o.Method, o.Body))
}

func (e *engine) callEditor(l *link, o translate.Out) {
	sid := gjson.GetBytes(o.Body, "sessionId").Str
	s := e.sessions[sid]
	if s != nil && s.draining && o.Method == "session/request_permission" {
		// The editor already saw this turn end; a permission prompt now would
		// dangle. Cancelled is the answer the editor itself must give after a
		// cancel (acp-spec.md §13.1).
		e.log.Info("permission request after the bridge ended a cancelled turn answered cancelled", "session", sid)
		e.feed(l, translate.Msg{Kind: translate.Response, Ref: o.Ref, Body: json.RawMessage(`{"outcome":{"outcome":"cancelled"}}`)})
		return
	}
	if e.servesFSLocally(o.Method) {
		e.serveLocalFS(l, o, s)
		return
	}
	e.nextCallID++
	id := translate.IntID(e.nextCallID)
	key := idKey(id)
	e.calls[key] = &call{id: id, link: l, ref: o.Ref}
	l.calls[o.Ref] = key
	e.writeEditor(translate.RequestFrame(id, o.Method, o.Body))
}

// translatorAnswer writes a translator's Reply or Fail for an editor request.
func (e *engine) translatorAnswer(l *link, o translate.Out) {
	req := e.pending[o.Ref]
	if req == nil {
		e.staleAnswer(l, o)
		return
	}
	if req.id == nil { // internal: the initialize replayed on a session link
		delete(e.pending, req.ref)
		if o.Kind == translate.Fail {
			e.log.Error("agent refused the replayed initialize", "link", l.String(), "error", string(o.Body))
		}
		return
	}
	if o.Kind == translate.Fail {
		e.failRaw(req, o.Body)
		e.afterFailure(req)
		return
	}
	// Retire before afterSuccess: closing a session may close its link,
	// which fails whatever is still pending on it.
	e.retire(req)
	body, err := e.afterSuccess(req, o.Body)
	if err != nil {
		e.writeEditor(translate.ErrorFrame(req.id, err.JSON()))
		return
	}
	e.writeEditor(translate.ResultFrame(req.id, body))
}

// staleAnswer handles an answer for a request the engine already answered
// itself (timeout, cancel grace, link loss). The late answer to a prompt the
// engine ended after the grace period means that turn is over: its
// session's late updates are no longer dropped.
func (e *engine) staleAnswer(l *link, o translate.Out) {
	if sid, ok := e.abandoned[o.Ref]; ok {
		delete(e.abandoned, o.Ref)
		if s := e.sessions[sid]; s != nil && s.draining {
			s.draining = false
			e.log.Info("agent ended the turn the bridge had already answered; late updates no longer dropped", "session", sid)
		}
	}
	e.log.Debug("late answer for a request already answered dropped", "link", l.String())
}

// afterSuccess updates the engine's view of sessions from a successful answer
// and rewrites the answers the engine owns.
func (e *engine) afterSuccess(req *request, result json.RawMessage) (json.RawMessage, *translate.Error) {
	if strings.TrimSpace(string(result)) == "null" || len(result) == 0 {
		// ACP results are objects; older peers send null (acp-spec.md §2.1).
		if !strings.HasPrefix(req.method, "_") {
			result = json.RawMessage("{}")
		}
	}
	switch req.method {
	case "initialize":
		return e.initialized(result)
	case "session/new", "session/fork":
		sid := gjson.GetBytes(result, "sessionId").Str
		if sid != "" && e.sessions[sid] == nil {
			e.sessions[sid] = &session{id: sid, link: req.link, cwd: req.cwd}
		}
	case "session/load", "session/resume":
		if e.sessions[req.session] == nil && req.session != "" {
			e.sessions[req.session] = &session{id: req.session, link: req.link, cwd: req.cwd}
		}
	case "session/close":
		if s := e.sessions[req.session]; s != nil {
			delete(e.sessions, req.session)
			if e.b.Dialect.PerSession && s.link != e.control {
				e.retireLink(s.link, errors.New("session closed"))
			}
		}
	}
	return result, nil
}

func (e *engine) afterFailure(req *request) {
	switch req.method {
	case "initialize":
		e.init = initNone // the editor may retry
	case "session/new":
		if e.b.Dialect.PerSession {
			if s := e.sessions[req.session]; s != nil && s.link == req.link {
				delete(e.sessions, req.session)
				e.retireLink(s.link, errors.New("session/new failed"))
			}
		}
	}
}

// --- answers -----------------------------------------------------------------

func (e *engine) answer(req *request, result json.RawMessage) {
	e.retire(req)
	e.writeEditor(translate.ResultFrame(req.id, result))
}

func (e *engine) fail(req *request, err *translate.Error) {
	e.failRaw(req, err.JSON())
}

func (e *engine) failRaw(req *request, errObj json.RawMessage) {
	e.retire(req)
	if req.id == nil {
		e.log.Error("internal request failed", "method", req.method, "error", string(errObj))
		return
	}
	e.writeEditor(translate.ErrorFrame(req.id, errObj))
}

// retire forgets req. Every answer goes through here exactly once.
func (e *engine) retire(req *request) {
	delete(e.pending, req.ref)
	if e.byEditorID[req.key] == req.ref {
		delete(e.byEditorID, req.key)
	}
	if req.timer != nil {
		req.timer.Stop()
	}
	if req.method == "session/prompt" {
		if s := e.sessions[req.session]; s != nil {
			s.prompts = removeRef(s.prompts, req.ref)
		}
	}
}

func (e *engine) writeEditor(frame []byte) {
	if e.log.IsTrace() {
		e.log.Trace("bridge → editor", "message", truncate(frame, 2048))
	}
	stop := e.ctx.Done() // a stalled editor must not keep the loop from stopping
	if e.giveUp != nil {
		stop = nil // shutting down: the last answers get shutdownWriteWait
	}
	if !e.out.send(frame, stop, e.giveUp) {
		if e.dropped++; e.dropped == 1 {
			e.log.Warn("message for the editor dropped: it is gone or no longer reading", "message", truncate(frame, 200))
		}
	}
}

// pendingInOrder returns the pending editor requests oldest first.
func (e *engine) pendingInOrder() []*request {
	var reqs []*request
	for ref := translate.Ref(1); ref <= e.nextRef; ref++ {
		if req := e.pending[ref]; req != nil {
			reqs = append(reqs, req)
		}
	}
	return reqs
}

// --- timeouts and cancellation ------------------------------------------------

// untimed methods may legitimately take as long as a person or a model needs
// (peers.md §c.18): no default timeout.
var untimed = map[string]bool{"session/prompt": true, "authenticate": true}

// armTimeout starts req's timeout unless its method may run unbounded.
func (e *engine) armTimeout(req *request) {
	if e.b.RequestTimeout < 0 || untimed[req.method] {
		return
	}
	d := e.b.RequestTimeout
	if d == 0 {
		d = defaultRequestTimeout
	}
	ref := req.ref
	req.timer = time.AfterFunc(d, func() { e.post(func() { e.timeout(ref, d) }) })
}

func (e *engine) timeout(ref translate.Ref, d time.Duration) {
	req := e.pending[ref]
	if req == nil {
		return
	}
	e.log.Warn("agent did not answer in time", "method", req.method, "timeout", d)
	e.fail(req, translate.Errorf(translate.CodeInternalError, "the agent did not answer %s within %s (request_timeout)", req.method, d))
	e.afterFailure(req)
	if req.link != nil && req.link.down == nil {
		e.feed(req.link, translate.Msg{Kind: translate.Abandon, Ref: ref})
	}
}

// armCancelGrace starts the grace period for the prompts of sid that are
// pending now. When it ends, the engine answers any of them still pending
// with stopReason "cancelled" itself (peers.md §c.8).
func (e *engine) armCancelGrace(sid string) {
	s := e.sessions[sid]
	if s == nil || len(s.prompts) == 0 || s.graceArmed {
		return
	}
	s.graceArmed = true
	refs := append([]translate.Ref(nil), s.prompts...)
	d := e.b.CancelGrace
	if d <= 0 {
		d = defaultCancelGrace
	}
	time.AfterFunc(d, func() {
		e.post(func() {
			s.graceArmed = false
			for _, ref := range refs {
				req := e.pending[ref]
				if req == nil {
					continue
				}
				e.log.Warn("agent did not end the cancelled turn in time; answering cancelled", "session", sid, "grace", d)
				e.answer(req, json.RawMessage(`{"stopReason":"cancelled"}`))
				if e.sessions[sid] == s {
					s.draining = true
					e.abandoned[ref] = sid
				}
				if req.link.down == nil {
					e.feed(req.link, translate.Msg{Kind: translate.Abandon, Ref: ref})
				}
			}
		})
	})
}

// --- links ---------------------------------------------------------------------

// newLink starts dialing an agent link in the background. Frames the
// translator produces before the dial completes wait in the link's queue.
func (e *engine) newLink(spawn Spawn) *link {
	e.nextLinkID++
	ctx, cancel := context.WithCancel(e.ctx)
	l := &link{id: e.nextLinkID, spawn: spawn, tr: e.b.NewTranslator(), calls: make(map[translate.Ref]string), cancel: cancel}
	l.out.init()
	e.links = append(e.links, l)
	e.linkWG.Add(1)
	go func() {
		defer e.linkWG.Done()
		l.run(ctx, e.b.Dial, e.deliver, e.lost)
	}()
	e.log.Debug("agent link opening", "link", l.String(), "cwd", spawn.Cwd)
	return l
}

// deliver hands a frame read by a link goroutine to the loop.
func (e *engine) deliver(l *link, frame []byte) bool {
	select {
	case e.frames <- agentFrame{link: l, frame: frame}:
		return true
	case <-e.done:
		return false
	}
}

func (e *engine) lost(l *link, err error) {
	select {
	case e.frames <- agentFrame{link: l, err: err}:
	case <-e.done:
	}
}

// linkLost answers everything that depended on l (peers.md §c.2): pending
// editor requests get -32603 naming the cause, and the editor is told to
// drop the requests l had made of it.
func (e *engine) linkLost(l *link, err error) {
	if l.down != nil {
		return
	}
	l.down = err
	if l.closedByEngine() {
		e.log.Debug("agent link closed", "link", l.String(), "cause", err)
	} else {
		e.log.Error("agent link lost", "link", l.String(), "error", err)
	}
	for _, req := range e.pendingInOrder() {
		if req.link == l {
			e.fail(req, e.lostError(l))
			e.afterFailure(req)
		}
	}
	for _, key := range sortedKeys(l.calls) {
		if c := e.calls[key]; c != nil {
			e.cancelEditorCall(c)
		}
	}
	e.closeLinkAsync(l)
	e.links = slices.DeleteFunc(e.links, func(x *link) bool { return x == l })
}

// retireLink closes a link the engine no longer needs.
func (e *engine) retireLink(l *link, why error) {
	if l.down != nil {
		return
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	e.linkLost(l, why)
}

func (l *link) closedByEngine() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

func (e *engine) lostError(l *link) *translate.Error {
	name := e.b.AgentName
	if name == "" {
		name = "agent"
	}
	return translate.Errorf(translate.CodeInternalError, "%s: %v", name, l.down)
}

// newSessionLink opens the link of a new session for a per-session dialect:
// the engine mints the session id, replays the editor's initialize on the new
// link, then hands it session/new.
func (e *engine) newSessionLink(req *request, params json.RawMessage) {
	sid := mintSessionID()
	req.session = sid
	l := e.newLink(Spawn{Cwd: req.cwd, Session: sid})
	req.link = l
	e.sessions[sid] = &session{id: sid, link: l, cwd: req.cwd}

	e.nextRef++
	initReq := &request{ref: e.nextRef, method: "initialize", link: l}
	e.pending[initReq.ref] = initReq
	e.feed(l, translate.Msg{Kind: translate.Request, Ref: initReq.ref, Method: "initialize", Body: e.initParams})
	e.feed(l, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: "session/new", Body: params, Session: sid})
}

func mintSessionID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return "sess-" + hex.EncodeToString(b[:])
}

// --- helpers -------------------------------------------------------------------

// cancelEditorCall tells the editor to drop a request the agent no longer
// wants answered, and forgets it: a late answer is then dropped.
func (e *engine) cancelEditorCall(c *call) {
	key := idKey(c.id)
	delete(e.calls, key)
	delete(c.link.calls, c.ref)
	params, _ := json.Marshal(map[string]json.RawMessage{"requestId": c.id})
	e.writeEditor(translate.NotificationFrame("$/cancel_request", params))
}

func sortedKeys(m map[translate.Ref]string) []string {
	refs := make([]translate.Ref, 0, len(m))
	for ref := range m {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	keys := make([]string, len(refs))
	for i, ref := range refs {
		keys[i] = m[ref]
	}
	return keys
}

func removeRef(refs []translate.Ref, ref translate.Ref) []translate.Ref {
	for i, r := range refs {
		if r == ref {
			return append(refs[:i], refs[i+1:]...)
		}
	}
	return refs
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
