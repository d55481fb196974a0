// The shim's repairs of the agent's answers to the editor's requests:
// ids and results, the errors of methods the agent does not know, and
// what a successful answer must hold.

package acp

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// response handles an agent's answer to an editor request.
func (s *Shim) response(f []byte, env *translate.Envelope, pre []translate.Out) ([]translate.Out, error) {
	n, perr := strconv.ParseUint(string(env.ID), 10, 64)
	ref, pending := s.r.toEditor[n]
	if perr != nil || !pending {
		if s.on[iMethodNotFound] && env.Error != nil && string(env.ID) == "null" {
			// An id-less error may answer the one unknown method in flight.
			if id, ok := s.soleUnknown(); ok {
				f = translate.ErrorFrame(translate.IntID(id), translate.ErrorObject(env.Error))
				e2, _ := translate.ParseEnvelope(f)
				return s.response(f, &e2, pre)
			}
		}
		if s.on[iNotificationResponses] {
			return append(pre, note(RuleNotificationResponses, "", "dropped a response to no request: %.120s", f)), nil
		}
		outs, err := s.r.fromAgent(f, env, nil)
		return take(pre, outs), err
	}
	method := s.methods[ref]
	delete(s.methods, ref)
	outs, err := s.r.fromAgent(f, env, nil)
	if err != nil || len(outs) != 1 {
		return take(pre, outs), err
	}
	o := outs[0]
	clear(outs) // the relay's reused slice: see take
	var post []translate.Out
	var sid string
	cancelled := false
	if p := s.prompts[ref]; p != nil {
		sid, cancelled = p.session, p.cancelled
		delete(s.prompts, ref)
	}
	if o.Kind == translate.Reply {
		var notes []translate.Out
		o.Body, notes = s.repairResult(method, sid, cancelled, o.Body)
		pre = append(pre, notes...)
	} else if o.Kind == translate.Fail && s.on[iMethodNotFound] && !knownMethod(method) {
		if code := gjson.GetBytes(o.Body, "code"); code.Int() != translate.CodeMethodNotFound && unknownTo(method, o.Body) {
			pre = append(pre, note(RuleMethodNotFound, "", "%s answered %s instead of -32601", method, code.Raw))
			e := translate.Errorf(translate.CodeMethodNotFound,
				"the agent does not implement %s (it answered %s: %s)", method, code.Raw, gjson.GetBytes(o.Body, "message").Str)
			o.Body = e.With("agentError", json.RawMessage(o.Body)).JSON()
		}
	}
	switch method {
	case "session/new", "session/resume", "session/fork":
		s.opening--
		if o.Kind == translate.Reply {
			id := gjson.GetBytes(o.Body, "sessionId").Str
			s.session(id)
			post = s.release(id, post)
		} else {
			post = s.release("", post)
		}
	case "session/load":
		if t := s.sessions[gjson.GetBytes(o.Body, "sessionId").Str]; t != nil {
			t.loading = false
		}
		for _, t := range s.sessions {
			t.loading = false
		}
	case "session/prompt":
		t := s.session(sid)
		if t.open > 0 {
			t.open--
		}
		if t.open > 0 {
			// Another prompt of the session is open (an agent that
			// queues them): what comes next may be its turn's, so this
			// answer is neither held nor the end of the session's turns,
			// and the permission requests pending may be the other's.
			break
		}
		pre = s.withdraw(sid, pre)
		if s.on[iLateUpdates] && s.opt.Quiet >= 0 && o.Kind == translate.Reply {
			// Updates that come during the quiet period still belong to
			// the turn: they are written before its answer.
			d := s.opt.Quiet
			switch {
			case d != 0:
			case s.lateSeen:
				d = DefaultQuiet
			default:
				d = FirstQuiet
			}
			o.Session = sid
			t.holding = true
			s.held = append(s.held, o)
			return append(pre, translate.Out{Kind: translate.Timer, Delay: d}), nil
		}
		t.ended = true
	}
	if len(pre) == 0 && len(post) == 0 {
		return s.r.one(o), nil // the usual answer: the relay's reused slice, as the relay returns it
	}
	out := append(pre, o)
	return append(out, post...), nil
}

// soleUnknown returns the agent-hop id of the only request in flight whose
// method ACP does not define.
func (s *Shim) soleUnknown() (uint64, bool) {
	var found uint64
	n := 0
	for id, ref := range s.r.toEditor {
		if m, ok := s.methods[ref]; ok && !knownMethod(m) {
			found = id
			n++
		}
	}
	return found, n == 1
}

// repairResult applies the rules that look inside a successful answer.
// cancelled says the editor cancelled the prompt that body answers.
func (s *Shim) repairResult(method, sid string, cancelled bool, body json.RawMessage) (json.RawMessage, []translate.Out) {
	var notes []translate.Out
	if t := bytes.TrimSpace(body); (len(t) == 0 || string(t) == "null") && objectResult[method] {
		if s.on[iObjectResults] {
			notes = append(notes, note(RuleObjectResults, sid, "%s answered null", method))
			return json.RawMessage("{}"), notes
		}
		return body, nil
	}
	if !knownMethod(method) {
		return body, notes // the agent's own method: its result is its business
	}
	if s.on[iFieldNames] && bytes.IndexByte(body, '_') >= 0 {
		if b, what := camelCase(body); what != "" {
			notes = append(notes, note(RuleFieldNames, sid, "%s answer: %s", method, what))
			body = b
		}
	}
	switch method {
	case "initialize":
		if v := gjson.GetBytes(body, "protocolVersion"); v.Type == gjson.String && s.on[iProtocolVersion] {
			if f, err := strconv.ParseFloat(v.Str, 64); err == nil && f == float64(int64(f)) && f >= 1 {
				n := strconv.FormatInt(int64(f), 10)
				notes = append(notes, note(RuleProtocolVersion, "", "protocolVersion %s became %s", v.Raw, n))
				body = splice(body, v, n)
			}
		}
	case "session/prompt":
		v := gjson.GetBytes(body, "stopReason")
		if v.Str == "canceled" && s.on[iFieldNames] {
			notes = append(notes, note(RuleFieldNames, sid, `stopReason "canceled" became "cancelled"`))
			body = splice(body, v, `"cancelled"`)
			v = gjson.GetBytes(body, "stopReason")
		}
		if cancelled && v.Str != "cancelled" && s.on[iCancelledStopReason] {
			notes = append(notes, note(RuleCancelledStopReason, sid, "a cancelled turn ended with stopReason %s", v.Raw))
			if v.Exists() {
				body = splice(body, v, `"cancelled"`)
			}
			v = gjson.GetBytes(body, "stopReason")
		}
		if s.on[iSchema] && !stopReasons[v.Str] {
			notes = append(notes, note(RuleSchema, sid, "session/prompt answer with stopReason %s", orNone(v.Raw)))
		}
	case "session/new":
		if v := gjson.GetBytes(body, "sessionId"); s.on[iSchema] && v.Type != gjson.String {
			notes = append(notes, note(RuleSchema, sid, "session/new answer without a string sessionId"))
		}
	}
	return body, notes
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// splice replaces the value v (found in body by gjson) with raw.
func splice(body []byte, v gjson.Result, raw string) []byte {
	if !v.Exists() || v.Index <= 0 || v.Index+len(v.Raw) > len(body) {
		return body
	}
	out := make([]byte, 0, len(body)+len(raw))
	out = append(out, body[:v.Index]...)
	out = append(out, raw...)
	return append(out, body[v.Index+len(v.Raw):]...)
}
