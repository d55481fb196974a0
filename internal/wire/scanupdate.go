// The short way for the usual message: a session/update notification
// as every ACP SDK writes it, recognised by its opening, with its
// session id, kind and text read without scanning the rest twice.

package wire

import (
	"encoding/json"
	"unsafe"
)

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
