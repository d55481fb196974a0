package wire

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strings"
	"unicode/utf8"
	"unsafe"
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

// member names a message's own members; otherMember is any other name.
type member uint8

const (
	otherMember member = iota
	memberJSONRPC
	memberID
	memberMethod
	memberParams
	memberResult
	memberError
)

// memberNames are the names of a message's own members. Each starts with a
// letter of its own, which memberByInitial maps back to it, and
// memberLiterals holds each as the SDKs write it before its value.
var memberNames = [...]string{memberJSONRPC: "jsonrpc", memberID: "id", memberMethod: "method",
	memberParams: "params", memberResult: "result", memberError: "error"}

var memberLiterals, memberByInitial = func() (lits [len(memberNames)]string, by [256]member) {
	for m, name := range memberNames {
		if name != "" {
			lits[m], by[name[0]] = `"`+name+`":`, member(m)
		}
	}
	return
}()

func memberOf(name string) member {
	if name != "" {
		if m := memberByInitial[name[0]]; m != otherMember && memberNames[m] == name {
			return m
		}
	}
	return otherMember
}

// envelopeKey is key for a message's own members, saying which member the
// name is (decoded when escaped). The names a message is made of, written
// as every SDK writes them (no space before the colon), are matched as
// literals, which skips scanning each as a string and comparing it by
// name. Anything else is read by key.
func (s *scanner) envelopeKey() (m member, escaped, ok bool) {
	b, i := s.b, s.i
	if i+1 < len(b) && b[i] == '"' {
		if m := memberByInitial[b[i+1]]; m != otherMember && hasLiteral(b, i, memberLiterals[m]) {
			s.i = i + len(memberLiterals[m])
			return m, false, true
		}
	}
	ks, ke, escaped, ok := s.key()
	if !ok {
		return otherMember, false, false
	}
	if escaped {
		var n string
		_ = json.Unmarshal(b[ks:ke], &n)
		return memberOf(n), true, true
	}
	return memberOf(string(b[ks+1 : ke-1])), false, true
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

// knownMethod interns the method names of the hot path, so that reading
// them from a message does not allocate. A switch, not a map: it compares
// a few lengths and bytes where a map would hash the whole name.
func knownMethod(name []byte) (string, bool) {
	switch string(name) {
	case "session/update":
		return "session/update", true
	case "session/prompt":
		return "session/prompt", true
	case "session/request_permission":
		return "session/request_permission", true
	case "session/cancel":
		return "session/cancel", true
	case "fs/read_text_file":
		return "fs/read_text_file", true
	case "fs/write_text_file":
		return "fs/write_text_file", true
	case "terminal/output":
		return "terminal/output", true
	case "$/cancel_request":
		return "$/cancel_request", true
	}
	return "", false
}

// scanEnvelope is ParseEnvelope's single pass: it checks the whole message
// and records the top-level members as sub-slices of frame. It reads any
// message; scanUpdate is the short way for the usual one.
func scanEnvelope(frame []byte) (Envelope, *Error) {
	env := Envelope{Frame: frame}
	s := scanner{b: frame}
	s.ws()
	if s.i >= len(frame) {
		return env, Errorf(CodeParseError, "message is empty")
	}
	switch frame[s.i] {
	case '{':
	case '[':
		if !s.value() {
			return env, s.parseError()
		}
		if s.ws(); s.i != len(frame) {
			s.fail("data after the value")
			return env, s.parseError()
		}
		return env, Errorf(CodeInvalidRequest, "JSON-RPC batches are not supported by ACP v1")
	default:
		if err := valid(frame); err != nil {
			return env, err
		}
		return env, Errorf(CodeInvalidRequest, "a JSON-RPC message must be an object")
	}
	s.push('{')
	s.i++
	var bad string
	s.ws()
	if s.i < len(frame) && frame[s.i] == '}' {
		s.i++
	} else {
		for {
			m, escaped, ok := s.envelopeKey()
			if !ok {
				return env, s.parseError()
			}
			s.ws()
			vs := s.i
			if vs >= len(frame) {
				s.fail("unexpected end")
				return env, s.parseError()
			}
			first := frame[vs]
			plain2 := first == '"' && hasLiteral(frame, vs, `"2.0"`)
			switch {
			case first == '{' && !escaped && m == memberParams:
				ok = s.params(&env, true)
			case plain2:
				s.i = vs + len(`"2.0"`) // a whole string, what the scan would read
			default:
				ok = s.value()
			}
			if !ok {
				return env, s.parseError()
			}
			raw := json.RawMessage(frame[vs:s.i:s.i])
			switch m {
			case memberJSONRPC:
				switch {
				case first != '"':
					bad = `"jsonrpc" must be the string "2.0"`
				case plain2:
					env.Version = "2.0" // no allocation for the usual value
				default:
					env.Version = stringValue(raw)
				}
			case memberID:
				if first == '"' || first == '-' || isDigit(first) || first == 'n' {
					env.ID = raw
					env.IDAt = vs
				} else {
					bad = `"id" must be a string, a number or null`
				}
			case memberMethod:
				if first != '"' || len(raw) == 2 {
					bad = `"method" must be a non-empty string`
				} else if m, ok := knownMethod(raw[1 : len(raw)-1]); ok {
					env.Method = m
				} else {
					env.Method = stringValue(raw)
				}
			case memberParams:
				if first != '{' && first != '[' {
					bad = `"params" must be an object or an array`
				}
				env.Params = raw
			case memberResult:
				env.Result = raw
			case memberError:
				if first != '{' {
					bad = `"error" must be an object`
				}
				env.Error = raw
			}
			s.ws()
			if s.i >= len(frame) {
				s.fail("unexpected end")
				return env, s.parseError()
			}
			if frame[s.i] == ',' {
				s.i++
				continue
			}
			if frame[s.i] == '}' {
				s.i++
				break
			}
			s.fail("expected ',' or '}'")
			return env, s.parseError()
		}
	}
	if s.ws(); s.i != len(frame) {
		s.fail("data after the value")
		return env, s.parseError()
	}
	switch {
	case bad != "":
		return env, Errorf(CodeInvalidRequest, "%s", bad)
	case env.Method != "":
		if env.Result != nil || env.Error != nil {
			return env, Errorf(CodeInvalidRequest, "a request must not carry a result or an error")
		}
		return env, nil
	case env.ID == nil:
		return env, Errorf(CodeInvalidRequest, `the message has neither "method" nor "id"`)
	case (env.Result == nil) == (env.Error == nil):
		return env, Errorf(CodeInvalidRequest, `a response must carry exactly one of "result" and "error"`)
	}
	return env, nil
}

// The opening of a session/update notification as every ACP SDK writes it,
// up to the sessionId's opening quote, and what comes between that string
// and the update's kind.
const (
	updateOpening = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"`
	updateMiddle  = `,"update":{"sessionUpdate":"`
	// textContent follows the kind of a chunk of text, up to the
	// text's opening quote.
	textContent = `,"content":{"type":"text","text":"`
)

// textChunks are the kinds of update whose text chunks scanUpdate reads as
// one literal up to the text's opening quote.
var textChunks = [...]struct{ kind, opening string }{
	{"agent_message_chunk", `agent_message_chunk"` + textContent},
	{"agent_thought_chunk", `agent_thought_chunk"` + textContent},
}

// scanUpdate is scanEnvelope's fast path for the message a stream is made
// of: a session/update written in the compact form of the SDKs, its first
// members in the usual order. It compares that opening as a whole instead of
// member by member, then checks the rest as scanEnvelope would. ok is false
// for anything else, valid or not, and scanEnvelope then reads the message
// the long way: so is a message with members after the update object, where
// a second "id" or "sessionId" would change what the message is.
func scanUpdate(env *Envelope, frame []byte) (ok bool) {
	if len(frame) < len(updateOpening)+len(updateMiddle)+8 || string(frame[:len(updateOpening)]) != updateOpening {
		return false
	}
	sidAt := len(updateOpening) - 1
	sidEnd, escaped, why := scanString(frame, sidAt)
	if why != "" || escaped || !hasLiteral(frame, sidEnd, updateMiddle) {
		return false
	}
	kindAt := sidEnd + len(updateMiddle) - 1
	// Most of a stream is chunks of text from the agent: their kind and
	// the content's opening are one literal, compared as one rather than
	// the kind scanned as a string and then compared.
	if kindAt+1 < len(frame) && frame[kindAt+1] == 'a' {
		for i := range textChunks {
			c := &textChunks[i]
			if !hasLiteral(frame, kindAt+1, c.opening) {
				continue
			}
			if plainChunk(env, frame, sidEnd, kindAt+len(c.opening), c.kind) {
				return true
			}
			break
		}
	}
	kindEnd, escaped, why := scanString(frame, kindAt)
	if why != "" || escaped {
		return false
	}
	// Most of a stream is text chunks, whose rest is one more literal,
	// the text, and the closing braces: checked as that, it is valid and
	// means the same as when read member by member below.
	if hasLiteral(frame, kindEnd, textContent) &&
		plainChunk(env, frame, sidEnd, kindEnd+len(textContent)-1, unescaped(frame[kindAt+1:kindEnd-1])) {
		return true
	}
	// The rest of the update object, member by member; then it, params
	// and the message must close, and nothing may follow.
	s := scanner{b: frame, i: kindEnd}
	s.push('{') // the message
	s.push('{') // params
	s.push('{') // update
	paramsEnd := 0
	for s.depth > 0 {
		s.ws()
		if s.i >= len(frame) {
			return false
		}
		switch frame[s.i] {
		case '}':
			s.pop()
			s.i++
			if s.depth == 1 {
				paramsEnd = s.i
			}
		case ',':
			if s.depth != 3 {
				return false // a member after the update: the long way
			}
			s.i++
			ks, ke, escaped, ok := s.key()
			if !ok || escaped || string(frame[ks+1:ke-1]) == "sessionUpdate" {
				return false
			}
			if !s.value() {
				return false
			}
		default:
			return false
		}
	}
	if s.ws(); s.i != len(frame) {
		return false
	}
	*env = Envelope{
		Version:    "2.0",
		Frame:      frame,
		Method:     "session/update",
		Params:     json.RawMessage(frame[updateParamsAt:paramsEnd:paramsEnd]),
		SessionID:  shared(frame[sidAt+1 : sidEnd-1]),
		UpdateKind: unescaped(frame[kindAt+1 : kindEnd-1]),
	}
	return true
}

// plainChunk finishes scanUpdate for a text chunk whose text opens at
// textAt, the session id's closing quote being at sidEnd-1: when the text
// and the closing braces are all that remain, the message is valid and
// Plain, and env is written.
func plainChunk(env *Envelope, frame []byte, sidEnd, textAt int, kind string) bool {
	textEnd, _, why := scanString(frame, textAt)
	if why != "" || string(frame[textEnd:]) != "}}}}" {
		return false
	}
	// Field by field: the envelope is often on the heap, where a
	// composite literal is built aside and copied over with its write
	// barriers.
	env.Version = "2.0"
	env.Frame = frame
	env.IDAt = 0
	env.ID = nil
	env.Method = "session/update"
	env.Params = json.RawMessage(frame[updateParamsAt : len(frame)-1 : len(frame)-1])
	env.Result = nil
	env.Error = nil
	env.SessionID = shared(frame[len(updateOpening) : sidEnd-1])
	env.UpdateKind = kind
	env.Plain = true
	return true
}

// updateParamsAt is where the params of a message that opens with
// updateOpening start.
const updateParamsAt = len(`{"jsonrpc":"2.0","method":"session/update","params":`)

// shared is the inside of a string the scan found without escapes, as a
// string sharing its memory (a session id: never a known kind).
func shared(inner []byte) string {
	if len(inner) == 0 {
		return ""
	}
	return unsafe.String(&inner[0], len(inner))
}

// unescaped is plainString for the inside of a string the scan found
// without escapes, sharing its memory, interned when it is a known kind.
func unescaped(inner []byte) string {
	if k, ok := updateKind(inner); ok {
		return k
	}
	if len(inner) == 0 {
		return ""
	}
	return unsafe.String(&inner[0], len(inner))
}

// params scans the params object at s.i (top) or its "update" object
// (!top) member by member, noting params.sessionId and
// params.update.sessionUpdate in env. Names with escapes are compared as
// written: the members looked for are plain ASCII.
func (s *scanner) params(env *Envelope, top bool) bool {
	s.push('{')
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.pop()
		s.i++
		return true
	}
	for {
		ks, ke, _, ok := s.key()
		if !ok {
			return false
		}
		s.ws()
		vs := s.i
		k := s.b[ks+1 : ke-1]
		if top && vs < len(s.b) && s.b[vs] == '{' && string(k) == "update" {
			ok = s.params(env, false)
		} else {
			ok = s.value()
		}
		if !ok {
			return false
		}
		switch {
		case top && string(k) == "sessionId":
			env.SessionID = plainString(s.b[vs:s.i])
		case !top && string(k) == "sessionUpdate":
			env.UpdateKind = plainString(s.b[vs:s.i])
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("unexpected end")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.pop()
			s.i++
			return true
		default:
			return s.fail("expected ',' or '}'")
		}
	}
}

// plainString returns the text of a JSON string token without escapes, ""
// for anything else. The string shares v's memory (see Envelope): the
// frames it is read from are never modified.
func plainString(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	inner := v[1 : len(v)-1]
	for _, c := range inner {
		if c == '\\' {
			return ""
		}
	}
	if k, ok := updateKind(inner); ok {
		return k
	}
	if len(inner) == 0 {
		return ""
	}
	return unsafe.String(&inner[0], len(inner))
}

// updateKind interns the sessionUpdate variants (schema: SessionUpdate), as
// knownMethod does the methods.
func updateKind(kind []byte) (string, bool) {
	switch string(kind) {
	case "agent_message_chunk":
		return "agent_message_chunk", true
	case "agent_thought_chunk":
		return "agent_thought_chunk", true
	case "user_message_chunk":
		return "user_message_chunk", true
	case "tool_call":
		return "tool_call", true
	case "tool_call_update":
		return "tool_call_update", true
	case "plan":
		return "plan", true
	case "available_commands_update":
		return "available_commands_update", true
	case "current_mode_update":
		return "current_mode_update", true
	case "config_option_update":
		return "config_option_update", true
	case "session_info_update":
		return "session_info_update", true
	case "usage_update":
		return "usage_update", true
	}
	return "", false
}

// stringValue decodes a JSON string token.
func stringValue(raw []byte) string {
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c == '\\' {
			var s string
			_ = json.Unmarshal(raw, &s)
			return s
		}
	}
	return string(inner)
}

// Parser is ParseEnvelopeInto for one stream of messages. A stream is
// mostly chunks of text of one session and one kind, which differ only in
// their text: a Parser keeps the opening of the last one it read (up to
// the text's opening quote), and reads a message that opens the same way
// by comparing that opening as a whole and scanning the text alone. What
// it finds is what ParseEnvelopeInto finds. The zero Parser is ready to
// use; a Parser belongs to one goroutine.
type Parser struct {
	head   []byte // the last chunk's opening, through the text's quote
	sidEnd int    // where its session id's closing quote ends
	kind   string // its kind, not sharing the frame's memory
}

// maxHead bounds the opening a Parser keeps: a session id longer than a
// few hundred bytes is not worth remembering.
const maxHead = 512

// ParseInto is ParseEnvelopeInto(env, frame).
func (p *Parser) ParseInto(env *Envelope, frame []byte) *Error {
	if n := len(p.head); n > 0 && len(frame) > n && string(frame[:n]) == string(p.head) &&
		plainChunk(env, frame, p.sidEnd, n-1, p.kind) {
		return nil
	}
	err := ParseEnvelopeInto(env, frame)
	if err == nil && env.Plain {
		p.remember(env, frame)
	}
	return err
}

// remember keeps the opening of frame, a chunk of text read as Plain:
// updateOpening, the session id, updateMiddle, the kind, textContent.
func (p *Parser) remember(env *Envelope, frame []byte) {
	sidEnd := len(updateOpening) + len(env.SessionID) + 1
	n := sidEnd + len(updateMiddle) + len(env.UpdateKind) + 1 + len(textContent)
	if n > maxHead || n >= len(frame) || frame[n-1] != '"' {
		p.head = p.head[:0]
		return
	}
	if env.UpdateKind != p.kind {
		// The constant for a kind the protocol knows (whose callers then
		// compare pointers), a copy otherwise: it may share the frame's
		// memory.
		if k, ok := updateKind([]byte(env.UpdateKind)); ok {
			p.kind = k
		} else {
			p.kind = strings.Clone(env.UpdateKind)
		}
	}
	p.head, p.sidEnd = append(p.head[:0], frame[:n]...), sidEnd
}
