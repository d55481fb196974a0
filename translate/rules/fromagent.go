// What the translator does with the agent's frames: matching them to
// rules, replies to the requests it sent, and the agent's errors.

package rules

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// MatchedRule implements translate.RuleReporter: the rule that handled
// the last agent frame, "" when none did.
func (t *translator) MatchedRule() string { return t.rule }

// FromAgent implements translate.Translator.
func (t *translator) FromAgent(frame []byte) ([]translate.Out, error) {
	return t.FromAgentAt(frame, t.now)
}

// FromAgentAt implements translate.AgentClock.
func (t *translator) FromAgentAt(frame []byte, at time.Time) ([]translate.Out, error) {
	if !at.IsZero() {
		t.now = at
	}
	outs, err := t.fromAgent(frame)
	return t.wake(outs), err
}

func (t *translator) fromAgent(frame []byte) ([]translate.Out, error) {
	t.rule = ""
	frame = bytes.TrimSpace(frame)
	// The iterative scanner, not gjson's validator: a deeply nested frame
	// cannot overflow the stack. With a JSON-RPC envelope the same pass
	// reads the envelope, which spares the rules a look for an id that a
	// streamed notification does not have (a scan of the whole frame).
	env := &t.env // the translator's own, so that no frame allocates one
	var envErr *translate.Error
	if t.p.envelope != envNone {
		*env, envErr = translate.ParseEnvelope(frame)
		if envErr != nil && envErr.Code == translate.CodeParseError {
			return nil, fmt.Errorf("rules: the agent sent a frame that is not JSON: %.80q", frame)
		}
		t.cur = envOf(env, envErr)
		defer func() { t.cur, t.env = nil, translate.Envelope{} }() // keep no frame
	} else if translate.Valid(frame) != nil {
		return nil, fmt.Errorf("rules: the agent sent a frame that is not JSON: %.80q", frame)
	}
	if t.p.silence > 0 {
		for _, s := range t.sessions {
			for _, tr := range s.turns {
				tr.deadline = t.now.Add(t.p.silence)
			}
		}
	}
	if t.conn == connWaitFrame {
		c := t.p.connect
		if c.reject != nil && c.reject.matches(frame, nil) {
			t.rule = "connect.reject"
			return t.rejected(frame), nil
		}
		if c.expect.matches(frame, nil) {
			t.rule = "connect.expect"
			return t.ready(nil), nil
		}
	}
	if hb := t.p.heartbeat; hb != nil && hb.reply != nil && hb.reply.matches(frame, nil) {
		t.rule = "heartbeat.reply"
		return nil, nil
	}
	if t.p.envelope != envNone && (envErr != nil || !env.IsNotification()) {
		if outs, done, err := t.rpcFrameIn(frame); done {
			return outs, err
		}
	}
	sess := t.route(frame, envOf(env, envErr))
	tr := t.currentTurn(sess)
	keyed := false
	t.keyed = false
	defer func() { t.keyed = false }()
	if k := t.p.turnKey; k != nil {
		if v := envGet(envOf(env, envErr), frame, k.frame); v.Exists() {
			s, ktr := t.turnByKey(v.String())
			switch {
			case ktr != nil:
				sess, tr, keyed = s, ktr, true
				t.keyed = true
			case k.kept != "" && sess.live() != nil && !sess.live().keyed && !slices.Contains(t.ended, v.String()):
				// The agent's first frame of the running turn, naming the
				// id it assigned, which the turn's rules keep.
				tr = sess.live()
			default:
				if outs, ok := t.stopRefused(frame, v.String()); ok {
					return outs, nil
				}
				// No session either: the turn that would say which is gone.
				return []translate.Out{{Kind: translate.Note, Method: noteDropped,
					Body: fmt.Appendf(nil, "frame of turn %s=%s, which is not running: %.120s", k.frame, v.String(), frame)}}, nil
			}
		}
	}
	st := &t.st
	*st = state{sess: sess, turn: tr, env: envOf(env, envErr)}
	if tr != nil && !tr.ackBy.IsZero() && t.p.cancel.ack.matches(frame, st) {
		t.rule = "cancel.ack"
		return t.cancelAcked(tr), nil
	}
	for _, er := range t.p.errors {
		if er.match.matches(frame, st) {
			return t.agentError(er, frame, sess, tr, keyed), nil
		}
	}
	for _, ex := range t.waiting {
		if keyed && ex.turn != nil && ex.turn != tr {
			continue
		}
		r := ex.req.reply
		if r == nil || (r.match == nil && r.correlate == "") {
			continue
		}
		if r.match != nil && !r.match.matches(frame, st) {
			continue
		}
		if r.correlate != "" && gjson.GetBytes(frame, r.correlate).String() != gjson.GetBytes(ex.sent, r.correlate).String() {
			continue
		}
		return t.replied(ex, frame), nil
	}
	for _, r := range t.p.events {
		if r.match.matches(frame, st) {
			return t.apply(r, frame, sess, tr, false), nil
		}
	}
	hint := t.p.nearMiss(frame)
	if hint != "" {
		hint = NearMissMark + hint
	}
	if t.conn == connWaitFrame {
		return []translate.Out{{Kind: translate.Note, Method: noteUnmatched, Body: []byte(fmt.Sprintf("profile %s still waits for the connect frame matching %s; got %.120s%s", t.p.Name, t.p.connect.expect, frame, hint))}}, nil
	}
	o := translate.Out{Kind: translate.Note, Method: noteUnmatched, Body: []byte(fmt.Sprintf("no rule of profile %s matches %.120s%s", t.p.Name, frame, hint))}
	if sess != nil {
		o.Session = sess.id
		if tr := sess.live(); tr != nil {
			tr.unmatched = fmt.Appendf(tr.unmatched[:0], "%.200s%s", frame, hint)
		}
	}
	return []translate.Out{o}, nil
}

// stopRefused handles an error frame naming, by the turn key, a value no
// turn has (v), while a stop forwarded for a turn is unanswered: it is the
// agent refusing that stop (most often because the stop named a job it
// does not know, such as a constant in the cancel block). The turn is the
// one whose stop frame named v, else the oldest awaiting an answer to its
// stop. ok is false when the frame is no such refusal.
func (t *translator) stopRefused(frame []byte, v string) ([]translate.Out, bool) {
	var stopped *turn
find:
	for _, s := range t.sessions {
		for _, tr := range s.turns {
			if !refusesCancel(tr) {
				continue
			}
			if tr.stopKeyed && tr.stopKey == v {
				stopped = tr
				break find
			}
			if stopped == nil {
				stopped = tr
			}
		}
	}
	if stopped == nil {
		return nil, false
	}
	st := &t.st
	*st = state{sess: stopped.sess, turn: stopped, env: t.cur}
	for _, er := range t.p.errors {
		if er.match.matches(frame, st) {
			return t.agentError(er, frame, stopped.sess, stopped, true), true
		}
	}
	return nil, false
}

// rpcFrameIn handles JSON-RPC responses and agent requests; done is false
// for notifications, which the event rules handle.
func (t *translator) rpcFrameIn(frame []byte) ([]translate.Out, bool, error) {
	id, method := get(frame, "id"), get(frame, "method")
	switch {
	case id.Exists() && !method.Exists():
		key := id.Raw
		if id.Type == gjson.String {
			key = id.Str
		}
		ex := t.byID[key]
		if ex == nil {
			return []translate.Out{{Kind: translate.Note, Method: noteUnmatched,
				Body: []byte("a reply to agent request " + id.Raw + ", which is not outstanding")}}, true, nil
		}
		delete(t.byID, key)
		if errObj := get(frame, "error"); errObj.Exists() {
			return t.failExchange(ex, passError([]byte(errObj.Raw))), true, nil
		}
		return t.replied(ex, frame), true, nil
	case id.Exists() && method.Exists():
		st := &t.st
		*st = state{sess: t.route(frame, nil)}
		st.turn = t.currentTurn(st.sess)
		for _, ev := range t.p.events {
			if ev.match.matches(frame, st) {
				return t.apply(ev, frame, st.sess, st.turn, false), true, nil
			}
		}
		e := translate.Errorf(translate.CodeMethodNotFound, "%s is not handled by the bridge's profile %s", method.Str, t.p.Name)
		return []translate.Out{
			frameOut(t.rpcError([]byte(id.Raw), e.JSON())),
			{Kind: translate.Note, Method: noteAgentCall, Body: []byte(method.Str)},
		}, true, nil
	}
	return nil, false, nil
}

func (t *translator) rpcError(id, errObj []byte) []byte {
	b := []byte{'{'}
	if t.p.envelope == envJSONRPC {
		b = append(b, `"jsonrpc":"2.0",`...)
	}
	b = append(b, `"id":`...)
	b = append(b, id...)
	b = append(b, `,"error":`...)
	b = append(b, errObj...)
	return append(b, '}')
}

// rejected handles the frame that means the agent refused the connection.
func (t *translator) rejected(frame []byte) []translate.Out {
	msg := "the agent refused the connection"
	if n := t.p.connect.rejectMessage; n != nil {
		if v := n.eval(t.evalEnv(frame, nil, nil, nil)); v.text() != "" {
			msg = v.text()
		}
	}
	t.conn = connRejected
	t.rejectErr = translate.Errorf(translate.CodeInternalError, "%s", msg).JSON()
	held := t.held
	t.held = nil
	body := fmt.Sprintf("profile %s: the agent refused the connection with %.200s (connect's reject matched %s)", t.p.Name, frame, t.p.connect.reject)
	if len(t.envVars) > 0 {
		body += "; the profile reads the environment variable(s) " + strings.Join(slices.Sorted(maps.Keys(t.envVars)), ", ")
	}
	outs := []translate.Out{{Kind: translate.Note, Method: noteConnectRejected, Body: []byte(body)}}
	for _, m := range held {
		if m.Kind == translate.Request {
			outs = append(outs, fail(m.Ref, t.rejectErr))
		}
	}
	return outs
}

// replied handles the reply to an exchange.
func (t *translator) replied(ex *exchange, frame []byte) []translate.Out {
	defer func() { t.rule = "reply " + ex.req.method }()
	t.removeWaiting(ex)
	if ex.turn != nil {
		r := ex.req.reply
		if r == nil {
			r = &rule{}
		}
		return t.apply(r, frame, ex.turn.sess, ex.turn, true)
	}
	return t.finish(ex, frame)
}

// finish answers a non-prompt exchange after its reply (frame nil: no reply
// was awaited).
func (t *translator) finish(ex *exchange, frame []byte) []translate.Out {
	var outs []translate.Out
	r := ex.req.reply
	sess := ex.sess
	if r != nil && frame != nil && sess != nil {
		for _, k := range r.keep {
			if v := gjson.GetBytes(frame, k.path); v.Exists() {
				sess.kept[k.name] = []byte(v.Raw)
				if k.name == "agent_session" {
					sess.agentSession = v.String()
				}
			}
		}
	}
	var result []byte
	if r != nil && r.result != nil {
		if v := r.result.eval(t.evalEnv(frame, nil, sess, nil)); !v.absent() {
			result = v.appendJSON(nil)
		}
	}
	if ex.ref == 0 {
		return nil // abandoned: the engine answered it (a session stays unknown)
	}
	switch ex.method {
	case "initialize":
		return append(outs, translate.Out{Kind: translate.Reply, Ref: ex.ref, Body: t.initializeResult()})
	case "session/new", "session/load", "session/resume":
		if result == nil && ex.method != "session/new" {
			result = []byte("{}") // their results carry no sessionId
		}
		return append(outs, t.opened(sess, ex.ref, result))
	}
	if result == nil {
		result = []byte("{}")
	}
	sid := ""
	if sess != nil {
		sid = sess.id
	}
	return append(outs, reply(ex.ref, result, sid))
}

// failExchange fails an exchange with the agent's error object.
func (t *translator) failExchange(ex *exchange, errObj []byte) []translate.Out {
	t.rule = "reply " + ex.req.method
	t.removeWaiting(ex)
	if ex.turn != nil {
		return t.failTurn(ex.turn, errObj)
	}
	if ex.ref == 0 {
		return nil
	}
	return []translate.Out{fail(ex.ref, errObj)}
}

// agentError applies an error rule: it fails the turn the frame names by
// the profile's turn key (keyed), else the oldest request waiting for the
// agent, else the running turn of the frame's session.
func (t *translator) agentError(er *errorRule, frame []byte, sess *session, tr *turn, keyed bool) []translate.Out {
	t.rule = "error"
	e := t.evalEnv(frame, nil, sess, nil)
	e.turn = tr
	msg := er.message.eval(e).text()
	if msg == "" {
		msg = "the agent reported an error"
	}
	code := translate.CodeInternalError
	if er.code != nil {
		if n, err := strconv.Atoi(er.code.eval(e).text()); err == nil {
			code = n
		}
	}
	errObj := translate.Errorf(code, "%s", msg).JSON()
	if len(t.waiting) > 0 && !keyed {
		if tr := t.waiting[0].turn; refusesCancel(tr) {
			return t.cancelRefused(tr, errObj)
		}
		return t.failExchange(t.waiting[0], errObj)
	}
	if tr != nil {
		if refusesCancel(tr) {
			return t.cancelRefused(tr, errObj)
		}
		return t.failTurn(tr, errObj)
	}
	return []translate.Out{{Kind: translate.Note, Method: noteUnmatched, Body: []byte("agent error outside any request: " + msg)}}
}
