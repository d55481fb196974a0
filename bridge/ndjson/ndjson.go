// Package ndjson reads newline-delimited frames (one JSON-RPC message per
// line, as ACP's stdio transport and most legacy agents frame them) with a
// per-frame size limit that survives bad input: a line over the limit is
// discarded up to its newline and reported as a *TooLongError, and the next
// call to Next reads the line after it. Reading is linear in the input size.
//
// It deliberately does not use bufio.Scanner, whose documentation says a
// token that is too large stops scanning for good: the failure behind
// acp-go-sdk's 10 MiB cap and tbxark/mcp-proxy #46 (peers.md §c.6).
package ndjson

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMax is the frame limit used when NewReader is given max <= 0.
const DefaultMax = 64 << 20

// TooLongError reports a line longer than the reader's limit. Its bytes have
// been discarded; the reader is positioned at the start of the next line.
type TooLongError struct {
	Max int // the limit in bytes
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
	buf []byte
}

// NewReader returns a Reader whose frames are at most max bytes, not counting
// the line terminator. max <= 0 means DefaultMax.
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMax
	}
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// keepMax is the largest line buffer the reader keeps between lines: a
// longer line's buffer is handed to the caller instead of being copied, so a
// 60 MiB message neither costs a second copy nor pins 60 MiB after it.
const keepMax = 64 << 10

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
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if cap(r.buf) > keepMax {
			r.buf = nil
			return line[:len(line):len(line)], nil
		}
		out := make([]byte, len(line))
		copy(out, line)
		return out, nil
	}
}

// readLine returns one line in r.buf (reused across calls) without its
// terminator. The per-frame budget restarts at every line.
func (r *Reader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	var head []byte
	tooLong := false
	for {
		chunk, err := r.br.ReadSlice('\n')
		if !tooLong {
			if len(r.buf)+len(chunk) > r.max+2 { // +2: the terminator is not part of the frame
				tooLong = true
				head = append(append([]byte(nil), r.buf...), chunk...)
				if len(head) > 256 {
					head = head[:256]
				}
				r.buf = nil
			} else {
				r.buf = append(r.buf, chunk...)
			}
		}
		switch {
		case err == nil:
			if tooLong {
				return nil, &TooLongError{Max: r.max, Head: head}
			}
			line := trimEOL(r.buf)
			if len(line) > r.max {
				return nil, &TooLongError{Max: r.max, Head: headOf(line)}
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if tooLong {
				return nil, &TooLongError{Max: r.max, Head: head}
			}
			if len(r.buf) > 0 {
				line := trimEOL(r.buf)
				if len(line) > r.max {
					return nil, &TooLongError{Max: r.max, Head: headOf(line)}
				}
				return line, nil
			}
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

func headOf(b []byte) []byte {
	if len(b) > 256 {
		b = b[:256]
	}
	return append([]byte(nil), b...)
}
