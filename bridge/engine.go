package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/wire/ndjson"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/v2front"
	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
)

const (
	defaultRequestTimeout = 60 * time.Second
	defaultCancelGrace    = 5 * time.Second
	// defaultQueueBytes bounds each queue toward a slow peer: 600 or so
	// updates, twice what a pipe holds, enough to keep both pipes busy,
	// while a flood to an editor that reads slowly leaves memory flat (a
	// message larger than the bound still passes, alone). A stream to an
	// editor slower than its agent fills the queue, and the writer keeps
	// twice the bound in blocks, all of it fresh memory in a new bridge's
	// first turn. A page touched first costs a page fault, 20-40 µs where
	// the hypervisor keeps the page tables: a first turn of 200,000
	// updates through a child took 16% less CPU with 256 KiB than with 1
	// MiB (94 against 112 ms), and 10% less with 128 KiB than with 256
	// KiB (82 against 90 ms), each pair's medians of five interleaved runs
	// (see docs/performance.md). A deeper queue adds nothing once it is
	// full but the wait of whatever the editor is sent behind it.
	defaultQueueBytes = 128 << 10
	defaultBackoff    = 100 * time.Millisecond
	defaultBackoffMax = 5 * time.Second
	// maxHeld bounds the editor messages held behind a pending initialize;
	// beyond it the engine stops reading the editor until initialize ends.
	maxHeld = 1024
	// shutdownWriteWait bounds how long, at shutdown, the engine waits for
	// the editor to take the last answers: an editor that no longer reads
	// must not keep the bridge alive (stdin's end ends the bridge within
	// 3 s whatever stdout does).
	shutdownWriteWait = time.Second
	// endOfInputWait bounds how long, once the editor's input has ended,
	// the engine still waits for the agent to answer the requests in
	// flight (`echo '{…initialize…}' | acp-bridge -- agent` gets the
	// agent's answer). With shutdownWriteWait and a child's quick exit at
	// stdin's end it keeps the end within about 3 s.
	endOfInputWait = 1500 * time.Millisecond
)

// engine is the state of one Serve call. Fields under "loop-owned" are
// touched only by the loop goroutine (and, after it has returned, by Serve).
type engine struct {
	b   *Bridge
	log hclog.Logger
	ctx context.Context

	out       *editorWriter
	editorOut io.Writer
	reader    *editorReader

	// agentEnv is the envelope a translator is given in fromAgent, for
	// the call only.
	agentEnv  translate.Envelope
	lines     chan editorLine
	inbox     *inbox
	tasks     chan func() // work handed back to the loop by timers and helpers
	deadlines deadlines   // requests' timeouts (deadlines.go)
	// stopWrites is closed once the bridge stops or the editor's input
	// ends; from then on writes to a full editor queue are dropped.
	stopWrites chan struct{}
	drained    chan struct{} // a link queue fell back under its bound
	done       chan struct{} // closed when the loop has stopped
	linkWG     sync.WaitGroup
	helperWG   sync.WaitGroup
	freeing    atomic.Bool // a freeMemory is running
	// recorded is signalled when the store has written what a held
	// prompt answer waits for; recordedSeq is the last such answer's
	// number (holdForStore).
	recorded    chan struct{}
	recordedSeq atomic.Uint64
	// gate is held by the loop while it handles an event (and for good
	// once it has returned); the stream's fast path passes an update only
	// while it holds it (fast.go). It guards every link's fast table.
	gate sync.Mutex
	// loopDone is set, under the gate, when the loop has returned: no
	// event is handled in place after it (inline.go).
	loopDone bool
	// linesInflight counts the editor's lines handed to the loop that it
	// has not handled yet; nudge (capacity 1) wakes the loop after an
	// event handled in place changed what it waits for (inline.go).
	linesInflight atomic.Int32
	nudge         chan struct{}

	// loop-owned
	nextRef    translate.Ref
	nextLinkID int
	nextCallID uint64
	pending    pendingTable
	calls      map[string]*call
	sessions   map[string]*session
	// abandoned maps prompts the engine answered after the cancel grace to
	// their session, until the agent's own late answer arrives.
	abandoned map[translate.Ref]string
	links     []*link
	control   *link
	dialing   backoff
	init      initState
	// initReq is the initialize in flight while init is initPending.
	initReq *request
	// initParams are the editor's initialize params, replayed on new links.
	initParams json.RawMessage
	// initResult is the (rewritten) answer of the first initialize, given
	// again to a repeated one on translating dialects.
	initResult json.RawMessage
	// initErr is why the last initialize failed ("" if it did not).
	initErr    string
	editorCaps clientCaps
	// held are editor messages that arrived while initialize was pending;
	// they are handled, in order, once it has been answered.
	held    [][]byte
	repairs repairCounts
	// unmatched counts the agent frames the translator had no rule for;
	// they are not repairs (see note).
	unmatched int
	// giveUp, once set (at shutdown), is closed when writes to the editor
	// must stop waiting for room.
	giveUp <-chan struct{}
	// dropped counts messages the editor could not be given (see writeEditor).
	dropped int
	// batching is set while the loop handles a batch of agent events: the
	// messages for the editor gather in batch and are handed to the writer
	// together at its end (flushEditor), one lock for the lot.
	batching   bool
	batch      []editorMsg
	batchBytes int
	// agentLine is the agent frame being handled, when it is known to be
	// on one line (see isAgentLine).
	agentLine []byte
	dur       durableState
	// front translates for an editor that speaks ACP v2 (v2front.go);
	// frontChosen says the editor's version is known, frontReplies are
	// the front's answers to the engine's calls, for the next turn.
	front        *v2front.Front
	frontChosen  bool
	frontReplies [][]byte
	// viaFront is set while the front's messages for the engine are
	// handled: the tap saw the editor's own message (tappedFromEditor).
	viaFront bool
	// streaming are the sessions that had a turn running when the fast
	// path's table was last refreshed, or started one since; fastOn are
	// those in the table, with their link and key there (fast.go).
	streaming map[string]struct{}
	fastOn    map[string]fastEntry
	// streamed counts the bytes of updates sent the editor since a turn
	// last ended (turnEnded).
	streamed int
	// v2 relays a v2 editor to a v2 agent (v2relay.go).
	v2 v2relay
}

// Serve serves one editor: it reads ACP messages from editorIn and writes
// ACP messages to editorOut until editorIn ends or ctx is done. Then it
// answers every request still pending, closes every agent link (stopping
// child processes) and returns, within about 3 s whatever the peers do. It
// returns nil on a clean end of input.
//
// If editorIn has a SetReadDeadline method (an *os.File in non-blocking
// mode, a net.Conn), Serve uses it to stop its reader on return; otherwise a
// read blocked in editorIn when ctx ends returns when editorIn next yields.
// Likewise a SetWriteDeadline method on editorOut stops a write the editor
// never takes.
func (b *Bridge) Serve(ctx context.Context, editorIn io.Reader, editorOut io.Writer) error {
	if b.NewTranslator == nil || b.Dial == nil {
		return errors.New("bridge: NewTranslator and Dial are required")
	}
	queue := b.QueueBytes
	if queue <= 0 {
		queue = defaultQueueBytes
	}
	e := &engine{
		b:          b,
		log:        b.Logger,
		out:        newEditorWriter(editorOut, queue),
		lines:      make(chan editorLine),
		inbox:      newInbox(queue),
		tasks:      make(chan func(), 16),
		drained:    make(chan struct{}, 1),
		done:       make(chan struct{}),
		stopWrites: make(chan struct{}),
		recorded:   make(chan struct{}, 1),
		nudge:      make(chan struct{}, 1),
		pending:    newPendingTable(),
		calls:      make(map[string]*call),
		sessions:   make(map[string]*session),
		abandoned:  make(map[translate.Ref]string),
		streaming:  make(map[string]struct{}),
		fastOn:     make(map[string]fastEntry),
		dialing:    backoff{min: b.ReconnectBackoff, max: b.ReconnectBackoffMax},
	}
	if e.dialing.min <= 0 {
		e.dialing.min = defaultBackoff
	}
	if e.dialing.max <= 0 {
		e.dialing.max = defaultBackoffMax
	}
	if e.log == nil {
		e.log = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.ctx = ctx
	b.serving.Store(e)
	defer b.serving.Store(nil)

	e.editorOut = editorOut
	e.gate.Lock() // the loop's until it first waits
	go e.out.writeLoop()
	e.reader = &editorReader{
		r:        ndjson.NewReader(editorIn, b.MaxMessage),
		lines:    e.lines,
		inline:   e.inlineEditorLine,
		inflight: &e.linesInflight,
		ended:    make(chan struct{}),
		done:     make(chan struct{}),
	}
	go e.reader.readLoop(ctx)
	e.helperWG.Add(1)
	go e.watchStop()

	err := e.loop(ctx)
	return e.shutdown(err, cancel, editorIn)
}

// shutdown answers what is pending, closes the links and stops every
// goroutine Serve started, bounded in time.
func (e *engine) shutdown(err error, cancel context.CancelFunc, editorIn io.Reader) error {
	defer e.flushRecords() // what failing the pending requests recorded
	close(e.done)          // from here on, link goroutines and timers stop reporting
	deadline := time.Now().Add(shutdownWriteWait)
	links := slices.Clone(e.links)
	if e.control != nil && e.control.detached {
		links = append(links, e.control)
	}
	linksClosed := make(chan struct{})
	go e.closeLinks(links, linksClosed)

	giveUp := make(chan struct{})
	stopGiveUp := time.AfterFunc(time.Until(deadline), func() { close(giveUp) })
	defer stopGiveUp.Stop()
	e.giveUp = giveUp
	e.releaseAnswers(true)
	shutting := translate.Errorf(translate.CodeInternalError, "acp-bridge is shutting down: the editor closed its input or the bridge was stopped")
	for _, req := range e.pending.inOrder() {
		e.fail(req, shutting)
	}
	// Held behind an initialize that never finished (a v2 editor's own
	// lines, while the agent's version was unknown, after the others).
	for _, frame := range slices.Concat(e.held, e.v2.held) {
		if env, perr := translate.ParseEnvelope(frame); perr == nil && env.IsRequest() {
			e.writeEditor(translate.ErrorFrame(env.ID, shutting.JSON()))
		}
	}
	e.held, e.v2.held = nil, nil
	for _, l := range e.links {
		e.stopWake(l)
	}
	e.releaseSessions()
	if werr := e.out.close(deadline); werr != nil {
		if errors.Is(werr, errEditorStalled) {
			// The writer is blocked in a write the editor will never take:
			// unblock it if the stream can take a deadline, so that no
			// goroutine of Serve outlives it.
			if d, ok := e.editorOut.(interface{ SetWriteDeadline(time.Time) error }); ok && d.SetWriteDeadline(time.Now()) == nil {
				t := time.NewTimer(100 * time.Millisecond)
				select {
				case <-e.out.done:
				case <-t.C:
				}
				t.Stop()
			}
		}
		switch {
		case err != nil:
		case e.inputEnded():
			// The editor closed its input and no longer reads: it has
			// gone, which ends a session cleanly (exit status 0).
			e.log.Warn("the last messages for the editor were not taken: it closed its input and stopped reading", "error", werr)
		default:
			err = fmt.Errorf("writing to the editor: %w", werr)
		}
	}
	<-linksClosed
	cancel()
	e.helperWG.Wait()
	// Stop the reader: at once if the input can take a deadline, else it
	// returns when the input next yields (a pipe the editor closes).
	if d, ok := editorIn.(interface{ SetReadDeadline(time.Time) error }); ok && d.SetReadDeadline(time.Now()) == nil {
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-e.reader.done:
		case <-t.C:
		}
		t.Stop()
	}
	if e.dropped > 1 {
		e.log.Warn("messages for the editor dropped while it was gone or not reading", "count", e.dropped)
	}
	e.repairs.logSummary(e.log)
	if e.unmatched > 0 {
		e.log.Info("agent frames no rule of the profile matched", "count", e.unmatched)
	}
	return err
}

// closeLinks closes links in parallel (each child gets its staged stop) and
// waits for every link goroutine.
func (e *engine) closeLinks(links []*link, done chan<- struct{}) {
	defer close(done)
	for _, l := range links {
		e.closeLinkAsync(l)
	}
	e.linkWG.Wait()
}

// loop is the engine: the one goroutine that owns translators, sessions and
// the pending tables. It never blocks on an agent; it blocks on the editor
// only when the editor stops reading (backpressure), and stops reading the
// editor while an agent stops reading (backpressure the other way).
func (e *engine) loop(ctx context.Context) error {
	defer e.flushRecords()
	defer e.shutGate()
	defer e.stopDeadlines()
	// endOfInput fires endOfInputWait after the editor's input ended; until
	// then the loop reads no more input and serves only the agents, so that
	// the requests in flight get their answers rather than a shutdown error.
	var endOfInput <-chan time.Time
	for {
		lines := e.lines
		if e.paused() || endOfInput != nil {
			lines = nil
		}
		// The gate is open only while the loop waits: every case closes
		// it first, and the loop returns with it closed (fast.go).
		e.openGate()
		select {
		case <-ctx.Done():
			e.closeGate()
			e.log.Info("stopping", "reason", context.Cause(ctx))
			return nil
		case <-e.out.done:
			e.closeGate()
			if e.inputEnded() {
				// The editor closed both ends: it has gone, which is how
				// a session ends.
				e.log.Warn("the editor stopped reading after closing its input", "error", e.out.err)
				return nil
			}
			return fmt.Errorf("writing to the editor: %w", e.out.err)
		case <-endOfInput:
			e.closeGate()
			e.log.Info("requests still in flight at the end of the editor's input; shutting down", "count", len(e.pending.byRef)+len(e.held))
			return nil
		case l := <-lines:
			e.closeGate()
			if l.err != nil {
				var tooLong *ndjson.TooLongError
				if errors.As(l.err, &tooLong) {
					e.tooLong(tooLong)
					continue
				}
				if errors.Is(l.err, io.EOF) {
					if e.settled() {
						e.log.Info("editor closed its input; shutting down")
						return nil
					}
					e.log.Info("editor closed its input; finishing the requests in flight", "count", len(e.pending.byRef)+len(e.held), "wait", endOfInputWait)
					t := time.NewTimer(endOfInputWait)
					defer t.Stop()
					endOfInput = t.C
					continue
				}
				return fmt.Errorf("reading from the editor: %w", l.err)
			}
			e.editorLine(l.frame)
			e.linesInflight.Add(-1)
		case <-e.inbox.wake:
			e.closeGate()
			batch := e.inbox.take()
			e.batching = true
			for i := range batch {
				e.agentEvent(&batch[i])
				// Handled: its link may pass updates again once the
				// loop has flushed what this batch wrote and reopened
				// the gate.
				if l := batch[i].link; l.inflight.Add(-1) == 0 && l.caughtUp != nil {
					signal(l.caughtUp)
				}
				batch[i] = agentEvent{}
			}
			e.batching = false
			e.flushEditor()
		case task := <-e.tasks:
			e.closeGate()
			task()
		case <-e.recorded:
			e.closeGate()
			e.releaseAnswers(false)
		case <-e.drained:
			e.closeGate()
		case <-e.nudge:
			e.closeGate()
		}
		e.releaseHeld()
		e.flushRecords()
		if endOfInput != nil && e.settled() {
			e.log.Info("requests in flight answered after the end of the editor's input; shutting down")
			return nil
		}
	}
}

// inputEnded reports whether the editor's input has ended (or failed).
func (e *engine) inputEnded() bool {
	select {
	case <-e.reader.ended:
		return true
	default:
		return false
	}
}

// settled reports whether no editor request waits for an answer: none
// pending (internal ones included: they serve an editor's request) and
// none held behind initialize.
func (e *engine) settled() bool {
	return len(e.pending.byRef) == 0 && len(e.held) == 0
}

// paused reports whether the engine must stop reading the editor for now:
// an agent is not taking its frames, or too much is held behind initialize.
func (e *engine) paused() bool {
	if len(e.held) >= maxHeld {
		return true
	}
	for _, l := range e.links {
		if l.out.over() {
			return true
		}
	}
	return false
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
	} else if tid, ok := idAtEnd(err.Tail); ok {
		id = tid // the id came after the payload, as the last member
	}
	// When the id cannot be found the answer has id null, the JSON-RPC rule
	// for a request whose id cannot be read. Staying silent could leave an
	// editor request waiting forever.
	e.log.Warn("editor message over the size limit; answered with an error", "limit", err.Max, "id", string(id),
		"method", gjson.GetBytes(err.Head, "method").Str)
	e.writeEditor(translate.ErrorFrame(id, translate.Errorf(translate.CodeInvalidRequest,
		"message larger than the %d-byte limit: it was not read; raise --max-message (max_message in the config) or send less", err.Max).JSON()))
}

func (e *engine) fromEditor(frame []byte) {
	defer e.afterLarge(len(frame))
	if !e.viaFront {
		e.tappedFromEditor(frame)
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
		if perr.Code == translate.CodeParseError {
			id = recoverID(frame, perr)
		}
		if id == nil {
			id = json.RawMessage("null")
		}
		e.log.Warn("invalid message from the editor", "error", perr)
		e.writeEditor(translate.ErrorFrame(id, perr.JSON()))
		return
	}
	if e.init == initPending && !env.IsResponse() {
		// An editor may pipeline session/new (or even a second initialize)
		// behind initialize: hold it rather than refuse it, and keep the
		// order. Responses to the agent's calls need no initialize.
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

// tappedFromEditor shows the tap and the trace log a message the editor
// sent.
func (e *engine) tappedFromEditor(frame []byte) {
	e.tap(TapEvent{Hop: EditorHop, Inbound: true, Message: frame})
	if e.log.IsTrace() {
		e.log.Trace("editor → bridge", "message", truncate(frame, 2048))
	}
}

func (e *engine) editorRequest(env *translate.Envelope) {
	key := idKey(env.ID)
	if other := e.pending.byEditorID(key); other != nil {
		// Two requests in flight with one id cannot both be answered
		// unambiguously, and a $/cancel_request could reach the wrong one.
		// Answer the newcomer; the first keeps its own answer.
		e.log.Warn("editor reused the id of a pending request", "id", string(env.ID), "pending", other.method, "new", env.Method)
		e.writeEditor(translate.ErrorFrame(env.ID, translate.Errorf(translate.CodeInvalidRequest,
			"request id %s is already in use by a pending %s request: ids must be unique among requests in flight", env.ID, other.method).JSON()))
		return
	}
	e.nextRef++
	req := &request{
		ref:    e.nextRef,
		id:     bytes.Clone(env.ID),
		key:    key,
		method: env.Method,
	}
	e.pending.add(req)

	if err := checkParams(env.Method, env.Params); err != nil {
		e.fail(req, err)
		return
	}
	if env.Method == "initialize" {
		e.initialize(req, env.Params)
		return
	}
	if e.init != initDone {
		e.fail(req, e.notInitialized(env.Method))
		return
	}
	e.armTimeout(req)
	req.session = paramsSession(env.Params)
	if e.durableRequest(req, env) {
		return
	}
	e.dispatch(req, env)
}

// dispatch routes an editor request to the link that serves it.
func (e *engine) dispatch(req *request, env *translate.Envelope) {
	if e.refuseShadowed(req) {
		return
	}
	switch env.Method {
	case "session/new":
		req.cwd, req.dirs = gjson.GetBytes(env.Params, "cwd").Str, additionalDirs(env.Params)
		if bind, ok := e.bindSession(env.Method, env.Params); ok {
			e.openSessionLink(req, env.Params, e.newSessionID(), bind)
			return
		}
		if e.b.Dialect.PerSession {
			e.openSessionLink(req, env.Params, e.newSessionID(), e.defaultBinding())
			return
		}
	case "session/load", "session/resume":
		req.cwd, req.dirs = gjson.GetBytes(env.Params, "cwd").Str, additionalDirs(env.Params)
		if e.sessions[req.session] == nil {
			if bind, ok := e.bindSession(env.Method, env.Params); ok {
				e.openSessionLink(req, env.Params, req.session, bind)
				return
			}
			if e.b.Dialect.PerSession {
				e.openSessionLink(req, env.Params, req.session, e.defaultBinding())
				return
			}
		}
	case "session/prompt":
		if e.oneTurn(req, env) {
			return
		}
		e.promptStarted(req, env.Params)
	}
	l, err := e.route(req.session)
	if err != nil {
		e.fail(req, err)
		return
	}
	req.link = l
	e.feed(l, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: env.Method, Body: env.Params, Frame: env.Frame, IDAt: env.IDAt})
}

func (e *engine) editorNotification(env *translate.Envelope) {
	if e.init != initDone {
		e.log.Debug("notification before initialize ignored", "method", env.Method)
		return
	}
	if e.durableNotification(env) {
		return
	}
	sid := paramsSession(env.Params)
	switch env.Method {
	case "$/cancel_request":
		e.cancelRequest(env.Params)
		return
	case "session/cancel":
		l, err := e.route(sid)
		if err != nil {
			e.log.Debug("session/cancel for an unroutable session ignored", "session", sid, "error", err)
			return
		}
		e.feed(l, translate.Msg{Kind: translate.Notification, Method: env.Method, Body: env.Params, Grace: e.cancelGrace()})
		e.armCancelGrace(sid)
		e.cancelQueued(sid)
		return
	}
	// Every other notification goes to the agent, known or not: the
	// dialect decides (a relay passes it on; a translator ignores what it
	// does not know, acp-spec.md §8).
	l, err := e.route(sid)
	if err != nil {
		e.log.Debug("notification for an unroutable session ignored", "method", env.Method, "error", err)
		return
	}
	e.feed(l, translate.Msg{Kind: translate.Notification, Method: env.Method, Body: env.Params, Frame: env.Frame})
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

// feed hands l's translator one input: an editor message, or an event the
// engine decided on (link up or down, a tick), and carries out its outputs.
func (e *engine) feed(l *link, m translate.Msg) {
	if l.initRef != 0 && !(m.Kind == translate.Request && m.Ref == l.initRef) {
		switch m.Kind {
		case translate.Request, translate.Notification, translate.Response:
			l.gated = append(l.gated, m)
			return
		}
	}
	m.At = time.Now()
	outs, err := l.tr.FromEditor(m)
	// Outputs first: a translator that also returns an error may already
	// have answered the request more precisely than -32603 can.
	e.apply(l, outs)
	switch {
	case err == nil:
	case m.Kind == translate.LinkUp || m.Kind == translate.LinkDown || m.Kind == translate.Tick:
		e.log.Debug("translator did not take a link event", "link", l.String(), "kind", m.Kind, "error", err)
	default:
		e.log.Error("translator failed on an editor message", "link", l.String(), "method", m.Method, "error", err)
		if m.Kind == translate.Request {
			if req := e.pending.get(m.Ref); req != nil {
				e.fail(req, translate.Errorf(translate.CodeInternalError, "acp-bridge could not translate %s for dialect %s: %v", m.Method, l.bind.Dialect.Name, err))
			}
		}
	}
}

// agentEvent handles one event from a link's goroutine.
func (e *engine) agentEvent(ev *agentEvent) {
	l := ev.link
	switch {
	case ev.err != nil:
		e.linkLost(l, ev.err)
	case ev.up:
		e.linkUp(l)
	default:
		e.fromAgent(l, ev)
	}
}

// fromAgent hands a frame to its link's translator. The frame was put on
// one line, and parsed when the translator takes parsed frames, by the
// link's goroutine (agentEvent.prepare).
func (e *engine) fromAgent(l *link, ev *agentEvent) {
	if l.down != nil {
		return
	}
	frame := ev.frame
	defer e.afterLarge(len(frame))
	if ev.compacted {
		e.repaired(RepairMultiLineFrames, "", "")
	}
	if e.b.Tap != nil { // (tested here: building the event costs, per frame)
		e.tap(TapEvent{Hop: AgentHop, Inbound: true, Link: l.id, Message: frame})
	}
	if e.log.IsTrace() {
		e.log.Trace("agent → bridge", "link", l.String(), "frame", truncate(frame, 2048))
	}
	var outs []translate.Out
	var err error
	switch tr := l.tr.(type) {
	case translate.EnvelopeTranslator:
		if !ev.parsed { // (every link parses for such a translator: a guard)
			ev.env, ev.perr = translate.ParseEnvelope(frame)
		}
		// Through the engine's own envelope, not ev's: a pointer given
		// to an interface method escapes, and &ev.env would move every
		// event handled where it was read (inline.go) to the heap.
		e.agentEnv = ev.env
		outs, err = tr.FromAgentEnvelope(frame, &e.agentEnv, ev.perr)
		e.agentEnv = translate.Envelope{} // (it holds the frame)
	case translate.AgentClock:
		outs, err = tr.FromAgentAt(frame, time.Now())
	default:
		outs, err = l.tr.FromAgent(frame)
	}
	if err != nil {
		e.log.Warn("unusable frame from the agent", "link", l.String(), "error", err, "frame", truncate(frame, 200))
	}
	if ev.oneLine {
		e.agentLine = frame
	}
	e.apply(l, outs)
	e.agentLine = nil
}

// isAgentLine reports whether b is the agent frame being handled, which
// its link's goroutine has put on one line: the editor writer need not
// look for line breaks in it again.
func (e *engine) isAgentLine(b []byte) bool {
	return len(b) > 0 && len(b) == len(e.agentLine) && &b[0] == &e.agentLine[0]
}

// largeMessage is the size from which a relayed message makes the engine
// give memory back right after it (see afterLarge).
const largeMessage = 8 << 20

// afterLarge, after a message of n bytes, starts a collection that returns
// the memory it took to the OS, unless one is already running: the Go
// runtime would otherwise keep a 60 MiB message's pages for minutes, and its
// garbage would add to the next large message's peak. One at a time, off
// the loop.
func (e *engine) afterLarge(n int) {
	if n < largeMessage || !e.freeing.CompareAndSwap(false, true) {
		return
	}
	e.helperWG.Add(1)
	go e.freeMemory()
}

func (e *engine) freeMemory() {
	defer e.helperWG.Done()
	defer e.freeing.Store(false)
	debug.FreeOSMemory()
}

// additionalDirs returns the absolute additionalDirectories of a session
// request (acp-spec.md §9: entries are absolute; others are ignored).
func additionalDirs(params json.RawMessage) []string {
	var dirs []string
	gjson.GetBytes(params, "additionalDirectories").ForEach(func(_, d gjson.Result) bool {
		if d.Type == gjson.String && filepath.IsAbs(d.Str) {
			dirs = append(dirs, filepath.Clean(d.Str))
		}
		return true
	})
	return dirs
}

// recoverID finds the id of a request that is valid JSON but for bytes that
// are not UTF-8 (a text field cut in the middle of a character, say), so
// that the error can be answered under the editor's id rather than null:
// with the bad bytes replaced, the rest reads as a request.
func recoverID(frame []byte, perr *translate.Error) json.RawMessage {
	if !strings.Contains(perr.Reason, "UTF-8") {
		return nil
	}
	env, err := translate.ParseEnvelope(bytes.ToValidUTF8(frame, []byte("\uFFFD")))
	if err != nil || !env.IsRequest() || bytes.Contains(env.ID, []byte("\uFFFD")) {
		return nil // an id that held the bad bytes is not the editor's any more
	}
	return bytes.Clone(env.ID)
}

// compact returns frame on one line, in frame's own memory (a pretty-printed
// 60 MiB frame must not cost a second 60 MiB): without the white space
// between tokens when it is valid JSON, as json.Compact would write it, else
// with its line breaks turned into spaces (the translator will judge it).
func compact(frame []byte) []byte {
	if translate.Valid(frame) == nil {
		return compactInPlace(frame)
	}
	for i, c := range frame {
		if c == '\n' || c == '\r' {
			frame[i] = ' '
		}
	}
	return frame
}

// apply carries out a translator's outputs in order. This is the ordering
// guarantee: a turn's updates are written before its prompt response because
// the translator returned them first and nothing here reorders.
func (e *engine) apply(l *link, outs []translate.Out) {
	// Carrying out an output can feed the same translator again (a late
	// permission answered at once, a link retired), and a translator may
	// reuse the slice it returned: work on a copy, on the stack when small.
	var local [4]translate.Out
	returned := outs
	if len(outs) <= len(local) {
		outs = local[:copy(local[:], outs)]
	} else {
		outs = slices.Clone(outs)
	}
	// The slice is the engine's until the translator's next call: clear
	// it, so that a reused one does not keep the last message's bytes.
	clear(returned)
	for _, o := range outs {
		switch o.Kind {
		case translate.Reply, translate.Fail:
			e.translatorAnswer(l, o)
		case translate.Notify, translate.Forward:
			e.notify(l, o)
		case translate.Call:
			e.callEditor(l, o)
		case translate.CancelCall:
			if c := e.calls[l.calls[o.Ref]]; c != nil {
				e.cancelEditorCall(c)
			}
		case translate.Frame:
			e.toAgent(l, o.Body)
		case translate.Timer:
			e.armWake(l, o.Delay)
		case translate.Note:
			e.note(l, o)
		default:
			e.log.Error("translator returned an output of unknown kind", "kind", o.Kind)
		}
	}
}

func (e *engine) toAgent(l *link, frame []byte) {
	if l.detached {
		e.log.Error("translator sent a frame on a dialect without a control link; dropped", "frame", truncate(frame, 200))
		return
	}
	if l.down != nil {
		return
	}
	e.tap(TapEvent{Hop: AgentHop, Link: l.id, Message: frame})
	if e.log.IsTrace() {
		e.log.Trace("bridge → agent", "link", l.String(), "frame", truncate(frame, 2048))
	}
	l.out.push(frame)
}

// notify writes a translator's notification (Notify, built here, or
// Forward, passed through as it came).
func (e *engine) notify(l *link, o translate.Out) {
	o, drop := e.unalias(l, o)
	if drop {
		return
	}
	if o.Method == "session/update" {
		sid := o.Session
		if sid == "" {
			sid = updateSession(o)
		}
		if e.v2.on && e.v2Drop(sid, o) {
			return
		}
		s := e.sessions[sid]
		e.streamed += len(o.Body)
		if s != nil && s.draining {
			e.repaired(RepairDrainedTurnUpdates, sid, "update after the bridge ended a cancelled turn: "+
				gjson.GetBytes(o.Body, "update.sessionUpdate").Str)
			return
		}
		if s != nil && e.durable() {
			e.recordUpdate(s, o.Body)
		}
		if e.b.OnSession != nil && s != nil {
			params := o.Body
			if o.Kind == translate.Forward {
				params = o.Params
				if params == nil {
					params = []byte(gjson.GetBytes(o.Body, "params").Raw)
				}
			}
			e.b.OnSession(SessionEvent{Kind: SessionUpdate, Session: s.id, Body: params})
		}
		if o.Kind == translate.Forward {
			// The agent's frame, put on one line by its link's goroutine.
			e.writeEditorSession(editorMsg{body: o.Body, oneLine: e.isAgentLine(o.Body)}, sid)
			return
		}
		e.writeEditorSession(editorMsg{head: notificationHead(o.Method), body: o.Body, tail: closeBrace}, sid)
		return
	}
	if o.Kind == translate.Forward {
		e.writeEditorMsg(editorMsg{body: o.Body})
		return
	}
	e.writeEditorMsg(editorMsg{head: notificationHead(o.Method), body: o.Body, tail: closeBrace})
}

// updateSession finds the session of a session/update output that did not
// name it.
func updateSession(o translate.Out) string {
	if o.Kind == translate.Forward {
		return gjson.GetBytes(o.Body, "params.sessionId").Str
	}
	return gjson.GetBytes(o.Body, "sessionId").Str
}

var (
	closeBrace     = []byte("}")
	updateHead     = []byte(`{"jsonrpc":"2.0","method":"session/update","params":`)
	resultHeadPart = []byte(`{"jsonrpc":"2.0","id":`)
)

func notificationHead(method string) []byte {
	if method == "session/update" {
		return updateHead
	}
	full := translate.NotificationFrame(method, json.RawMessage("0"))
	return full[:len(full)-2] // drop the placeholder params and the brace
}

func (e *engine) callEditor(l *link, o translate.Out) {
	o, _ = e.unalias(l, o)
	sid := o.Session
	if sid == "" {
		sid = gjson.GetBytes(o.Body, "sessionId").Str
	}
	s := e.sessions[sid]
	if (s != nil && s.draining || e.v2.on && e.v2Closed(sid)) && o.Method == "session/request_permission" {
		// The editor already saw this turn end; a permission prompt now would
		// dangle. Cancelled is the answer the editor itself must give after a
		// cancel (acp-spec.md §13.1).
		e.repaired(RepairDrainedTurnPermissions, sid, "permission request after the bridge ended a cancelled turn answered cancelled")
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
	e.writeEditorSession(editorMsg{body: translate.RequestFrame(id, o.Method, o.Body)}, sid)
}

// --- writing to the editor ------------------------------------------------------

func (e *engine) writeEditor(frame []byte) { e.writeEditorMsg(editorMsg{body: frame}) }

func (e *engine) writeEditorMsg(m editorMsg) { e.writeEditorSession(m, "") }

// writeEditorSession queues one message for the editor. It waits while the
// editor's queue is full (backpressure), but not once the bridge is stopping
// or the editor has closed its input: an editor that neither reads nor
// writes any more must not keep the bridge alive.
func (e *engine) writeEditorSession(m editorMsg, session string) {
	if len(e.dur.answers) > 0 && e.queueBehindAnswer(m, session) {
		return // scrubbed when it is released, through here again
	}
	if e.front != nil && !m.translated {
		e.toFront(m, session) // back through here, translated
		return
	}
	if e.b.Redact != nil {
		// The one place every message for the editor passes: secrets an
		// agent echoes (in an update, an answer, an error) stop here.
		m.body = e.b.Redact(m.body)
	}
	if e.b.Tap != nil || e.log.IsTrace() {
		whole := m.body
		if m.head != nil || m.tail != nil {
			whole = slices.Concat(m.head, m.body, m.tail)
		}
		e.tap(TapEvent{Hop: EditorHop, Session: session, Message: whole})
		if e.log.IsTrace() {
			e.log.Trace("bridge → editor", "message", truncate(whole, 2048))
		}
	}
	if e.batching {
		e.batch = append(e.batch, m)
		if e.batchBytes += m.size(); e.batchBytes >= e.out.limit {
			e.flushEditor() // the writer's bound holds for a batch too
		}
		return
	}
	if !e.out.send(m, e.stopWaiting()) {
		e.droppedEditor(1)
	}
}

// flushEditor hands the batch gathered while batching to the writer.
func (e *engine) flushEditor() {
	if len(e.batch) == 0 {
		return
	}
	if sent := e.out.sendAll(e.batch, e.stopWaiting()); sent < len(e.batch) {
		e.droppedEditor(len(e.batch) - sent)
	}
	clear(e.batch) // the writer owns the messages now
	e.batch, e.batchBytes = e.batch[:0], 0
}

// stopWaiting is what ends a wait for room in the editor's queue.
func (e *engine) stopWaiting() <-chan struct{} {
	if e.giveUp != nil {
		return e.giveUp
	}
	return e.stopWrites
}

func (e *engine) droppedEditor(n int) {
	if e.dropped == 0 {
		e.log.Warn("message for the editor dropped: it is gone or no longer reading")
	}
	e.dropped += n
}

// watchStop closes stopWrites when waiting for the editor to read makes no
// more sense: the bridge is stopping, or the editor's input has ended.
func (e *engine) watchStop() {
	defer e.helperWG.Done()
	select {
	case <-e.ctx.Done():
	case <-e.reader.ended:
	}
	close(e.stopWrites)
}

func (e *engine) tap(ev TapEvent) {
	if e.b.Tap != nil {
		e.b.Tap(ev)
	}
	if ev.Hop == BridgeHop && e.b.OnNote != nil {
		e.b.OnNote(ev)
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
