package bridge

import (
	"bufio"
	"context"
	"errors"
	"io"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/ndjson"
)

// stdoutQueue is how many frames may wait for the editor before the engine
// blocks: backpressure, so that a slow editor slows the agents down instead
// of growing memory (ARCHITECTURE.md §4: never drop a slow peer).
const stdoutQueue = 256

// editorWriter owns the editor's output stream. Only its writeLoop writes to
// it, one message per line, so lines can never interleave (acp-spec.md §20.2).
type editorWriter struct {
	w      io.Writer
	frames chan []byte
	done   chan struct{} // closed when writeLoop has returned
	err    error         // set by writeLoop before done is closed
}

func newEditorWriter(w io.Writer) *editorWriter {
	return &editorWriter{w: w, frames: make(chan []byte, stdoutQueue), done: make(chan struct{})}
}

// send queues one frame (without its newline). It blocks while the queue is
// full, and returns false if the writer has failed (the editor is gone), or
// stop or giveUp is closed first (nil channels: never).
func (ew *editorWriter) send(frame []byte, stop, giveUp <-chan struct{}) bool {
	select {
	case ew.frames <- frame:
		return true
	case <-ew.done:
		return false
	case <-stop:
		return false
	case <-giveUp:
		return false
	}
}

// errEditorStalled means the editor stopped reading what the bridge wrote.
var errEditorStalled = errors.New("the editor stopped reading the bridge's output")

// close flushes what is queued and waits, at most wait, for writeLoop to
// finish: an editor that no longer reads must not keep the bridge alive.
func (ew *editorWriter) close(wait time.Duration) error {
	close(ew.frames)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ew.done:
		return ew.err
	case <-t.C:
		return errEditorStalled
	}
}

// writeLoop writes queued frames, flushing whenever the queue runs dry so
// that a burst of updates costs one write system call, not one each.
func (ew *editorWriter) writeLoop() {
	defer close(ew.done)
	bw := bufio.NewWriterSize(ew.w, 64<<10)
	for frame := range ew.frames {
		if _, err := bw.Write(frame); err != nil {
			ew.err = err
			return
		}
		if err := bw.WriteByte('\n'); err != nil {
			ew.err = err
			return
		}
		if len(ew.frames) == 0 {
			if err := bw.Flush(); err != nil {
				ew.err = err
				return
			}
		}
	}
	ew.err = bw.Flush()
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
}

// readLoop runs until the input ends or ctx is done. A read blocked in the
// editor's stream when ctx ends returns when that stream next yields.
func (er *editorReader) readLoop(ctx context.Context) {
	for {
		frame, err := er.r.Next()
		select {
		case er.lines <- editorLine{frame: frame, err: err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			if _, tooLong := err.(*ndjson.TooLongError); !tooLong {
				return
			}
		}
	}
}
