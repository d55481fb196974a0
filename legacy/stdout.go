package legacy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// The child's stdout is read by a pump, a goroutine that reads the pipe a
// system call at a time into a few buffers, and handed to Read a buffer
// (a chunk) at a time; Read cuts the chunks into lines itself, in place
// (lineSplitter). The pump reads ahead of Read while Read handles what it
// has, and Read meets it once per chunk, not per line: a stream of updates
// costs no copy, no lock and no hand-off per line. An earlier design had
// the reader cut and copy every line and queue it: through a child, that
// spent more CPU per update than the whole naive relay.
//
// Read waits for chunks in a select, so cancelling its ctx and Close end
// the wait at once, and the child's exit once exitNoticeWait passes
// without output; what was read stays: a Process stays usable after a
// cancelled Read.
const (
	// pumpBuffers bounds how far the pump reads ahead of Read; each buffer
	// holds one system call's read, up to pumpBufferSize (a pipe's
	// default capacity).
	pumpBuffers    = 4
	pumpBufferSize = 64 << 10
)

// chunk is what one read of the pipe returned.
type chunk struct {
	b   []byte
	err error
}

// pumpStdout reads the child's stdout into chunks for Read until it ends
// or Close.
func (p *Process) pumpStdout() {
	defer close(p.stdoutDone)
	made := 0
	for {
		var buf []byte
		select {
		case buf = <-p.free:
		default:
			if made < pumpBuffers {
				buf = make([]byte, pumpBufferSize)
				made++
				break
			}
			select {
			case buf = <-p.free:
			case <-p.closed:
				return
			}
		}
		n, err := p.stdout.Read(buf[:cap(buf)])
		if n == 0 && err == nil {
			p.free <- buf[:0] // (free has room for every buffer)
			continue
		}
		select {
		case p.chunks <- chunk{buf[:n], err}:
		case <-p.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

// stdoutLines is Read's side of the child's stdout.
type stdoutLines struct {
	split lineSplitter
	cur   []byte // the chunk split now, given back to the pump when done
	end   error  // what ended the pump's reads, once its last chunk is split
	ended bool   // stdout has ended for Read: afterStdout decides the error
	noise int    // non-JSON lines since the last frame

	noiseLimit int
	onNoise    func([]byte)
}

// nextLine returns the next JSON line of the child's stdout, and whether
// it is borrowed: a line that lies in a chunk or the splitter's buffer is
// valid until the next call (Read copies it out, into p.own); one joined
// from pieces is the caller's already. It logs, counts and skips the rest: Gemini CLI 0.1.x prints "Data collection is disabled." on stdout
// before its first reply (docs/agent-protocols.md#acp-v0-framing), and an over-long
// line must not end the stream (line limits are the commonest silent
// failure of stdio relays).
func (p *Process) nextLine(ctx context.Context) ([]byte, bool, error) {
	o := &p.out
	for {
		if o.ended {
			if p.idle != nil {
				p.idle() // afterStdout may wait for the child's exit
			}
			return nil, false, p.afterStdout(ctx)
		}
		line, lent, r := o.split.next()
		if r == needChunk && o.end != nil {
			line, lent, r = o.split.end()
			if r == needChunk {
				if !errors.Is(o.end, io.EOF) && !errors.Is(o.end, os.ErrClosed) {
					p.stdoutErr = o.end
				}
				o.ended = true
				o.split.release()
				continue
			}
		}
		switch r {
		case needChunk:
			if err := p.nextChunk(ctx); err != nil {
				return nil, false, err
			}
			continue
		case gotTooLong:
			n := p.skipped.Add(1)
			p.log.Warn("skipping over-long line on agent stdout", "limit", o.split.max,
				"head", snippet(line, maxQuoted), "skipped", n)
			continue
		}
		if !isJSONFrame(line) {
			// (A line that opens and closes as a frame has nothing to
			// trim: spaces are neither brackets nor braces.)
			line = bytes.TrimSpace(line)
		}
		if !isJSONFrame(line) {
			line = append([]byte(nil), line...) // (in the chunk: whatever keeps it gets a copy)
			n := p.skipped.Add(1)
			p.log.Warn("skipping non-JSON line on agent stdout", "line", snippet(line, maxQuoted), "skipped", n)
			if o.onNoise != nil {
				o.onNoise(line)
			}
			if o.noise++; o.noiseLimit > 0 && o.noise >= o.noiseLimit {
				p.stdoutErr = fmt.Errorf("the agent wrote %d lines in a row that are not JSON-RPC (the last: %q), so it is treated as broken: ACP reserves stdout for JSON-RPC messages; make the agent log to stderr", o.noise, snippet(line, maxQuoted))
				o.ended = true
				o.split.release()
			}
			continue
		}
		o.noise = 0
		return line, lent, nil
	}
}

// nextChunk gives the chunk split so far back to the pump and feeds the
// splitter the next, waiting for it if need be: until ctx is done, Close,
// or, once the child has exited, until nothing has come for exitNoticeWait
// (a grandchild may hold stdout open forever).
func (p *Process) nextChunk(ctx context.Context) error {
	o := &p.out
	if o.cur != nil {
		p.free <- o.cur[:0] // (free has room for every buffer)
		o.cur = nil
	}
	var c chunk
	select {
	case c = <-p.chunks:
	default:
		if p.idle != nil {
			p.idle() // every line read so far was returned: Read may wait
		}
		var err error
		if c, err = p.waitChunk(ctx); err != nil {
			return err
		}
	}
	if c.err != nil {
		o.end = c.err
	}
	if len(c.b) > 0 {
		o.cur = c.b
		o.split.feed(c.b)
	} else if cap(c.b) > 0 {
		p.free <- c.b[:0]
	}
	return nil
}

// waitChunk waits for the pump's next chunk (see nextChunk).
func (p *Process) waitChunk(ctx context.Context) (chunk, error) {
	exited := p.exited
	var silence <-chan time.Time
	for {
		select {
		case c := <-p.chunks:
			return c, nil
		case <-exited:
			// Lines the child wrote just before it exited may still be
			// in the pipe: they keep coming until stdout ends, or until
			// none has come for a while.
			exited = nil
			t := time.NewTimer(exitNoticeWait)
			defer t.Stop()
			silence = t.C
		case <-silence:
			return chunk{}, p.setFinal(p.exitError())
		case <-p.closed:
			return chunk{}, closedError("agent process")
		case <-ctx.Done():
			return chunk{}, ctx.Err()
		}
	}
}
