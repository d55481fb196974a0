package launch

import (
	"bytes"
	"io"
	"strings"
)

// A StreamScrubber copies a byte stream to a writer with every secret value
// replaced by "<redacted>", wherever the stream's writes happen to split it:
// it holds back the end of each write for as long as that end could be the
// start of a secret. Unlike Scrubber.Writer, which relies on a logger
// writing whole lines, it serves output nobody framed: a Go panic's message
// and stacks, a runtime fatal error, a child's stderr.
//
// Only a tail that is a proper prefix of a secret is held back, so output
// ending in a newline (a secret holds none) is passed on at once.
type StreamScrubber struct {
	w       io.Writer
	secrets []string // longest first
	r       *strings.Replacer
	held    []byte
}

// NewStreamScrubber returns a StreamScrubber writing to w. Values are chosen
// as NewScrubber chooses them; with none worth scrubbing it copies as is.
func NewStreamScrubber(w io.Writer, values ...string) *StreamScrubber {
	s := &StreamScrubber{w: w, secrets: secretValues(values)}
	if len(s.secrets) > 0 {
		pairs := make([]string, 0, 2*len(s.secrets))
		for _, v := range s.secrets {
			pairs = append(pairs, v, redactedMark)
		}
		s.r = strings.NewReplacer(pairs...)
	}
	return s
}

// Write scrubs and writes what of p (after what was held back) can no longer
// be part of a secret, and holds back the rest. It reports len(p) written
// unless w fails.
func (s *StreamScrubber) Write(p []byte) (int, error) {
	if s.r == nil {
		return s.w.Write(p)
	}
	data := append(s.held, p...)
	cut := s.cut(data)
	if err := s.emit(data[:cut]); err != nil {
		s.held = s.held[:0]
		return 0, err
	}
	// Keep the held bytes at the start of the buffer for the next write.
	s.held = append(data[:0], data[cut:]...)
	return len(p), nil
}

// Flush writes what is held back: the stream has ended, so it is not a
// secret's start after all.
func (s *StreamScrubber) Flush() error {
	if len(s.held) == 0 {
		return nil
	}
	err := s.emit(s.held)
	s.held = s.held[:0]
	return err
}

func (s *StreamScrubber) emit(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := s.r.WriteString(s.w, string(b))
	return err
}

// cut returns how much of data can be scrubbed and written now: all but
// the longest end that is a proper prefix of a secret (bytes a later write
// may complete into one), and never through the middle of a whole secret,
// which must be replaced in one piece.
func (s *StreamScrubber) cut(data []byte) int {
	k := 0
	for _, secret := range s.secrets {
		for j := min(len(secret)-1, len(data)); j > k; j-- {
			if bytes.HasSuffix(data, []byte(secret[:j])) {
				k = j
				break
			}
		}
	}
	cut := len(data) - k
	for moved := true; moved; {
		moved = false
		for _, secret := range s.secrets {
			// An occurrence that starts before cut and ends after it.
			from := max(0, cut-len(secret)+1)
			if i := bytes.Index(data[from:min(len(data), cut+len(secret)-1)], []byte(secret)); i >= 0 && from+i < cut {
				cut, moved = from+i, true
			}
		}
	}
	return cut
}
