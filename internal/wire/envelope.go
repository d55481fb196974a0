// The envelope scan: the message's own members (jsonrpc, id, method,
// params, result, error) found in one pass of the whole message, and the
// hot path's method names interned.

package wire

import (
	"encoding/json"
)

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
