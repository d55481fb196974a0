package bridge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
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
	// raw is bytes to write as they are, newline included: a run of
	// messages trySend copied, or a batch a link published.
	raw bool
}

func (m editorMsg) size() int { return len(m.head) + len(m.body) + len(m.tail) + 1 }

// joined returns m's parts as one slice, m.body itself when it is alone.
func (m editorMsg) joined() []byte {
	if len(m.head) == 0 && len(m.tail) == 0 {
		return m.body
	}
	return bytes.Join([][]byte{m.head, m.body, m.tail}, nil)
}

// editorWriter owns the editor's output stream. Only its writeLoop writes to
// it, one message per line, so lines never interleave (acp-spec.md §20.2).
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
	// owed says messages were queued without waking the writer (a link
	// that wakes it when it is about to wait, see trySend): the next
	// send, or kick, wakes it.
	owed bool
	room chan struct{} // capacity 1: the writer took the queue
	// idle says writeLoop has flushed everything and waits.
	idle bool

	// The bytes of the messages trySend copies (a borrowed frame's): block
	// is being filled and filled holds the blocks before it. The writer
	// takes both with the queue, so that a block belongs to one batch, and
	// once the batch is written keeps them in free for the messages to
	// come (returnBlocks); taken is the list it took them in, reused.
	block               []byte
	filled, free, taken [][]byte
	// tailRun says the queue's last message is a run (raw) of copied
	// messages that ends where block does, which the next message copied
	// into block extends: the writer then writes a read's worth of a
	// stream's updates as one slice, not one message at a time.
	tailRun bool

	done chan struct{} // closed when writeLoop has returned
	err  error         // set by writeLoop before done is closed
}

func newEditorWriter(w io.Writer, limit int) *editorWriter {
	return &editorWriter{
		w:     w,
		limit: limit,
		wake:  make(chan struct{}, 1),
		room:  make(chan struct{}, 1),
		done:  make(chan struct{}),
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
			ew.tailRun = false
			ew.queued += n
			first := len(ew.queue) == 1 || ew.owed
			ew.owed = false
			ew.mu.Unlock()
			if first {
				signal(ew.wake)
			}
			return true
		}
		// Room comes only from the writer: a wake-up that a link owes it
		// (trySend's later) is given now, or this send could wait for a
		// writer that waits for the link, itself waiting for the gate
		// the send's caller holds.
		owed := ew.owed
		ew.owed = false
		ew.mu.Unlock()
		if owed {
			signal(ew.wake)
		}
		select {
		case <-ew.room:
		case <-ew.done:
			return false
		case <-stop:
			return false
		}
	}
}

// trySend queues m if there is room now, and reports whether it did: the
// fast path (fast.go) never waits for the editor; what does not fit goes
// through the loop, which does.
//
// With later, trySend does not wake the writer: the caller will (kick)
// before it waits for anything, as a relay flushes its output before it
// blocks on its input. A stream's updates then reach the writer a read's
// worth at a time, one wake-up and one write for hundreds of them, rather
// than a wake-up for every few.
//
// With copyParts, m's parts are copied into the writer's blocks (one message,
// oneLine), and the caller may reuse their memory as soon as trySend
// returns: a stream's updates then cost no allocation of their own, and no
// collection (see borrowingLink).
func (ew *editorWriter) trySend(m *editorMsg, later, copyParts bool) bool {
	n := m.size()
	ew.mu.Lock()
	if ew.closing || ew.queued != 0 && ew.queued+n > ew.limit {
		ew.mu.Unlock()
		return false
	}
	wake := len(ew.queue) == 0 || ew.owed
	if copyParts {
		b := ew.carve(n)[:n]
		k := 0
		if len(m.head) > 0 {
			k = copy(b, m.head)
		}
		k += copy(b[k:], m.body)
		if len(m.tail) > 0 {
			k += copy(b[k:], m.tail)
		}
		b[k] = '\n'
		if !m.oneLine {
			spaceLineBreaks(b[:n-1])
		}
		switch {
		case n > maxCarved: // (a slice of its own)
			ew.queue = append(ew.queue, editorMsg{body: b, raw: true, oneLine: true})
			ew.tailRun = false
		case ew.tailRun:
			run := &ew.queue[len(ew.queue)-1]
			run.body = run.body[:len(run.body)+n]
		default:
			ew.queue = append(ew.queue, editorMsg{body: ew.block[len(ew.block)-n:], raw: true, oneLine: true})
			ew.tailRun = true
		}
	} else {
		ew.queue = append(ew.queue, *m)
		ew.tailRun = false
	}
	ew.added(n, wake, later)
	return true
}

// added counts n bytes just queued and unlocks ew.mu, then wakes the
// writer when wake says it should (the queue was empty, or a wake-up was
// owed), unless later defers that while less than laterBytes waits (see
// trySend).
func (ew *editorWriter) added(n int, wake, later bool) {
	ew.queued += n
	if later && ew.queued < laterBytes {
		ew.owed, wake = wake, false
	} else {
		ew.owed = false
	}
	ew.mu.Unlock()
	if wake {
		signal(ew.wake)
	}
}

// trySendLine is trySend of a message that is body alone, known to be on
// one line, copied (copyParts): a stream's usual update, whose copy joins
// the run being filled when the block has room, with no more work than
// that.
func (ew *editorWriter) trySendLine(body []byte, later bool) bool {
	n := len(body) + 1
	ew.mu.Lock()
	if !ew.tailRun || n > maxCarved || cap(ew.block)-len(ew.block) < n || ew.closing || ew.queued+n > ew.limit {
		ew.mu.Unlock()
		m := editorMsg{body: body, oneLine: true}
		return ew.trySend(&m, later, true)
	}
	at := len(ew.block)
	ew.block = ew.block[:at+n]
	copy(ew.block[at:], body)
	ew.block[at+n-1] = '\n'
	run := &ew.queue[len(ew.queue)-1]
	run.body = run.body[:len(run.body)+n]
	ew.queued += n
	// As trySend: a writer not woken for what is queued (owed) is woken
	// now, unless the link wakes it when it is about to wait (later) and
	// less than laterBytes waits. Past laterBytes the writer has been
	// woken, and the run keeps growing here while it writes: a stream
	// faster than its editor spent most of its updates in trySend.
	wake := ew.owed && (!later || ew.queued >= laterBytes)
	if wake {
		ew.owed = false
	}
	ew.mu.Unlock()
	if wake {
		signal(ew.wake)
	}
	return true
}

const (
	// blockSize is the size of the writer's blocks. A message larger
	// than maxCarved gets a slice of its own.
	blockSize = 32 << 10
	maxCarved = blockSize / 4
	// directRun is the size from which writeLoop writes a run of copied
	// updates as it lies in its block, not through its buffer.
	directRun = blockSize / 2
	// idleBlocks bounds the blocks an idle writer keeps. A stream keeps
	// as many as its queue can fill (its bound's worth, see returnBlocks):
	// an editor slower than the agent keeps the queue full, and each
	// batch the writer takes is then the whole bound.
	idleBlocks = 4
)

// carve returns an empty slice with room for n bytes, from the block being
// filled when n is small, for trySend to append a message to. ew.mu is
// held.
func (ew *editorWriter) carve(n int) []byte {
	if n > maxCarved {
		return make([]byte, 0, n)
	}
	if cap(ew.block)-len(ew.block) < n {
		ew.nextBlock()
	}
	at := len(ew.block)
	ew.block = ew.block[:at+n]
	return ew.block[at : at : at+n]
}

// nextBlock starts a new block to fill, a free one when there is one.
// ew.mu is held.
func (ew *editorWriter) nextBlock() {
	ew.tailRun = false // (a run does not span blocks)
	if len(ew.block) > 0 {
		ew.filled = append(ew.filled, ew.block)
	}
	if ew.block = ew.takeFree(); ew.block == nil {
		ew.block = make([]byte, 0, blockSize)
	}
}

// takeFree returns a free block, nil when there is none. ew.mu is held.
func (ew *editorWriter) takeFree() []byte {
	k := len(ew.free)
	if k == 0 {
		return nil
	}
	b := ew.free[k-1]
	ew.free[k-1] = nil
	ew.free = ew.free[:k-1]
	return b
}

// space reports how many bytes the queue takes now without waiting, at
// least n, for a link to gather a batch of updates that fits (see
// engine.beginBatch); ok is false when n does not fit, or the writer is
// closing. While the batch is gathered its link holds the gate, which
// every other sender takes first, so the queue only shrinks: publish never
// refuses a batch for want of room.
func (ew *editorWriter) space(n int) (_ int, ok bool) {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	switch {
	case ew.closing:
		return 0, false
	case ew.queued == 0:
		return max(ew.limit, n), true
	}
	r := ew.limit - ew.queued
	return r, r >= n
}

// publish hands the writer a batch of whole lines that space said fits:
// the batch's buffer becomes one of the writer's blocks, and the writer is
// woken as trySend would (later). ok is false, with nothing done, when the
// writer is closing.
func (ew *editorWriter) publish(batch []byte, later bool) (next []byte, ok bool) {
	ew.mu.Lock()
	if ew.closing {
		ew.mu.Unlock()
		return batch[:0], false
	}
	wake := len(ew.queue) == 0 || ew.owed
	// The batch's buffer becomes one of the writer's filled blocks, as it
	// is, and the caller gets a free block for its next batch.
	ew.filled = append(ew.filled, batch)
	ew.queue = append(ew.queue, editorMsg{body: batch, raw: true, oneLine: true})
	ew.tailRun = false
	next = ew.takeFree()
	ew.added(len(batch), wake, later)
	return next, true
}

// takeBlocks hands the writer the blocks that hold the queue's copied
// messages, with the queue: the next message copied starts a new block.
// ew.mu is held.
func (ew *editorWriter) takeBlocks() [][]byte {
	blocks := append(ew.taken[:0], ew.filled...)
	clear(ew.filled)
	ew.filled, ew.taken = ew.filled[:0], nil
	if len(ew.block) > 0 {
		blocks = append(blocks, ew.block)
		ew.block = nil
	}
	return blocks
}

// returnBlocks takes back the blocks of a batch that is written, keeping
// for the messages to come as many as a stream has in use at once: the
// queue's bound, filled while the writer writes the batch before, which
// held as much. Kept for one bound's worth only, blocks were dropped and
// made again whenever an editor read slower than the agent wrote.
// ew.mu is held.
func (ew *editorWriter) returnBlocks(blocks [][]byte) {
	keep := max(idleBlocks, 2*(ew.limit/blockSize+1))
	for _, b := range blocks {
		// (A batch a link published is a block only when it is one's
		// size: carve counts on a free block's.)
		if len(ew.free) < keep && cap(b) == blockSize {
			ew.free = append(ew.free, b[:0])
		}
	}
	clear(blocks)
	ew.taken = blocks[:0]
}

// laterBytes bounds what trySend queues without waking the writer: a link
// whose reads rarely wait (a child's frames come from a reader goroutine
// that keeps ahead) would otherwise fill the whole queue before the editor
// got a byte, in one burst as large as the queue's bound.
const laterBytes = 64 << 10

// kick wakes the writer for what trySend queued without waking it.
func (ew *editorWriter) kick() {
	ew.mu.Lock()
	owed := ew.owed
	ew.owed = false
	ew.mu.Unlock()
	if owed {
		signal(ew.wake)
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
		wasEmpty := len(ew.queue) == 0 || ew.owed
		for sent < len(ms) {
			n := ms[sent].size()
			if ew.queued != 0 && ew.queued+n > ew.limit {
				break
			}
			ew.queue = append(ew.queue, ms[sent])
			ew.tailRun = false
			ew.queued += n
			sent++
		}
		woke := wasEmpty && len(ew.queue) > 0
		if woke {
			ew.owed = false
		}
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
// idle stream: queues or blocks a burst grew. ew.mu is held.
func (ew *editorWriter) burstKept() bool {
	return cap(ew.queue) > keptQueue || cap(ew.spare) > keptQueue || len(ew.free) > idleBlocks
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
	if len(ew.free) > idleBlocks {
		clear(ew.free[idleBlocks:])
		ew.free = ew.free[:idleBlocks]
	}
}

// empty reports whether nothing waits in the queue: the next messages up
// to the bound are taken without waiting.
func (ew *editorWriter) empty() bool {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	return ew.queued == 0
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
		ew.tailRun = false
		ew.queued = 0
		ew.owed = false // (what was owed is in the batch)
		blocks := ew.takeBlocks()
		ew.mu.Unlock()
		signal(ew.room)
		for i := range batch {
			if err := writeMsg(bw, ew.w, batch[i]); err != nil {
				ew.err = err
				return
			}
			n := batch[i].size()
			batch[i] = editorMsg{} // let a large message go as soon as it is written
			reclaim.Release(n)
		}
		ew.mu.Lock()
		ew.spare = batch[:0]
		ew.returnBlocks(blocks) // (bw holds its own copy of what it has not written yet)
		ew.mu.Unlock()
	}
}

// writeMsg writes m through bw. A run of copied updates that fills half a
// block or more goes to w as it lies in its block, after what bw holds:
// copying a stream into bw only to write it out again cost 7-11% of the
// bridge's CPU per update (paired runs of the built binary, both
// transports). Blocks of 64 KiB, to write as much per call as bw did,
// measured no better.
func writeMsg(bw *bufio.Writer, w io.Writer, m editorMsg) error {
	if m.raw {
		if len(m.body) < directRun {
			_, err := bw.Write(m.body)
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		_, err := w.Write(m.body)
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

// spaceLineBreaks turns every CR and LF of b into a space, as oneLine does
// in a copy.
func spaceLineBreaks(b []byte) {
	for i, ch := range b {
		if ch == '\n' || ch == '\r' {
			b[i] = ' '
		}
	}
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
	// inline, when not nil, handles a line in place and reports whether it
	// did (inline.go); lines counted in flight are handed over instead.
	inline   func([]byte) bool
	inflight *atomic.Int32
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
		if l.err == nil && er.inline != nil && er.inline(l.frame) {
			continue
		}
		if l.err == nil && er.inflight != nil {
			er.inflight.Add(1)
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
