package bridge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/wire/ndjson"
	"github.com/acp-bridge/acp-bridge/internal/wire/reclaim"
)

// editorMsg is one message for the editor, written as head, body and tail
// back to back and then a newline. Splitting it lets a relayed result go out
// without being copied: head is `{"jsonrpc":"2.0","id":7,"result":`, body the
// agent's bytes, tail `}`. Each part is owned by the writer once queued.
type editorMsg struct {
	head, body, tail []byte
	// oneLine says that the parts are known to hold no line break, so the
	// writer need not look (see oneLine).
	oneLine bool
	// translated says the message is in the editor's protocol version
	// already (a v2 editor's front made it).
	translated bool
	// run says body is a run of whole messages, each on its own line
	// and ended by one (see engine.appendRun): the writer writes it as it
	// is and keeps its buffer for the next run.
	run bool
}

func (m editorMsg) size() int { return len(m.head) + len(m.body) + len(m.tail) + 1 }

// editorWriter owns the editor's output stream. Only its writeLoop writes to
// it, one message per line, so lines never interleave: one stray
// byte on stdout corrupts the ACP stream.
//
// Messages wait in a queue bounded by bytes. The loop hands over messages
// one at a time; the writer takes the whole queue at once, writes it through
// one buffer (a run of a stream's updates as it lies, see writeMsg) and
// flushes when nothing more is waiting, so a burst of updates costs one
// system call and no goroutine switch per message.
type editorWriter struct {
	w     io.Writer
	limit int

	mu      sync.Mutex
	queue   []editorMsg
	spare   []editorMsg // the writer's last batch, reused
	queued  int         // bytes in queue
	closing bool
	wake    chan struct{} // capacity 1: the queue may be non-empty, or closing
	room    chan struct{} // capacity 1: the writer took the queue
	// idle says writeLoop has flushed everything and waits.
	idle bool

	done chan struct{} // closed when writeLoop has returned
	err  error         // set by writeLoop before done is closed

	// runs holds buffers of runs the writer has written, for the next
	// (see engine.appendRun); made counts the runs that exist, wherever
	// they are (see maxRuns).
	runs chan []byte
	made atomic.Int32
}

func newEditorWriter(w io.Writer, limit int) *editorWriter {
	return &editorWriter{
		w:     w,
		limit: limit,
		wake:  make(chan struct{}, 1),
		room:  make(chan struct{}, 1),
		done:  make(chan struct{}),
		runs:  make(chan []byte, maxRuns),
	}
}

// send queues m. While the queue is full it waits for the writer, and gives
// up (returning false) if the writer has failed or stop is closed (nil:
// never). A message larger than the limit is queued alone.
func (ew *editorWriter) send(m editorMsg, stop <-chan struct{}) bool {
	n := m.size()
	for {
		ew.mu.Lock()
		if ew.closing {
			ew.mu.Unlock()
			return false
		}
		if ew.queued == 0 || ew.queued+n <= ew.limit {
			ew.queue = append(ew.queue, m)
			ew.queued += n
			first := len(ew.queue) == 1
			ew.mu.Unlock()
			if first {
				signal(ew.wake)
			}
			return true
		}
		ew.mu.Unlock()
		select {
		case <-ew.room:
		case <-ew.done:
			return false
		case <-stop:
			return false
		}
	}
}

// sendAll queues ms in order, as send would one by one, taking the lock
// once for as many as fit: the loop hands over a whole batch of agent
// frames' messages at once. It returns how many it queued; it stops short
// only when send would have returned false.
func (ew *editorWriter) sendAll(ms []editorMsg, stop <-chan struct{}) int {
	sent := 0
	for sent < len(ms) {
		ew.mu.Lock()
		if ew.closing {
			ew.mu.Unlock()
			return sent
		}
		wasEmpty := len(ew.queue) == 0
		for sent < len(ms) {
			n := ms[sent].size()
			if ew.queued != 0 && ew.queued+n > ew.limit {
				break
			}
			ew.queue = append(ew.queue, ms[sent])
			ew.queued += n
			sent++
		}
		woke := wasEmpty && len(ew.queue) > 0
		ew.mu.Unlock()
		if woke {
			signal(ew.wake)
		}
		if sent == len(ms) {
			return sent
		}
		select {
		case <-ew.room:
		case <-ew.done:
			return sent
		case <-stop:
			return sent
		}
	}
	return sent
}

// keptQueue is the capacity, in messages, up to which a queue's backing
// array is kept for reuse once the burst that grew it is over. A stream
// grows each of the two to its thousands of messages; kept, they stayed
// part of the idle bridge's footprint for good.
const keptQueue = 1024

// idleTrim is how long the writer stays idle before it lets go of what a
// burst grew (burstKept). Let go at once, they were grown again after
// every read of the agent's, between which a stream's writer idles: over
// a WebSocket, 108 MB allocated per million updates, against 12 MB.
const idleTrim = 500 * time.Millisecond

// burstKept reports whether the writer holds more than it keeps for an
// idle stream: queues a burst grew. ew.mu is held.
func (ew *editorWriter) burstKept() bool {
	return cap(ew.queue) > keptQueue || cap(ew.spare) > keptQueue || len(ew.runs) > 0
}

// trimBurst lets go of what burstKept reports. ew.mu is held, and the
// queue is empty.
func (ew *editorWriter) trimBurst() {
	if cap(ew.queue) > keptQueue {
		ew.queue = nil
	}
	if cap(ew.spare) > keptQueue {
		ew.spare = nil
	}
	for len(ew.runs) > 0 {
		<-ew.runs
		ew.made.Add(-1)
	}
}

// A run's buffer holds runBytes, and at most maxRuns runs exist at once:
// the ones the writer has written wait in runs for the next. The bound
// matters twice. The editor's queue counts a run's length, not its
// buffer, and an agent that pauses after every update makes runs of one
// message each: unbounded, a stalled editor's queue would hold a 64 KiB
// buffer for every few hundred bytes it counts. And a stream keeps
// reusing the same few buffers, so it leaves no garbage: before the
// bound, runs the pool had no room for were dropped and new ones made,
// two in three of a stream's allocations (the rest of its garbage adds
// pages the process touches for the first time, each a fault).
// maxRuns covers what a stream has in flight: the run being gathered,
// the queue's and the writer's batch's (two limits' worth).
const (
	runBytes = 64 << 10
	maxRuns  = 8
)

// newRun returns an empty buffer for a run: one the writer has written,
// or a new one while fewer than maxRuns exist; nil when all are out.
// Called by the engine (one goroutine at a time).
func (ew *editorWriter) newRun() []byte {
	select {
	case b := <-ew.runs:
		return b
	default:
	}
	if ew.made.Load() >= maxRuns {
		return nil
	}
	ew.made.Add(1)
	return make([]byte, 0, runBytes)
}

// keepRun takes back the buffer of a run the writer has written.
func (ew *editorWriter) keepRun(b []byte) {
	select {
	case ew.runs <- b[:0]: // (room for every run that exists)
	default:
		ew.made.Add(-1)
	}
}

// errEditorStalled means the editor stopped reading what the bridge wrote.
var errEditorStalled = errors.New("the editor stopped reading the bridge's output")

// close lets the writer finish what is queued and waits for it until
// deadline: an editor that no longer reads must not keep the bridge alive.
func (ew *editorWriter) close(deadline time.Time) error {
	ew.mu.Lock()
	ew.closing = true
	ew.mu.Unlock()
	signal(ew.wake)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ew.done:
		return ew.err
	case <-t.C:
		return errEditorStalled
	}
}

// writeLoop writes queued messages until close, flushing whenever the queue
// runs dry.
func (ew *editorWriter) writeLoop() {
	defer close(ew.done)
	bw := bufio.NewWriterSize(ew.w, 64<<10)
	var trimTimer *time.Timer // (see idleTrim)
	defer func() {
		if trimTimer != nil {
			trimTimer.Stop()
		}
	}()
	for {
		ew.mu.Lock()
		if len(ew.queue) == 0 {
			closing := ew.closing
			ew.mu.Unlock()
			if err := bw.Flush(); err != nil || closing {
				ew.err = err
				return
			}
			ew.mu.Lock()
			ew.idle = len(ew.queue) == 0
			trim := ew.idle && ew.burstKept()
			ew.mu.Unlock()
			if trim {
				// A burst's queues and blocks are not kept for an
				// idle stream, but a stream idles between every read
				// of its agent's: they go once it has idled a while.
				if trimTimer == nil {
					trimTimer = time.NewTimer(idleTrim)
				} else {
					trimTimer.Reset(idleTrim)
				}
				select {
				case <-ew.wake:
					trimTimer.Stop()
				case <-trimTimer.C:
					ew.mu.Lock()
					if len(ew.queue) == 0 {
						ew.trimBurst()
					}
					ew.mu.Unlock()
					<-ew.wake
				}
			} else {
				<-ew.wake
			}
			ew.mu.Lock()
			ew.idle = false
			ew.mu.Unlock()
			continue
		}
		// Take the whole queue and give the loop the other buffer.
		batch := ew.queue
		ew.queue, ew.spare = ew.spare[:0], nil
		ew.queued = 0
		ew.mu.Unlock()
		signal(ew.room)
		for i := range batch {
			var err error
			if m := batch[i]; m.run && len(m.body) >= runBytes/2 {
				// A long run goes to the editor as it is, not through
				// bw's buffer: one copy less per message of a stream.
				if err = bw.Flush(); err == nil {
					_, err = ew.w.Write(m.body)
				}
			} else {
				err = writeMsg(bw, m)
			}
			if err != nil {
				ew.err = err
				return
			}
			n := batch[i].size()
			if batch[i].run {
				ew.keepRun(batch[i].body) // (bw has copied or written it)
			}
			batch[i] = editorMsg{} // let a large message go as soon as it is written
			reclaim.Release(n)
		}
		ew.mu.Lock()
		ew.spare = batch[:0]
		ew.mu.Unlock()
	}
}

// writeMsg writes m through bw, on one line (a run: on its lines).
func writeMsg(bw *bufio.Writer, m editorMsg) error {
	if m.run {
		_, err := bw.Write(m.body)
		return err
	}
	for _, part := range [3][]byte{m.head, m.body, m.tail} {
		if len(part) == 0 {
			continue
		}
		if !m.oneLine {
			part = oneLine(part)
		}
		if _, err := bw.Write(part); err != nil {
			return err
		}
	}
	return bw.WriteByte('\n')
}

// oneLine returns b, or a copy of it with every CR and LF turned into a space
// if it has any. Valid JSON holds raw line breaks only as white space, so the
// message means the same and stays one line: stdout is one message per line
// whatever a translator built. The engine compacts agent frames before they
// get here; this is the last guard, and memchr-fast when there is nothing to do.
func oneLine(b []byte) []byte {
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	c := bytes.Clone(b)
	for i, ch := range c {
		if ch == '\n' || ch == '\r' {
			c[i] = ' '
		}
	}
	return c
}

// signal makes a non-blocking send on a channel of capacity 1.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// editorLine is one read from the editor: a frame, or the error that ended
// or interrupted reading (a *ndjson.TooLongError is not final).
type editorLine struct {
	frame []byte
	err   error
}

// editorReader reads the editor's input and hands each line to the loop.
type editorReader struct {
	r     *ndjson.Reader
	lines chan<- editorLine
	// ended is closed when the input has ended (or failed), before the
	// final editorLine is handed over: the loop may be busy writing to an
	// editor that no longer reads, and must learn of the end all the same.
	ended chan struct{}
	done  chan struct{} // closed when readLoop returns
}

// readLoop runs until the input ends or ctx is done. A read blocked in the
// editor's stream when ctx ends returns when that stream next yields, or at
// once if the stream has a read deadline to set (see Serve).
//
// While the loop has not taken a line, the reader reads one line ahead
// (handing the waiting one over from a helper goroutine): the loop may be
// stuck writing to an editor that stopped reading, and only a read sees
// that the editor then closed its input, which is what releases the loop
// (ended, stopWrites). One line ahead, never more: the engine's
// backpressure on the editor's input holds.
func (er *editorReader) readLoop(ctx context.Context) {
	defer close(er.done)
	var ahead *editorLine
	for {
		var l editorLine
		if ahead != nil {
			l, ahead = *ahead, nil
		} else {
			l = er.next()
		}
		select {
		case er.lines <- l:
		case <-ctx.Done():
			return
		default:
			// The loop is busy: hand the line over from a helper while
			// this goroutine reads the next one.
			sent := make(chan bool, 1)
			go func() {
				select {
				case er.lines <- l:
					sent <- true
				case <-ctx.Done():
					sent <- false
				}
			}()
			if l.err == nil {
				next := er.next()
				ahead = &next
			}
			if !<-sent {
				return
			}
		}
		if l.err != nil {
			if _, tooLong := l.err.(*ndjson.TooLongError); !tooLong {
				return
			}
		}
	}
}

// next reads the next line; the end of the input (or its failure) closes
// ended at once, before the line that says so is handed over.
func (er *editorReader) next() editorLine {
	frame, err := er.r.Next()
	if err != nil {
		if _, tooLong := err.(*ndjson.TooLongError); !tooLong {
			close(er.ended)
		}
	}
	return editorLine{frame: frame, err: err}
}

// Writing to the editor: every message goes through the loop's writeEditor
// family into the writer's queue.

func (e *engine) writeEditor(frame []byte) { e.writeEditorMsg(editorMsg{body: frame}) }

func (e *engine) writeEditorMsg(m editorMsg) { e.writeEditorSession(m, "") }

// writeEditorSession queues one message for the editor. It waits while the
// editor's queue is full (backpressure), but not once the bridge is stopping
// or the editor has closed its input: an editor that neither reads nor
// writes any more must not keep the bridge alive.
func (e *engine) writeEditorSession(m editorMsg, session string) {
	if len(e.dur.answers) > 0 && e.dur.queueBehindAnswer(m, session) {
		return // scrubbed when it is released, through here again
	}
	if e.v2.front != nil && !m.translated {
		e.v2.toFront(m, session) // back through here, translated
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
	if e.runs {
		if m.size() <= runBytes/4 && e.appendRun(m) {
			return
		}
		// Too long for a run, or every run is out, but it lies in the
		// reader's buffer all the same (appendRun): the writer gets a
		// copy of its own.
		m.body = bytes.Clone(m.body)
	}
	e.closeRun()
	e.queueEditor(m)
}

// queueEditor adds m to the batch while batching, else hands it to the
// writer.
func (e *engine) queueEditor(m editorMsg) {
	if e.batching {
		e.batch = append(e.batch, m)
		if e.batchBytes += m.size(); e.batchBytes >= e.out.limit {
			e.flushEditor() // the writer's bound holds for a batch too
		}
		return
	}
	if !e.out.send(m, e.stopWaiting()) {
		e.droppedEditor(m)
	}
}

// appendRun copies m into the run of messages being gathered, which goes
// to the writer as one message (flushEditor, closeRun). A frame handled
// under a lease lies in its link's read buffer, reused once the reader
// reads again (lend.go): what the editor is sent of it is copied here, into
// buffers the writer hands back, so that a stream allocates nothing per
// message. It reports false, and leaves m to its caller, when the run is
// full and no other is free (maxRuns).
func (e *engine) appendRun(m editorMsg) bool {
	if e.run == nil || len(e.run)+m.size() > cap(e.run) {
		e.closeRun()
		if e.run = e.out.newRun(); e.run == nil {
			return false
		}
	}
	start := len(e.run)
	e.run = append(append(append(e.run, m.head...), m.body...), m.tail...)
	if !m.oneLine {
		for i, c := range e.run[start:] {
			if c == '\n' || c == '\r' {
				e.run[start+i] = ' ' // (as oneLine would)
			}
		}
	}
	e.run = append(e.run, '\n')
	return true
}

// closeRun queues the run being gathered, if any, after what was queued
// before it.
func (e *engine) closeRun() {
	if len(e.run) == 0 {
		return
	}
	m := editorMsg{body: e.run, run: true, oneLine: true}
	e.run = nil
	e.queueEditor(m)
}

// flushEditor hands the batch gathered while batching to the writer.
func (e *engine) flushEditor() {
	e.closeRun()
	if len(e.batch) == 0 {
		return
	}
	if sent := e.out.sendAll(e.batch, e.stopWaiting()); sent < len(e.batch) {
		e.droppedEditor(e.batch[sent:]...)
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

func (e *engine) droppedEditor(ms ...editorMsg) {
	if e.dropped == 0 {
		e.log.Warn("message for the editor dropped: it is gone or no longer reading")
	}
	e.dropped += len(ms)
	for _, m := range ms {
		if m.run {
			e.out.made.Add(-1) // a run no writer will hand back
		}
	}
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
