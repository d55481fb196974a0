// Package ndjson reads newline-delimited frames (one JSON-RPC message per
// line, as ACP's stdio transport and most legacy agents frame them) with a
// per-frame size limit that survives bad input: a line over the limit is
// discarded up to its newline and reported as a *TooLongError, and the next
// call to Next reads the line after it. Reading is linear in the input size.
//
// It deliberately does not use bufio.Scanner, whose documentation says a
// token that is too large stops scanning for good: the failure behind
// acp-go-sdk's 10 MiB cap and tbxark/mcp-proxy #46.
package ndjson

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/acp-bridge/acp-bridge/internal/wire/reclaim"
	"github.com/acp-bridge/acp-bridge/internal/wire/slab"
)

// DefaultMax is the frame limit used when NewReader is given max <= 0.
const DefaultMax = 64 << 20

// TooLongError reports a line longer than the reader's limit. Its bytes have
// been discarded; the reader is positioned at the start of the next line.
type TooLongError struct {
	Max int // the limit in bytes
	// Tail is the last bytes of the discarded line (at most 256, without
	// its terminator), where an "id" that follows the payload would be.
	Tail []byte
	// Head is the first bytes of the discarded line (at most 256), so that a
	// caller can still find an "id" to answer.
	Head []byte
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("ndjson: line longer than the %d-byte limit", e.Max)
}

// Reader reads frames from an io.Reader. It is not safe for concurrent use.
type Reader struct {
	br  *bufio.Reader
	max int
	// pieces indexes the read-buffer-sized pieces of a long line. It is
	// made once, for lines up to indexedBytes, so that a line of many
	// megabytes costs its pieces and its joined copy and nothing else:
	// grown per line, the index alone left as much garbage again.
	pieces []reclaim.Piece
	slab   slab.Slab // where short lines are copied to
}

// bufSize is the read buffer, and the size of a long line's pieces.
const bufSize = reclaim.PieceSize

// indexedBytes is the longest line whose pieces the Reader's own index
// holds (8 KiB of pointers); a longer one grows a copy of it.
const indexedBytes = 64 << 20

// NewReader returns a Reader whose frames are at most max bytes, not counting
// the line terminator. max <= 0 means DefaultMax.
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMax
	}
	return &Reader{br: bufio.NewReaderSize(r, bufSize), max: max, pieces: make([]reclaim.Piece, 0, min(max, indexedBytes)/bufSize+1)}
}

// Next returns the next non-blank line without its "\n" or "\r\n", in a new
// slice owned by the caller. Blank lines (empty or white space only) are
// skipped. At the end of input it returns io.EOF; a final line without a
// newline is still returned first. A line over the limit yields a
// *TooLongError and the reader stays usable.
func (r *Reader) Next() ([]byte, error) {
	for {
		line, err := r.readLine()
		if err != nil {
			return nil, err
		}
		if len(line) > 0 && line[0] > ' ' && line[0] < 0x80 || len(bytes.TrimSpace(line)) != 0 {
			return line, nil // (a line that starts visibly is not blank: no trim)
		}
	}
}

// Buffered returns how many bytes of input are read and not yet returned:
// with none, the next call to Next reads from the underlying reader.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// readLine returns one line, without its terminator, in a slice of its own.
// A line that fits the read buffer (the usual case) is copied
// once; a longer one is gathered in pieces and joined once (with spare
// capacity, see spare), so that reading
// a 60 MiB line allocates twice its size, not the five times that
// growing one slice would, and nothing of it is kept afterwards. Its last
// piece is joined straight from the read buffer. The per-frame budget
// restarts at every line.
func (r *Reader) readLine() ([]byte, error) {
	pieces := r.pieces[:0]
	defer func() {
		for _, p := range pieces {
			p.Free()
		}
		clear(pieces)
		if cap(pieces) == cap(r.pieces) {
			r.pieces = pieces[:0]
		}
	}()
	n := 0
	var head, tail, last []byte
	tooLong := false
	for {
		chunk, err := r.br.ReadSlice('\n')
		if tooLong {
			tail = keepTail(tail, chunk)
		} else {
			switch {
			case n+len(chunk) > r.max+2: // +2: the terminator is not part of the frame
				tooLong = true
				if len(pieces) > 0 {
					head = headOf(pieces[0].B[:])
					tail = keepTail(keepTail(nil, pieces[len(pieces)-1].B[:]), chunk)
				} else {
					head = headOf(chunk)
					tail = keepTail(nil, chunk)
				}
				for _, p := range pieces {
					p.Free()
				}
				clear(pieces)
				pieces = pieces[:0]
			case err == nil && len(pieces) == 0:
				// The whole line in one slice of the read buffer.
				line := trimEOL(chunk)
				if len(line) > r.max {
					return nil, &TooLongError{Max: r.max, Head: headOf(line), Tail: keepTail(nil, line)}
				}
				return r.slab.Copy(line), nil
			case errors.Is(err, bufio.ErrBufferFull):
				// bufio hands out its whole buffer with ErrBufferFull:
				// a piece of exactly bufSize bytes.
				p := reclaim.NewPiece()
				copy(p.B[:], chunk)
				pieces = append(pieces, p)
				n += len(chunk)
			default:
				// The line's end (or the input's): still in the read
				// buffer, joined from there.
				last = chunk
				n += len(chunk)
			}
		}
		switch {
		case err == nil || errors.Is(err, io.EOF) && (tooLong || n > 0):
			if tooLong {
				return nil, &TooLongError{Max: r.max, Head: head, Tail: trimEOL(tail)}
			}
			line := trimEOL(join(pieces, last, n))
			reclaim.Collect(n) // the pieces, before the line is passed on
			if len(line) > r.max {
				return nil, &TooLongError{Max: r.max, Head: headOf(line), Tail: keepTail(nil, line)}
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

// spare is the capacity a joined line has beyond its bytes: room for a
// relay to write a longer JSON-RPC id (up to 20 digits) into the line in
// place rather than copy a line of many megabytes.
const spare = 20

// join concatenates pieces and last, n bytes in all, into one slice of that
// length, letting the pieces go as they are copied (see reclaim.Join).
func join(pieces []reclaim.Piece, last []byte, n int) []byte {
	reclaim.Now(n) // earlier garbage, before the line's slice adds to the heap
	out := reclaim.Join(make([]byte, 0, n+spare), pieces, reclaim.PieceSize)
	return append(out, last...)
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// keepTail returns the last 256 bytes of tail followed by b, in a slice of
// its own.
func keepTail(tail, b []byte) []byte {
	if len(b) >= 256 {
		return append(tail[:0], b[len(b)-256:]...)
	}
	tail = append(tail, b...)
	if len(tail) > 256 {
		tail = append(tail[:0], tail[len(tail)-256:]...)
	}
	return tail
}

func headOf(b []byte) []byte {
	if len(b) > 256 {
		b = b[:256]
	}
	return append([]byte(nil), b...)
}
