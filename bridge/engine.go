package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/wire/ndjson"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/go-hclog"
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
	// agent's answer).
	endOfInputWait = 1500 * time.Millisecond
	// exitBudget is the time from the end of the editor's input (or the
	// stop: SIGTERM, a serve connection's end) to the end of Serve: the
	// bridge exits within 3 s. The phases share it rather than add up:
	// the wait for the requests in flight (endOfInputWait), then the
	// editor's last answers (at most shutdownWriteWait) and the links'
	// close, a child's SIGTERM grace cut to what is left
	// (legacy.Process.CloseBy), all by exitBudget less exitReserve.
	exitBudget = 3 * time.Second
	// exitReserve is what the budget keeps after the links are closed:
	// the store's last writes and the process's exit.
	exitReserve = 250 * time.Millisecond
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
	helperWG   sync.WaitGroup
	freeing    atomic.Bool // a freeMemory is running

	// loop-owned
	nextRef    translate.Ref
	nextCallID uint64
	pending    pendingTable
	calls      map[string]*call
	sessions   sessionTable
	// abandoned maps prompts the engine answered after the cancel grace to
	// their session, until the agent's own late answer arrives.
	abandoned map[translate.Ref]string
	// init is where the editor's initialize stands (shared with v2).
	init       editorInit
	editorCaps clientCaps
	// held are editor messages that arrived while initialize was pending;
	// they are handled, in order, once it has been answered.
	held    [][]byte
	repairs repairCounts
	// unmatched counts the agent frames the translator had no rule for;
	// they are not repairs (see note).
	unmatched int
	// exitBy is when Serve must have returned: exitBudget after the
	// editor's input ended, or after the stop when it came first.
	exitBy time.Time
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
	// on one line (see isAgentLine); agentChunk its kind when it is a
	// text chunk as the SDKs write it (translate.PlainChunk).
	agentLine  []byte
	agentChunk string
	// lent is the lease of the sink the loop has out, if any (lend.go).
	lent *lease
	// runs is set while a lease's holder handles frames: messages for the
	// editor are copied into run (appendRun).
	runs bool
	run  []byte
	dur  durableSessions
	sup  supervisor
	// streamed counts the bytes of updates sent the editor since a turn
	// last ended (turnEnded).
	streamed int
	// v2 serves an editor that speaks ACP v2 (v2relay.go, v2front.go).
	v2 v2editor
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
		pending:    newPendingTable(),
		calls:      make(map[string]*call),
		sessions:   make(sessionTable),
		abandoned:  make(map[translate.Ref]string),
	}
	if e.log == nil {
		e.log = hclog.NewNullLogger()
	}
	e.v2.start(e, b, e.log, &e.init)
	e.dur.start(e, &e.sup, &e.v2, b, e.log, e.sessions, &e.pending, e.done, &e.helperWG)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.ctx = ctx
	e.sup.start(e, &e.v2, b, e.log, ctx, e.inbox, e.drained, &e.pending, e.sessions)
	b.serving.Store(e)
	defer b.serving.Store(nil)

	e.editorOut = editorOut
	go e.out.writeLoop()
	e.reader = &editorReader{
		r:     ndjson.NewReader(editorIn, b.MaxMessage),
		lines: e.lines,
		ended: make(chan struct{}),
		done:  make(chan struct{}),
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
	defer e.dur.flushRecords() // what failing the pending requests recorded
	close(e.done)              // from here on, link goroutines and timers stop reporting
	if e.exitBy.IsZero() {
		e.exitBy = time.Now().Add(exitBudget)
	}
	closeBy := e.exitBy.Add(-exitReserve)
	deadline := time.Now().Add(shutdownWriteWait)
	if deadline.After(closeBy) {
		deadline = closeBy
	}
	links := slices.Clone(e.sup.links)
	if e.sup.control != nil && e.sup.control.detached {
		links = append(links, e.sup.control)
	}
	linksClosed := make(chan struct{})
	go e.sup.closeLinks(links, closeBy, linksClosed)

	giveUp := make(chan struct{})
	stopGiveUp := time.AfterFunc(time.Until(deadline), func() { close(giveUp) })
	defer stopGiveUp.Stop()
	e.giveUp = giveUp
	e.dur.releaseAnswers(true)
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
	for _, l := range e.sup.links {
		e.sup.stopWake(l)
	}
	e.dur.releaseSessions()
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

// loop is the engine: the one goroutine that owns translators, sessions and
// the pending tables. It never blocks on an agent; it blocks on the editor
// only when the editor stops reading (backpressure), and stops reading the
// editor while an agent stops reading (backpressure the other way).
func (e *engine) loop(ctx context.Context) error {
	defer e.dur.flushRecords()
	defer e.stopDeadlines()
	defer e.takeBack()
	// endOfInput fires endOfInputWait after the editor's input ended; until
	// then the loop reads no more input and serves only the agents, so that
	// the requests in flight get their answers rather than a shutdown error.
	var endOfInput <-chan time.Time
	for {
		// The loop lends its sink only while it waits (lend.go), and
		// takes it back first whatever wakes it.
		e.lend()
		lines := e.lines
		if e.paused() || endOfInput != nil {
			lines = nil
		}
		select {
		case <-ctx.Done():
			e.takeBack()
			e.log.Info("stopping", "reason", context.Cause(ctx))
			return nil
		case <-e.out.done:
			e.takeBack()
			if e.inputEnded() {
				// The editor closed both ends: it has gone, which is how
				// a session ends.
				e.log.Warn("the editor stopped reading after closing its input", "error", e.out.err)
				return nil
			}
			return fmt.Errorf("writing to the editor: %w", e.out.err)
		case <-endOfInput:
			e.takeBack()
			e.log.Info("requests still in flight at the end of the editor's input; shutting down", "count", len(e.pending.byRef)+len(e.held))
			return nil
		case l := <-lines:
			e.takeBack()
			if l.err != nil {
				var tooLong *ndjson.TooLongError
				if errors.As(l.err, &tooLong) {
					e.tooLong(tooLong)
					continue
				}
				if errors.Is(l.err, io.EOF) {
					e.exitBy = time.Now().Add(exitBudget)
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
		case <-e.inbox.wake:
			e.takeBack()
			batch := e.inbox.take()
			e.batching = true
			for i := range batch {
				e.agentEvent(&batch[i])
				batch[i] = agentEvent{}
			}
			e.batching = false
			e.flushEditor()
		case task := <-e.tasks:
			e.takeBack()
			task()
		case <-e.dur.recorded:
			e.takeBack()
			e.dur.releaseAnswers(false)
		case <-e.drained:
			e.takeBack()
		}
		e.releaseHeld()
		e.dur.flushRecords()
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
	for _, l := range e.sup.links {
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
