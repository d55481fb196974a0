package bridge

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
)

// link is one agent connection and its translator. The engine's loop owns
// every field but conn; the link's own goroutines (run, writeLoop) own conn.
type link struct {
	id    int
	spawn Spawn
	tr    translate.Translator
	out   frameQueue

	// calls maps the translator's outstanding Call refs to the editor-side
	// id key, so CancelCall can name the editor's id. Loop-owned.
	calls map[translate.Ref]string
	// down is why the link is gone (nil while it is usable). Loop-owned.
	down error

	cancel      context.CancelFunc // stops dialing and both goroutines
	writeClosed atomic.Bool        // writeLoop closed conn after a write error
	mu          sync.Mutex
	conn        Link // set once dialed; guarded by mu
	closed      bool // guarded by mu
}

func (l *link) String() string {
	if l.spawn.Session == "" {
		return fmt.Sprintf("link %d (control)", l.id)
	}
	return fmt.Sprintf("link %d (session %s)", l.id, l.spawn.Session)
}

// run dials the agent and pumps frames until the link fails or is closed.
// Frames read are handed to deliver; the final error to lost. Both run on
// this goroutine and must not block past ctx.
func (l *link) run(ctx context.Context, dial func(context.Context, Spawn) (Link, error), deliver func(*link, []byte) bool, lost func(*link, error)) {
	conn, err := dial(ctx, l.spawn)
	if err != nil {
		lost(l, fmt.Errorf("could not reach the agent: %w", err))
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

	writeErr := make(chan error, 1)
	readDone := make(chan struct{})
	go l.writeLoop(ctx, conn, writeErr, readDone)
	for {
		frame, err := conn.Read(ctx)
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
			lost(l, err)
			return
		}
		if !deliver(l, frame) {
			close(readDone)
			conn.Close()
			return
		}
	}
}

// writeFailGrace is how long a failed write waits for the read side to
// report why the agent went away. A child that exits mid-turn breaks the
// pipe of our next write; its exit status, which the reader gets, says far
// more than "broken pipe" (and arrives well within the one second in which
// every pending request must be answered).
const writeFailGrace = 500 * time.Millisecond

// writeLoop is the only writer of conn. After a write error it closes conn
// (ending run's read) unless the read side fails first on its own.
func (l *link) writeLoop(ctx context.Context, conn Link, writeErr chan<- error, readDone <-chan struct{}) {
	for {
		frame, ok := l.out.pop(ctx)
		if !ok {
			return
		}
		if err := conn.Write(ctx, frame); err != nil {
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
// off its loop at shutdown.
func (l *link) close() {
	l.mu.Lock()
	l.closed = true
	conn := l.conn
	l.mu.Unlock()
	l.cancel()
	l.out.shut()
	if conn != nil {
		conn.Close()
	}
}

// frameQueue is an unbounded FIFO of frames for one agent. It never blocks
// the engine's loop, so an agent that stops reading stalls only its own link,
// never another session (peers.md §c.15).
type frameQueue struct {
	mu     sync.Mutex
	items  [][]byte
	shutq  bool
	signal chan struct{} // capacity 1: "items may be non-empty"
}

func (q *frameQueue) init() { q.signal = make(chan struct{}, 1) }

func (q *frameQueue) push(frame []byte) {
	q.mu.Lock()
	if !q.shutq {
		q.items = append(q.items, frame)
	}
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *frameQueue) shut() {
	q.mu.Lock()
	q.shutq = true
	q.items = nil
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// pop returns the oldest frame, waiting for one; false once shut or ctx ends.
func (q *frameQueue) pop(ctx context.Context) ([]byte, bool) {
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
			q.mu.Unlock()
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
