package bridge

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/wire/reclaim"
	"github.com/acp-bridge/acp-bridge/translate"
)

// link is one agent connection and its translator. The engine's loop owns
// every field but those marked otherwise; the link's goroutines (run and
// writeLoop) own the connection.
type link struct {
	id    int
	spawn Spawn
	bind  Binding
	tr    translate.Translator
	out   frameQueue
	// control is true for the link of connection-level requests; detached
	// is true for a control "link" that has no connection at all
	// (Dialect.NoControlLink).
	control, detached bool

	// calls maps the translator's outstanding Call refs to the editor-side
	// id key, so CancelCall can name the editor's id.
	calls map[translate.Ref]string
	// up is set when the connection is established (LinkUp was fed).
	up bool
	// down is why the link is gone (nil while it is usable).
	down *translate.Error
	// unmatched counts the agent frames of this link no rule matched.
	unmatched int
	// wake is the translator's pending Timer, if any.
	wake *time.Timer
	// queuesPrompts: the agent said in its initialize answer that it
	// queues a prompt sent while a turn runs, so the one-turn rule passes
	// such prompts on (no stricter than what it fronts).
	queuesPrompts bool
	// initRef is the initialize the engine sent on this new link while it
	// is unanswered (0 otherwise); gated are the messages for the link held
	// until then, in order. Agents refuse every request before their
	// initialize is answered (the official SDKs do), so a link opened for a
	// session, a switch or a reconnect gets nothing else first.
	initRef translate.Ref
	gated   []translate.Msg

	// parser reads the frames of the link's goroutine (prepare), which
	// owns it: a stream's chunks are read by their opening as a whole.
	parser translate.Parser

	// offers carries the loop's lease of its sink to the link's reader
	// (lend.go); capacity 1. canLend says the connection tells its reader
	// when it is about to wait (OnIdle), which a lease needs; handled
	// counts the link's frames the loop has handled.
	offers  chan *lease
	canLend bool
	handled uint64

	cancel      context.CancelFunc // stops dialing and both goroutines
	delay       time.Duration      // wait before dialing (backoff); set before run
	writeClosed atomic.Bool        // writeLoop closed conn after a write error
	mu          sync.Mutex
	conn        Link // set once dialed; guarded by mu
	closed      bool // the engine closed the link; guarded by mu
}

func (l *link) String() string {
	if l.spawn.Session == "" {
		return fmt.Sprintf("link %d (control)", l.id)
	}
	return fmt.Sprintf("link %d (session %s)", l.id, l.spawn.Session)
}

// agentEvent is what a link's goroutine reports to the loop: a frame, the
// connection coming up, or the link's end.
type agentEvent struct {
	link  *link
	frame []byte
	up    bool
	idler bool  // with up: the connection can take a lease (see link.canLend)
	err   error // non-nil: the link is lost

	// What the link's goroutine learnt of frame (see prepare).
	compacted bool // frame had line breaks, now removed
	oneLine   bool // frame is known to hold no line break
	parsed    bool // env and perr are ParseEnvelope's
	env       translate.Envelope
	perr      *translate.Error
	// (reset sets every field but env: a field added here is reset there,
	// TestAgentEventResetClearsAllButTheEnvelope.)
}

// prepare does, in the goroutine that read the frame, the work on it that
// needs nothing of the engine's state: putting it on one line and, for a
// translator that takes parsed frames, parsing and validating it. The
// engine's loop, which every message of every link goes through, is then
// left with routing alone.
func (ev *agentEvent) prepare(parse bool) {
	if parse {
		ev.perr = ev.link.parser.ParseInto(&ev.env, ev.frame)
		ev.parsed = true
		if ev.env.Plain {
			ev.oneLine = true // (the stream's usual frame: no search)
			return
		}
	}
	if bytes.IndexByte(ev.frame, '\n') >= 0 || bytes.IndexByte(ev.frame, '\r') >= 0 {
		// A pretty-printed frame (one message per WebSocket text frame,
		// newlines inside) would reach the editor as several lines.
		ev.frame = compact(ev.frame)
		ev.compacted = true
		if parse {
			ev.perr = translate.ParseEnvelopeInto(&ev.env, ev.frame)
		}
	}
	ev.oneLine = true
}

// run dials the agent and pumps frames until the link fails or is closed.
// Everything it learns goes to the inbox, in order; it returns only after its
// writer goroutine has returned, so no goroutine of a link outlives it.
func (l *link) run(ctx context.Context, dial func(context.Context, Spawn) (Link, error), in *inbox) {
	if l.delay > 0 {
		t := time.NewTimer(l.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			in.put(agentEvent{link: l, err: context.Cause(ctx)}, ctx.Done())
			return
		}
	}
	conn, err := dial(ctx, l.spawn)
	if err != nil {
		in.put(agentEvent{link: l, err: &dialError{err}}, ctx.Done())
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		conn.Close()
		return
	}
	l.conn = conn
	l.mu.Unlock()
	// The lease of the loop's sink this reader holds, if any (lend.go),
	// and the frames it has put in the inbox.
	var ls *lease
	var put uint64
	idler, canLend := conn.(interface{ OnIdle(func()) })
	if canLend {
		idler.OnIdle(func() {
			if ls != nil {
				ls.idle()
			}
		})
	}
	if !in.put(agentEvent{link: l, up: true, idler: canLend}, ctx.Done()) {
		conn.Close()
		return
	}

	_, parse := l.tr.(translate.EnvelopeTranslator)
	writeErr := make(chan error, 1)
	readDone := make(chan struct{})
	writerDone := make(chan struct{})
	go l.writeLoop(ctx, conn, writeErr, readDone, writerDone)
	defer func() { <-writerDone }()
	// One event for every frame: prepare hands the parser a pointer into
	// it, which makes it escape; declared here it is allocated once per
	// link, not once per frame (TestLinkReadLoopEventStaysOnStack).
	var ev agentEvent
	borrower, _ := conn.(interface {
		ReadBorrowed(context.Context) ([]byte, bool, error)
	})
	for {
		var frame []byte
		var borrowed bool
		if ls != nil && borrower != nil {
			frame, borrowed, err = borrower.ReadBorrowed(ctx)
		} else {
			frame, err = conn.Read(ctx)
		}
		if err != nil {
			close(readDone)
			select {
			case werr := <-writeErr:
				if l.writeClosed.Load() {
					// The reader failed only because the writer gave up.
					err = fmt.Errorf("writing to the agent: %w", werr)
				}
			default:
			}
			conn.Close()
			l.out.shut()
			in.put(agentEvent{link: l, err: err}, ctx.Done())
			return
		}
		ev = agentEvent{link: l, frame: frame}
		ev.prepare(parse)
		if ls == nil && canLend {
			ls = l.takeOffer(put)
		}
		if ls != nil {
			if ls.pass(&ev) {
				continue
			}
			ls = nil // given back (or taken back): this frame and the next go to the loop
		}
		if borrowed {
			// The loop may keep it: the reader's buffer is not.
			compacted := ev.compacted
			ev = agentEvent{link: l, frame: bytes.Clone(ev.frame)}
			ev.prepare(parse)
			ev.compacted = compacted
		}
		put++
		if !in.put(ev, ctx.Done()) {
			close(readDone)
			conn.Close()
			l.out.shut()
			return
		}
	}
}

// dialError marks a failure to connect, as opposed to a connection lost
// later: only the former counts toward the reconnect backoff.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// writeFailGrace is how long a failed write waits for the read side to
// report why the agent went away. A child that exits mid-turn breaks the
// pipe of our next write; its exit status, which the reader gets, says far
// more than "broken pipe".
const writeFailGrace = 500 * time.Millisecond

// writeLoop is the only writer of conn. After a write error it closes conn
// (ending run's read) unless the read side fails first on its own.
func (l *link) writeLoop(ctx context.Context, conn Link, writeErr chan<- error, readDone <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		frame, ok := l.out.pop(ctx)
		if !ok {
			return
		}
		err := conn.Write(ctx, frame)
		reclaim.Release(len(frame)) // written (or failed): the frame is garbage
		if err != nil {
			writeErr <- err
			t := time.NewTimer(writeFailGrace)
			defer t.Stop()
			select {
			case <-readDone:
			case <-ctx.Done():
			case <-t.C:
				l.writeClosed.Store(true)
				conn.Close()
			}
			return
		}
	}
}

// close stops the link's goroutines and closes its connection. Closing a
// child process link waits for the staged stop, so the engine calls close
// off its loop.
func (l *link) close() { l.closeBy(time.Time{}) }

// closeBy is close, done by deadline (not zero) if the link can fit its
// stages to one (a child process: see legacy.Process.CloseBy).
func (l *link) closeBy(deadline time.Time) {
	l.mu.Lock()
	l.closed = true
	conn := l.conn
	l.mu.Unlock()
	l.cancel()
	l.out.shut()
	if conn == nil {
		return
	}
	if c, ok := conn.(interface{ CloseBy(time.Time) error }); ok && !deadline.IsZero() {
		c.CloseBy(deadline)
		return
	}
	conn.Close()
}

func (l *link) closedByEngine() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// frameQueue holds the frames for one agent, bounded by bytes. Pushing never
// blocks the engine's loop: the loop checks over() and stops reading the
// editor while any link's queue is over its bound (backpressure), so an agent
// that stops reading stalls only the editor's input, never the output of
// other sessions (a pending permission in one session blocking the others
// is a known adapter bug, claude-agent-acp #830).
type frameQueue struct {
	mu     sync.Mutex
	items  [][]byte
	bytes  int
	limit  int
	shutq  bool
	signal chan struct{} // capacity 1: "items may be non-empty"
	// drained, when not nil, is signalled when the queue falls back under
	// its bound (the loop resumes reading the editor).
	drained chan struct{}
}

func (q *frameQueue) init(limit int, drained chan struct{}) {
	q.signal = make(chan struct{}, 1)
	q.limit = limit
	q.drained = drained
}

func (q *frameQueue) push(frame []byte) {
	q.mu.Lock()
	if !q.shutq {
		q.items = append(q.items, frame)
		q.bytes += len(frame)
	}
	q.mu.Unlock()
	signal(q.signal)
}

// over reports whether the queue holds more than its bound.
func (q *frameQueue) over() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes > q.limit
}

func (q *frameQueue) shut() {
	q.mu.Lock()
	q.shutq = true
	q.items = nil
	q.bytes = 0
	q.mu.Unlock()
	signal(q.signal)
	if q.drained != nil {
		signal(q.drained)
	}
}

// pop returns the oldest frame, waiting for one; false once shut or ctx ends.
func (q *frameQueue) pop(ctx context.Context) (frame []byte, ok bool) {
	for {
		q.mu.Lock()
		if q.shutq {
			q.mu.Unlock()
			return nil, false
		}
		if len(q.items) > 0 {
			frame := q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
			wasOver := q.bytes > q.limit
			q.bytes -= len(frame)
			nowUnder := q.bytes <= q.limit
			q.mu.Unlock()
			if wasOver && nowUnder && q.drained != nil {
				signal(q.drained)
			}
			return frame, true
		}
		q.mu.Unlock()
		select {
		case <-q.signal:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// inbox carries what every link's goroutine reports to the loop, bounded by
// bytes. Links append one event at a time; the loop takes everything waiting
// at once, so a stream of updates costs one wake-up of the loop per batch
// rather than per frame. A link whose events do not fit waits (and so stops
// reading its agent): backpressure from a slow editor reaches the agent.
type inbox struct {
	mu     sync.Mutex
	items  []agentEvent
	spare  []agentEvent
	bytes  int
	limit  int
	wake   chan struct{} // capacity 1: items may be non-empty
	roomCh chan struct{} // closed and replaced whenever the loop takes items
}

func newInbox(limit int) *inbox {
	return &inbox{limit: limit, wake: make(chan struct{}, 1), roomCh: make(chan struct{})}
}

// put appends ev, waiting while the inbox is full; false if stop closed first.
func (in *inbox) put(ev agentEvent, stop <-chan struct{}) bool {
	n := len(ev.frame)
	for {
		in.mu.Lock()
		if in.bytes == 0 || in.bytes+n <= in.limit {
			in.items = append(in.items, ev)
			in.bytes += n
			first := len(in.items) == 1
			in.mu.Unlock()
			if first {
				signal(in.wake)
			}
			return true
		}
		room := in.roomCh
		in.mu.Unlock()
		select {
		case <-room:
		case <-stop:
			return false
		}
	}
}

// take returns every waiting event; the slice is valid until the next take.
func (in *inbox) take() []agentEvent {
	in.mu.Lock()
	batch := in.items
	in.items, in.spare = in.spare[:0], batch
	if len(batch) <= keptQueue/16 && cap(in.items) > keptQueue {
		// The stream that grew it is over (see keptQueue): the next
		// small batch lets it go; the one returned goes the same way
		// the time after.
		in.items = nil
	}
	if in.bytes > 0 {
		close(in.roomCh)
		in.roomCh = make(chan struct{})
	}
	in.bytes = 0
	in.mu.Unlock()
	return batch
}

// backoff spaces out dials of an agent that cannot be reached: capped
// exponential with jitter, reset by a connection that comes up.
type backoff struct {
	min, max time.Duration
	failures int
	last     time.Time // when the last failed dial ended
}

// delay is how long a dial starting at now should wait.
func (b *backoff) delay(now time.Time) time.Duration {
	if b.failures == 0 {
		return 0
	}
	d := b.min << min(b.failures-1, 16)
	if d > b.max || d <= 0 {
		d = b.max
	}
	// ±20% jitter, so that many bridges restarted together do not dial in
	// lockstep.
	d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	if wait := b.last.Add(d).Sub(now); wait > 0 {
		return wait
	}
	return 0
}

func (b *backoff) failed(now time.Time) { b.failures++; b.last = now }
func (b *backoff) succeeded()           { b.failures = 0 }
