package wire

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// MaxDepth is how deeply arrays and objects may nest in a message. Deeper
// input is refused with a parse error instead of being walked: a line of a
// few million "[" must not exhaust anything (encoding/json has the same
// limit).
const MaxDepth = 10000

// scanner checks one JSON text in a single pass, without recursion: an
// explicit stack of open containers replaces the call stack, so nesting
// costs one byte per level and is capped at MaxDepth. It checks UTF-8 as it
// goes. Nothing is copied or decoded.
type scanner struct {
	b []byte
	i int
	// The open containers, '{' or '[' each: the first 64 levels in small,
	// deeper ones in deep, so that the usual message allocates nothing.
	depth int
	small [64]byte
	deep  []byte
	err   string // why the text is invalid, once it is
}

func (s *scanner) push(c byte) {
	if s.depth < len(s.small) {
		s.small[s.depth] = c
	} else {
		s.deep = append(s.deep, c)
	}
	s.depth++
}

func (s *scanner) top() byte {
	if d := s.depth - 1; d < len(s.small) {
		return s.small[d]
	}
	return s.deep[s.depth-1-len(s.small)]
}

func (s *scanner) pop() {
	s.depth--
	if s.depth >= len(s.small) {
		s.deep = s.deep[:s.depth-len(s.small)]
	}
}

func (s *scanner) fail(why string) bool {
	if s.err == "" {
		s.err = why
	}
	return false
}

// The scanning functions below take the text and an index and return the
// index past what they read: the index stays in a register instead of going
// through the scanner on every byte. On a failure they return the index
// where it was found and why.

// skipWS returns the index of the first byte at or after i that is not JSON
// whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func (s *scanner) ws() { s.i = skipWS(s.b, s.i) }

// plain marks the bytes a string may hold without a closer look.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return
}()

// scanString scans the string whose opening quote is at b[i], reporting
// whether it held escapes.
func scanString(b []byte, i int) (end int, escaped bool, why string) {
	i++ // opening quote
	for {
		if i += plainPrefix(b[i:]); i >= len(b) {
			return i, escaped, "unterminated string"
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, ""
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, "unterminated string"
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, escaped, `bad \u escape`
				}
				i += 6
			default:
				return i, escaped, "bad escape"
			}
		case c < 0x20:
			return i, escaped, "control character in a string"
		default: // multi-byte UTF-8
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, escaped, "not valid UTF-8"
			}
			i += size
		}
	}
}

// plainPrefixSWAR is plainPrefix eight bytes at a time in a register,
// jumping straight to the first byte that needs a closer look.
func plainPrefixSWAR(b []byte) int {
	i := 0
	for i+16 <= len(b) {
		w := b[i : i+16 : i+16]
		m0 := special8(binary.LittleEndian.Uint64(w[:8]))
		m1 := special8(binary.LittleEndian.Uint64(w[8:]))
		switch {
		case m0 != 0:
			return i + bits.TrailingZeros64(m0)>>3
		case m1 != 0:
			return i + 8 + bits.TrailingZeros64(m1)>>3
		}
		i += 16
	}
	if i+8 <= len(b) {
		if m := special8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(b) && plain[b[i]] {
		i++
	}
	return i
}

// special8 flags, in the high bit of each byte, the bytes of w that are a
// quote, a backslash, a control character or non-ASCII (the classic SWAR
// tests for "has a byte equal to" and "has a byte less than"). A flag can
// be wrong only above a true one (a borrow carries upward), so the lowest
// flag, which is all scanString reads, is exact.
func special8(w uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	quote := w ^ (lo * '"')
	slash := w ^ (lo * '\\')
	return ((quote-lo)&^quote | (slash-lo)&^slash | (w - lo*0x20) | w) & hi
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber scans the number starting at b[i]; ok is false (and end is i)
// when it is not one.
func scanNumber(b []byte, i int) (end int, ok bool) {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return start, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return start, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return start, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, true
}

// hasLiteral reports whether lit is written at b[i].
func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// scanKey scans `"name" :` inside an object, from b[i]; the name's quotes
// are b[start] and b[end-1].
func scanKey(b []byte, i int) (start, end, next int, escaped bool, why string) {
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '"' {
		return 0, 0, i, false, "expected a member name"
	}
	start = i
	end, escaped, why = scanString(b, i)
	if why != "" {
		return 0, 0, end, false, why
	}
	i = skipWS(b, end)
	if i >= len(b) || b[i] != ':' {
		return 0, 0, i, false, "expected ':'"
	}
	return start, end, i + 1, escaped, ""
}

// key scans `"name" :` inside an object.
func (s *scanner) key() (start, end int, escaped, ok bool) {
	start, end, next, escaped, why := scanKey(s.b, s.i)
	s.i = next
	if why != "" {
		return 0, 0, false, s.fail(why)
	}
	return start, end, escaped, true
}

// value scans one value and everything nested in it, iteratively. It
// returns with s.i just past the value (or where it failed).
func (s *scanner) value() bool {
	b, i := s.b, s.i
	base := s.depth
	var why string
	for {
		i = skipWS(b, i)
		if i >= len(b) {
			s.i = i
			return s.fail("unexpected end")
		}
		switch c := b[i]; c {
		case '{', '[':
			if s.depth >= MaxDepth {
				s.i = i
				return s.fail("too deep")
			}
			s.push(c)
			i = skipWS(b, i+1)
			if i < len(b) && (b[i] == '}' && c == '{' || b[i] == ']' && c == '[') {
				s.pop()
				i++
				break
			}
			if c == '{' {
				if _, _, i, _, why = scanKey(b, i); why != "" {
					s.i = i
					return s.fail(why)
				}
			}
			continue
		case '"':
			if i, _, why = scanString(b, i); why != "" {
				s.i = i
				return s.fail(why)
			}
		case 't', 'f', 'n':
			lit := "null"
			if c == 't' {
				lit = "true"
			} else if c == 'f' {
				lit = "false"
			}
			if !hasLiteral(b, i, lit) {
				s.i = i
				return s.fail("unexpected character")
			}
			i += len(lit)
		default:
			if c != '-' && !isDigit(c) {
				s.i = i
				return s.fail("unexpected character")
			}
			var ok bool
			if i, ok = scanNumber(b, i); !ok {
				s.i = i
				return s.fail("bad number")
			}
		}
		// After a value: close containers, or move on to the next member.
		for {
			if s.depth == base {
				s.i = i
				return true
			}
			i = skipWS(b, i)
			if i >= len(b) {
				s.i = i
				return s.fail("unexpected end")
			}
			top, c := s.top(), b[i]
			if c == ',' {
				i++
				if top == '{' {
					if _, _, i, _, why = scanKey(b, i); why != "" {
						s.i = i
						return s.fail(why)
					}
				}
				break
			}
			if c == '}' && top == '{' || c == ']' && top == '[' {
				s.pop()
				i++
				continue
			}
			s.i = i
			return s.fail("expected ',' or a closing bracket")
		}
	}
}

// parseError turns a scan failure into the -32700 the editor gets.
func (s *scanner) parseError() *Error {
	switch {
	case s.err == "too deep":
		return Errorf(CodeParseError, "message is nested deeper than %d levels", MaxDepth)
	case s.err == "not valid UTF-8" || !utf8.Valid(s.b):
		return Errorf(CodeParseError, "message is not valid UTF-8")
	}
	return Errorf(CodeParseError, "message is not valid JSON (%s at byte %d)", s.err, s.i)
}

// Valid returns nil when b is exactly one JSON value in valid UTF-8, nested
// at most MaxDepth deep, and otherwise an *Error (code -32700) saying what is
// wrong. It is iterative and does not allocate for the usual depths.
func Valid(b []byte) error {
	if err := valid(b); err != nil {
		return err
	}
	return nil
}

func valid(b []byte) *Error {
	s := scanner{b: b}
	s.ws()
	if !s.value() {
		return s.parseError()
	}
	s.ws()
	if s.i != len(b) {
		s.fail("data after the value")
		return s.parseError()
	}
	return nil
}
