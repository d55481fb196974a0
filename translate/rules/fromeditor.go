// What the translator does with the editor's messages: initialize, new
// and closed sessions, prompts, cancels, and the requests it abandons.

package rules

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/wire"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// FromEditor implements translate.Translator.
func (t *translator) FromEditor(m translate.Msg) ([]translate.Out, error) {
	if !m.At.IsZero() {
		t.now = m.At
	}
	if m.Grace > 0 {
		t.grace = m.Grace
	}
	var outs []translate.Out
	var err error
	switch m.Kind {
	case translate.Request, translate.Notification:
		if t.conn == connWaitUp || t.conn == connWaitFrame {
			m.Body = append(json.RawMessage(nil), m.Body...)
			t.held = append(t.held, m)
			return t.wake(nil), nil
		}
		if m.Kind == translate.Request {
			outs = t.request(m)
		} else {
			outs = t.notification(m)
		}
	case translate.Response:
		outs, err = t.permissionAnswer(m)
	case translate.CancelRequest:
		if tr := t.turnByRef(m.Ref); tr != nil && !tr.dropped {
			outs = t.cancelTurn(tr)
		}
	case translate.Abandon:
		outs = t.abandon(m.Ref)
	case translate.LinkUp:
		outs = t.linkUp()
	case translate.LinkDown:
		grace := t.grace
		*t = *newTranslator(t.p, t.envVars)
		t.grace = grace
		return nil, nil
	case translate.Tick:
		t.armed = time.Time{}
		outs = t.tick()
	default:
		return nil, fmt.Errorf("rules: unexpected editor input kind %d", m.Kind)
	}
	return t.wake(outs), err
}

func (t *translator) request(m translate.Msg) []translate.Out {
	switch m.Method {
	case "initialize":
		return t.initialize(m)
	case "session/new", "session/load", "session/resume":
		return t.newSession(m)
	case "session/prompt":
		return t.prompt(m)
	case "session/close":
		return t.closeSession(m)
	}
	if t.conn == connRejected {
		return []translate.Out{fail(m.Ref, t.rejectErr)}
	}
	req := t.p.requests[m.Method]
	if req == nil {
		return []translate.Out{failf(m.Ref, translate.CodeMethodNotFound,
			"%s is not available: profile %s does not say how to send it to the agent", m.Method, t.p.Name)}
	}
	sess := t.session(gjson.GetBytes(m.Body, "sessionId").Str)
	return t.send(req, m, sess, nil)
}

func (t *translator) notification(m translate.Msg) []translate.Out {
	if m.Method != "session/cancel" {
		return nil
	}
	sess := t.session(gjson.GetBytes(m.Body, "sessionId").Str)
	if sess == nil {
		return nil
	}
	if tr := sess.live(); tr != nil {
		return t.cancelTurn(tr)
	}
	return nil
}

// send builds and sends the frames of req and answers or awaits the reply.
func (t *translator) send(req *requestRule, m translate.Msg, sess *session, setup func(*exchange)) []translate.Out {
	t.nextID++
	e := t.evalEnv(nil, m.Body, sess, nil)
	if m.Method == "session/prompt" {
		e.prompt = promptText(m.Body)
	}
	var outs []translate.Out
	var first []byte
	if req.agentMethod != "" {
		var params []byte
		if req.params != nil {
			if v := req.params.eval(e); !v.absent() {
				params = v.appendJSON(nil)
			}
		}
		f := t.rpcFrame(req.agentMethod, params, !req.notify)
		first = f
		outs = append(outs, frameOut(f))
	}
	for _, f := range t.evalFrames(req.send, e, false) {
		if first == nil {
			first = f
		}
		outs = append(outs, frameOut(f))
	}
	awaits := req.reply != nil || (req.agentMethod != "" && !req.notify)
	ex := &exchange{req: req, method: m.Method, ref: m.Ref, id: t.nextID, sent: first, sess: sess}
	if setup != nil {
		setup(ex)
	}
	if !awaits {
		if ex.turn != nil {
			return outs // the turn ends by an event or by silence
		}
		return append(outs, t.finish(ex, nil)...)
	}
	t.waiting = append(t.waiting, ex)
	if req.agentMethod != "" && !req.notify {
		t.byID[strconv.FormatUint(ex.id, 10)] = ex
	}
	return outs
}

func (t *translator) rpcFrame(method string, params []byte, withID bool) []byte {
	b := make([]byte, 0, len(params)+len(method)+48)
	b = append(b, '{')
	if t.p.envelope == envJSONRPC {
		b = append(b, `"jsonrpc":"2.0",`...)
	}
	if withID {
		b = append(b, `"id":`...)
		b = strconv.AppendUint(b, t.nextID, 10)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	b = wire.AppendString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

func (t *translator) initialize(m translate.Msg) []translate.Out {
	if t.conn == connRejected {
		return []translate.Out{fail(m.Ref, t.rejectErr)}
	}
	if req := t.p.requests["initialize"]; req != nil {
		return t.send(req, m, nil, nil)
	}
	return []translate.Out{{Kind: translate.Reply, Ref: m.Ref, Body: t.initializeResult()}}
}

// initializeResult advertises what the profile can deliver: text and
// resource-link prompts only, session/close when the profile can close.
func (t *translator) initializeResult() json.RawMessage {
	b := []byte(`{"protocolVersion":1,"agentCapabilities":{"loadSession":`)
	b = strconv.AppendBool(b, t.p.requests["session/load"] != nil)
	b = append(b, `,"promptCapabilities":{"image":false,"audio":false,"embeddedContext":true}`...)
	// session/close is always served: by the profile's frame, by closing
	// a per-session link, or on the bridge's side alone (closeSession).
	caps := []string{`"close":{}`}
	if t.p.requests["session/resume"] != nil {
		caps = append(caps, `"resume":{}`)
	}
	b = append(b, `,"sessionCapabilities":{`+strings.Join(caps, ",")+`}`...)
	b = append(b, `},"authMethods":[],"agentInfo":{"name":`...)
	b = wire.AppendString(b, t.p.Name)
	b = append(b, `,"version":"profile"}}`...)
	return b
}

func (t *translator) newSession(m translate.Msg) []translate.Out {
	if t.conn == connRejected {
		return []translate.Out{fail(m.Ref, t.rejectErr)}
	}
	cwd := gjson.GetBytes(m.Body, "cwd")
	if cwd.Type != gjson.String || !strings.HasPrefix(cwd.Str, "/") {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/new needs an absolute cwd")}
	}
	if t.p.PerSession && len(t.sessions) > 0 {
		return []translate.Out{failf(m.Ref, translate.CodeInternalError,
			"profile %s holds one conversation per connection and this one already serves a session", t.p.Name)}
	}
	pending := &session{id: m.Session, cwd: cwd.Str, kept: map[string][]byte{}}
	req := t.p.requests[m.Method]
	if m.Method != "session/new" {
		// session/load and session/resume name the session they reopen.
		if req == nil {
			return []translate.Out{failf(m.Ref, translate.CodeMethodNotFound,
				"%s is not available: profile %s does not say how to send it to the agent", m.Method, t.p.Name)}
		}
		if pending.id == "" {
			pending.id = gjson.GetBytes(m.Body, "sessionId").Str
		}
		if t.session(pending.id) != nil {
			return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session %q is already open", pending.id)}
		}
		if !t.p.PerSession {
			// The ACP id is the agent's: keep it for templates and routing.
			pending.kept["agent_session"] = wire.AppendString(nil, pending.id)
			pending.agentSession = pending.id
		}
	}
	if req == nil {
		return []translate.Out{t.opened(pending, m.Ref, nil)}
	}
	return t.send(req, m, pending, func(ex *exchange) { ex.cwd = cwd.Str; ex.sessionID = m.Session })
}

// opened registers a session and answers session/new.
func (t *translator) opened(s *session, ref translate.Ref, result []byte) translate.Out {
	if s.id == "" {
		if v, ok := s.kept["agent_session"]; ok && gjson.ParseBytes(v).String() != "" {
			s.id = gjson.ParseBytes(v).String()
		} else {
			t.minted++
			s.id = "session-" + strconv.Itoa(t.minted)
		}
	}
	t.sessions = append(t.sessions, s)
	if result == nil {
		result = append(wire.AppendString([]byte(`{"sessionId":`), s.id), '}')
	}
	return translate.Out{Kind: translate.Reply, Ref: ref, Body: result, Session: s.id}
}

func (t *translator) prompt(m translate.Msg) []translate.Out {
	if t.conn == connRejected {
		return []translate.Out{fail(m.Ref, t.rejectErr)}
	}
	sid := gjson.GetBytes(m.Body, "sessionId").Str
	sess := t.session(sid)
	if sess == nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown session %q", sid)}
	}
	if sess.live() != nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidRequest,
			"a prompt is already running in this session: wait for its response or send session/cancel first")}
	}
	if bad := unsupportedBlock(m.Body); bad != "" {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams,
			"profile %s sends the agent text only; a %s prompt block cannot be sent", t.p.Name, bad)}
	}
	var outs []translate.Out
	for _, old := range slices.Clone(sess.turns) {
		if old.refused {
			// Its end may never come, and the agent's frames cannot say
			// which turn they belong to: from here on they are the new one's.
			t.popTurn(old)
			outs = append(outs, t.closeToolsQuiet(sess, nil)...)
		}
	}
	sess.draining = false
	tr := &turn{ref: m.Ref, sess: sess}
	if t.p.silence > 0 {
		tr.deadline = t.now.Add(t.p.silence)
	}
	t.matched(tr)
	sess.turns = append(sess.turns, tr)
	outs = append(outs, t.send(t.p.requests["session/prompt"], m, sess, func(ex *exchange) {
		ex.turn = tr
		tr.ex = ex
	})...)
	if k := t.p.turnKey; k != nil && k.kept == "" && tr.ex != nil {
		if v := get(tr.ex.sent, k.sent); v.Exists() {
			tr.key, tr.keyed = v.String(), true
		} else {
			outs = append(outs, translate.Out{Kind: translate.Note, Method: noteUnmatched, Session: sess.id,
				Body: fmt.Appendf(nil, "profile %s: the prompt frame has no turn key at %s, so no frame of the agent can name this turn: %.200s", t.p.Name, k.sent, tr.ex.sent)})
		}
	}
	return outs
}

// closeSession closes a session: its live turn is cancelled, and the
// profile's session/close frame is sent when it has one. A profile
// without one (and not per-session, whose link the engine closes) is
// closed on the bridge's side alone: ACP v2 makes session/close
// mandatory, and the session is forgotten here either way, so a prompt
// naming it is refused and its late frames are not passed on.
func (t *translator) closeSession(m translate.Msg) []translate.Out {
	sid := gjson.GetBytes(m.Body, "sessionId").Str
	sess := t.session(sid)
	if sess == nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown session %q", sid)}
	}
	var outs []translate.Out
	if tr := sess.live(); tr != nil {
		// Closing implies cancelling (ACP spec, session/close); the agent's own
		// end of the turn may never come once the link is closed.
		outs = t.cancelTurn(tr)
		if !tr.dropped {
			tr.dropped = true
			outs = append(outs, reply(tr.ref, stopReasonBody("cancelled"), sess.id))
		}
	}
	t.sessions = slices.DeleteFunc(t.sessions, func(s *session) bool { return s == sess })
	if req := t.p.requests["session/close"]; req != nil && t.conn != connRejected {
		return append(outs, t.send(req, m, sess, nil)...)
	}
	return append(outs, reply(m.Ref, []byte("{}"), sess.id))
}

// cancelTurn handles session/cancel (or $/cancel_request on the prompt).
func (t *translator) cancelTurn(tr *turn) []translate.Out {
	tr.reportBy = time.Time{} // the stop decides the turn's end now
	outs := t.withdrawPermission(tr)
	if t.p.cancel != nil && len(t.p.cancel.send) > 0 {
		if tr.cancelled {
			return outs
		}
		tr.cancelled = true
		e := t.evalEnv(nil, nil, tr.sess, tr.sess.lastTool())
		e.turn = tr
		t.nextID++
		e.id = t.nextID
		if t.p.cancel.ack != nil {
			grace := t.p.cancel.grace
			if grace == 0 {
				grace = t.grace
			}
			tr.ackBy, tr.ackGrace = t.now.Add(grace), grace
		}
		frames := t.evalFrames(t.p.cancel.send, e, false)
		if k := t.p.turnKey; k != nil && k.kept == "" && len(frames) > 0 {
			if v := get(frames[0], k.sent); v.Exists() {
				tr.stopKey, tr.stopKeyed = v.String(), true
			}
		}
		return append(outs, frameOuts(frames)...)
	}
	// Nothing to tell the agent: the bridge ends the turn itself and drops
	// what the agent still sends for it.
	outs = append(outs, t.closeTools(tr.sess, "failed")...)
	tr.dropped = true
	return append(outs, reply(tr.ref, stopReasonBody("cancelled"), tr.sess.id))
}

func (t *translator) abandon(ref translate.Ref) []translate.Out {
	for i, m := range t.held {
		if m.Kind == translate.Request && m.Ref == ref {
			t.held = slices.Delete(t.held, i, i+1)
			return nil
		}
	}
	if tr := t.turnByRef(ref); tr != nil {
		var outs []translate.Out
		if !tr.dropped && t.p.cancel != nil && len(t.p.cancel.send) > 0 && !tr.cancelled {
			outs = t.cancelTurn(tr)
		} else {
			outs = t.withdrawPermission(tr)
		}
		tr.dropped = true
		return outs
	}
	for _, ex := range t.waiting {
		if ex.ref == ref {
			ex.ref = 0
		}
	}
	return nil
}
