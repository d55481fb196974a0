package legacy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// sseReader reads the data of the events of a Server-Sent Events stream
// (HTML Living Standard §9.2.6, "text/event-stream"): lines end in CRLF, LF
// or a lone CR; a blank line ends an event; "data:" lines (one space after
// the colon dropped) make its data, joined by "\n"; comment lines (":",
// the keep-alives) and the other fields (event, id, retry) are skipped. An
// event without data is no event. Like the ACP SDK's reader, and unlike
// the standard, the last event is kept when the stream ends without its
// blank line.
type sseReader struct {
	br      *bufio.Reader
	max     int // the longest event data, and line
	data    []byte
	hasData bool
	started bool
	afterCR bool
	line    []byte
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// keepBuffer is the largest buffer an sseReader keeps between events.
const keepBuffer = 1 << 20

// errSSETooLong is wrapped by the error Next returns for an event whose
// data, or a line, is longer than the limit.
var errSSETooLong = errors.New("event stream message too long")

// Next returns the data of the next event, in a slice valid until the next
// call, or io.EOF at the end of the stream.
func (s *sseReader) Next() ([]byte, error) {
	for {
		line, err := s.readLine()
		if err == io.EOF && len(line) == 0 {
			if s.hasData {
				s.hasData = false
				return s.data, nil
			}
			return nil, io.EOF
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if !s.started {
			s.started = true
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if len(line) == 0 {
			if s.hasData {
				s.hasData = false
				return s.data, nil
			}
			continue
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if len(name) == 0 || string(name) != "data" {
			continue // a comment, or a field ACP does not use
		}
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if !s.hasData {
			s.data = s.data[:0]
			if cap(s.data) > keepBuffer {
				s.data = nil // one huge message does not pin its buffer
			}
			s.hasData = true
		} else {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > s.max {
			return nil, fmt.Errorf("%w: over %d bytes", errSSETooLong, s.max)
		}
		s.data = append(s.data, value...)
	}
}

// readLine returns the next line without its end, in a slice valid until
// the next call; at the end of the stream, the last unterminated line
// (maybe empty) and io.EOF.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	if cap(s.line) > keepBuffer {
		s.line = nil
	}
	if s.afterCR {
		// The LF of a CRLF. Looked for only now, so that an event that
		// ends in a lone CR is not held until the next byte arrives.
		s.afterCR = false
		if b, err := s.br.Peek(1); err == nil && b[0] == '\n' {
			_, _ = s.br.Discard(1)
		}
	}
	for {
		// The bytes already buffered, up to the end of the line when it
		// is among them.
		buf, err := s.br.Peek(max(s.br.Buffered(), 1))
		if len(buf) == 0 {
			return s.line, err
		}
		if i := bytes.IndexAny(buf, "\r\n"); i >= 0 {
			s.line = append(s.line, buf[:i]...)
			s.afterCR = buf[i] == '\r'
			_, _ = s.br.Discard(i + 1)
			return s.line, s.tooLong()
		}
		s.line = append(s.line, buf...)
		_, _ = s.br.Discard(len(buf))
		if err := s.tooLong(); err != nil {
			return nil, err
		}
	}
}

func (s *sseReader) tooLong() error {
	if len(s.line) > s.max+16 {
		return fmt.Errorf("%w: a line over %d bytes", errSSETooLong, s.max)
	}
	return nil
}
