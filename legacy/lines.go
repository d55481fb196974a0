package legacy

import (
	"bytes"

	"github.com/acp-bridge/acp-bridge/internal/wire/reclaim"
)

// lineSplitter cuts a child's stdout into lines where its reader read
// them: it is fed the stream a chunk at a time (a system call's worth) and
// returns each line that lies whole in a chunk in place, in the chunk's
// memory. Only a line that runs from one chunk into the next is copied:
// into a buffer of the splitter's own, used again for the next such line,
// or, once it is long, into pieces joined into memory of its own. So a
// stream of updates costs one pass over its bytes to find the newlines,
// and no copy, no allocation and no hand-off per line.
//
// It reads lines as ndjson.Reader does (FuzzLineSplitterAgreesWithNdjson):
// a "\n" or "\r\n" ends a line and is not part of it, blank lines are
// skipped, the last line may end at the end of the stream without a
// newline, and a line longer than max is skipped whole, reported by its
// head.
type lineSplitter struct {
	max  int    // the longest line returned
	rest []byte // what is left of the chunk fed last

	// A line begun in an earlier chunk: n bytes so far, in acc while
	// short, else in pieces (the last one filled up to fill).
	spanning bool
	n        int
	acc      []byte
	pieces   []reclaim.Piece
	fill     int
	// tooLong says the line begun is longer than max: its bytes are
	// skipped to its end; head holds its first bytes.
	tooLong bool
	head    []byte
}

const (
	// accMax is the longest line joined in the splitter's own buffer (and
	// lent from there); a longer one is gathered in pieces.
	accMax = 64 << 10
	// headLen is how much of an over-long line is kept to report it.
	headLen = 256
	// joinSpare is the room a joined line has beyond its bytes, as
	// ndjson.Reader leaves it: a relay may write a longer JSON-RPC id into
	// the line in place rather than copy many megabytes.
	joinSpare = 20
)

// splitResult is what next found.
type splitResult int

const (
	needChunk  splitResult = iota // nothing whole is left: feed the next chunk
	gotLine                       // a line
	gotTooLong                    // a line longer than max, skipped: its head
)

// feed gives the splitter the next chunk of the stream, which must stay
// as it is until next has returned needChunk, and, for a line returned
// in place, until the caller is done with the line.
func (s *lineSplitter) feed(chunk []byte) { s.rest = chunk }

// next returns the next line of what the splitter was fed. lent says the
// line lies in the chunk or in the splitter's buffer (the caller's until
// the splitter is fed or asked again); otherwise it is the caller's own.
// For gotTooLong, line is the skipped line's head.
func (s *lineSplitter) next() (line []byte, lent bool, r splitResult) {
	for len(s.rest) > 0 {
		i := bytes.IndexByte(s.rest, '\n')
		if i < 0 {
			s.hold(s.rest)
			s.rest = nil
			return nil, false, needChunk
		}
		seg := s.rest[:i+1]
		s.rest = s.rest[i+1:]
		if !s.spanning {
			line = trimEOL(seg)
			if len(line) > s.max {
				return headOf(line), false, gotTooLong
			}
			if len(line) == 0 || line[0] != '{' && blank(line) { // (a frame's line is never blank)
				continue
			}
			return line[:len(line):len(line)], true, gotLine
		}
		line, lent, r = s.finish(seg)
		if r == gotLine && blank(line) {
			continue
		}
		return line, lent, r
	}
	return nil, false, needChunk
}

// end returns what is left at the end of the stream: the last line, when
// it does not end with a newline, or nothing (needChunk).
func (s *lineSplitter) end() (line []byte, lent bool, r splitResult) {
	if !s.spanning {
		return nil, false, needChunk
	}
	line, lent, r = s.finish(nil)
	if r == gotLine && blank(line) {
		return nil, false, needChunk
	}
	return line, lent, r
}

// hold keeps b, the start or the continuation of a line that goes on in
// the next chunk.
func (s *lineSplitter) hold(b []byte) {
	if !s.spanning {
		s.spanning, s.n, s.acc = true, 0, s.acc[:0]
	}
	if s.tooLong {
		return
	}
	// (max+2: the newline and a carriage return are not the line's.)
	if s.n+len(b) > s.max+2 {
		s.skip(b)
		return
	}
	s.n += len(b)
	if s.pieces == nil && len(s.acc)+len(b) <= accMax {
		s.acc = append(s.acc, b...)
		return
	}
	if s.pieces == nil {
		s.pieces = []reclaim.Piece{}
		s.gather(s.acc)
		s.acc = s.acc[:0]
	}
	s.gather(b)
}

// gather copies b into the pieces.
func (s *lineSplitter) gather(b []byte) {
	for len(b) > 0 {
		if len(s.pieces) == 0 || s.fill == reclaim.PieceSize {
			s.pieces = append(s.pieces, reclaim.NewPiece())
			s.fill = 0
		}
		k := copy(s.pieces[len(s.pieces)-1].B[s.fill:], b)
		s.fill += k
		b = b[k:]
	}
}

// skip turns the line begun into one too long to return: its head is
// kept, the rest of it is dropped as it comes.
func (s *lineSplitter) skip(b []byte) {
	h := s.head[:0]
	if s.pieces != nil {
		for i, p := range s.pieces {
			k := reclaim.PieceSize
			if i == len(s.pieces)-1 {
				k = s.fill
			}
			h = append(h, p.B[:min(k, headLen-len(h))]...)
			if len(h) == headLen {
				break
			}
		}
	} else {
		h = append(h, s.acc[:min(len(s.acc), headLen)]...)
	}
	s.head = append(h, b[:min(len(b), headLen-len(h))]...)
	s.freePieces()
	s.acc = s.acc[:0]
	s.tooLong = true
}

// finish ends the line begun with last, its last bytes (with the
// newline, if any).
func (s *lineSplitter) finish(last []byte) (line []byte, lent bool, r splitResult) {
	s.spanning = false
	if !s.tooLong && s.n+len(last) > s.max+2 {
		s.skip(last)
	}
	if s.tooLong {
		s.tooLong = false
		return bytes.Clone(s.head), false, gotTooLong
	}
	if s.pieces == nil && len(s.acc)+len(last) <= accMax {
		s.acc = append(s.acc, last...)
		line, lent = trimEOL(s.acc), true
	} else {
		line = trimEOL(s.join(last))
	}
	if len(line) > s.max {
		return headOf(line), false, gotTooLong
	}
	return line[:len(line):len(line)], lent, gotLine
}

// join returns the pieces and last in one slice of their length, letting
// the pieces go as they are copied (as ndjson.Reader joins a long line;
// see reclaim.Join).
func (s *lineSplitter) join(last []byte) []byte {
	n := s.n + len(last)
	reclaim.Now(n) // earlier garbage, before the line adds to the heap
	out := make([]byte, 0, n+joinSpare)
	if s.pieces == nil {
		out = append(out, s.acc...)
	}
	out = reclaim.Join(out, s.pieces, s.fill)
	s.pieces, s.fill = nil, 0
	out = append(out, last...)
	reclaim.Collect(n) // the heap pieces, before the line is passed on
	return out
}

// freePieces gives back the pieces of a line dropped.
func (s *lineSplitter) freePieces() {
	for _, p := range s.pieces {
		p.Free()
	}
	s.pieces, s.fill = nil, 0
}

// release gives back what the splitter holds.
func (s *lineSplitter) release() {
	s.freePieces()
	s.acc, s.rest, s.spanning, s.tooLong = nil, nil, false, false
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// blank reports whether line has nothing but white space (what
// ndjson.Reader skips).
func blank(line []byte) bool {
	if len(line) > 0 && line[0] > ' ' && line[0] < 0x80 {
		return false // (a line that starts visibly is not blank)
	}
	return len(bytes.TrimSpace(line)) == 0
}

func headOf(b []byte) []byte {
	return bytes.Clone(b[:min(len(b), headLen)])
}
