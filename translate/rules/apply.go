// Carrying out a matched rule: what it keeps, the updates it sends the
// editor, and whether it counts as the turn's progress.

package rules

import (
	"fmt"

	"github.com/acp-bridge/acp-bridge/internal/wire"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// apply carries out a rule. A reply rule of a prompt ends its turn.
func (t *translator) apply(r *rule, frame []byte, sess *session, tr *turn, promptReply bool) []translate.Out {
	t.rule = r.name
	outs := t.applyRule(r, frame, sess, tr, promptReply)
	if t.progress(r, tr, promptReply, outs) {
		t.matched(tr)
	}
	return outs
}

// progress reports whether the frame a rule matched counts as the turn's
// progress toward its quiet and give_up: the frame named the turn by its
// key, or the rule kept a value for it, touched a tool call, ended it,
// asked for permission or told the editor something. A frame that only
// answers (a ping a rule replies to) or an event marked keepalive does
// not: an agent's keepalive would otherwise keep a turn whose end no rule
// matches alive forever.
func (t *translator) progress(r *rule, tr *turn, promptReply bool, outs []translate.Out) bool {
	if tr == nil || r.keepalive {
		return false
	}
	if t.keyed || promptReply || len(r.keep) > 0 || r.tool != nil || r.endTurn != nil || r.fail != nil || r.permission != nil {
		return true
	}
	for _, o := range outs {
		switch o.Kind {
		case translate.Notify, translate.Call, translate.Reply, translate.Fail:
			return true
		}
	}
	return false
}

func (t *translator) applyRule(r *rule, frame []byte, sess *session, tr *turn, promptReply bool) []translate.Out {
	if tr != nil && tr.dropped {
		// The editor was already answered for this turn: only its end
		// matters, and nothing reaches the editor.
		var outs []translate.Out
		if r.endTurn != nil || r.fail != nil || promptReply {
			t.popTurn(tr)
			outs = append(outs, t.closeToolsQuiet(tr.sess, nil)...)
		}
		if len(r.updates) > 0 || r.tool != nil {
			outs = append(outs, translate.Out{Kind: translate.Note, Method: noteDropped, Session: tr.sess.id,
				Body: fmt.Appendf(nil, "frame of a turn the bridge already ended: %.120s", frame)})
		}
		return outs
	}
	t.keep(r, frame, sess, tr, promptReply)
	var outs []translate.Out
	e := t.evalEnv(frame, nil, sess, nil)
	e.turn = tr
	if sess != nil {
		e.tool = sess.lastTool()
	}
	outs = append(outs, frameOuts(t.evalFrames(r.send, e, true))...)
	if sess == nil {
		if len(r.updates) > 0 || r.tool != nil || r.finalMessage != nil {
			outs = append(outs, translate.Out{Kind: translate.Note, Method: "unroutable-updates", Body: []byte("no session for " + r.name)})
		}
		return outs
	}
	if tr == nil && sess.draining {
		if len(r.updates) > 0 || r.tool != nil {
			outs = append(outs, translate.Out{Kind: translate.Note, Method: noteDropped, Session: sess.id,
				Body: []byte("frame after a cancelled turn ended, before the next prompt")})
		}
		return outs
	}
	if r.tool != nil {
		tos, tl := t.applyTool(r.tool, e, sess)
		outs = append(outs, tos...)
		if tl != nil && tl.rejected && tr != nil && !tr.reportBy.IsZero() {
			// A report of the refused call: the turn waits on for more.
			tr.reportBy = t.now.Add(tr.reportWait)
		}
		e.tool = sess.lastTool()
	}
	for _, u := range r.updates {
		if o, ok := t.updateOut(u, e, sess, tr); ok {
			outs = append(outs, o)
		}
	}
	if r.finalMessage != nil && tr != nil && !tr.streamed {
		if o, ok := t.updateOut(update{kind: "agent_message_chunk", n: r.finalMessage}, e, sess, tr); ok {
			outs = append(outs, o)
		}
	}
	askPermission := r.permission != nil && tr != nil && tr.perm == 0 && !tr.cancelled && tr.reportBy.IsZero()
	if askPermission {
		outs = append(outs, t.askPermission(r.permission, frame, tr)...)
	}
	switch {
	case tr == nil:
	case r.permission != nil && tr.cancelled:
		// The agent stopped to ask after the editor cancelled: the turn is over.
		outs = append(outs, t.endTurn(tr, "cancelled")...)
	case r.permission != nil && !tr.reportBy.IsZero():
		// The agent moved on from the refused call to ask again: the
		// refusal ended the turn, and the ask is not put to the editor;
		// the call it asked for did not run.
		if tl := sess.lastTool(); tl != nil && tl.announced {
			outs = append(outs, t.toolUpdate(sess, tl, `"failed"`, false, nil))
			tl.rejected = true
		}
		outs = append(outs, t.endTurn(tr, "end_turn")...)
	case r.fail != nil:
		msg := r.fail.eval(e).text()
		errObj := translate.Errorf(translate.CodeInternalError, "%s", msg).JSON()
		if refusesCancel(tr) {
			outs = append(outs, t.cancelRefused(tr, errObj)...)
		} else {
			outs = append(outs, t.failTurn(tr, errObj)...)
		}
	case r.endTurn != nil:
		reason := r.endTurn.eval(e)
		stop := reason.text()
		isString := reason.kind == vStr || reason.kind == vRaw && len(reason.raw) > 0 && reason.raw[0] == '"'
		if !isString || !stopReasons[stop] {
			// An expression over the frame gave no stop reason ACP knows:
			// the rule still ends the turn, as end_turn, and says so.
			got := string(reason.appendJSON(nil))
			if reason.absent() {
				got = "nothing"
			}
			outs = append(outs, translate.Out{Kind: translate.Note, Method: noteInvalidStop, Session: tr.sess.id,
				Body: fmt.Appendf(nil, "profile %s: event %q's end_turn gave %.80s, which is none of end_turn, max_tokens, max_turn_requests, refusal, cancelled; the turn ends end_turn (frame %.120s)", t.p.Name, r.name, got, frame)})
			stop = "end_turn"
		}
		if tr.cancelled && stop != "cancelled" && !promptReply {
			outs = append(outs, translate.Out{Kind: translate.Note, Method: noteCancelIgnored, Session: tr.sess.id,
				Body: fmt.Appendf(nil, "the agent finished the turn instead of stopping it (event %q ends it %s); the prompt is answered cancelled", r.name, stop)})
		}
		outs = append(outs, t.endTurn(tr, stop)...)
	case promptReply:
		outs = append(outs, t.endTurn(tr, "end_turn")...)
	}
	return outs
}

// keep stores the values r keeps from frame: the session's for the reply
// of a prompt, the turn's for an event. They are stored before the rule's
// templates run, which may read them.
func (t *translator) keep(r *rule, frame []byte, sess *session, tr *turn, promptReply bool) {
	for _, k := range r.keep {
		v := get(frame, k.path)
		if !v.Exists() {
			continue
		}
		raw := []byte(v.Raw)
		switch {
		case promptReply && sess != nil:
			sess.kept[k.name] = raw
			if k.name == "agent_session" {
				sess.agentSession = v.String()
			}
		case !promptReply && tr != nil:
			if tr.kept == nil {
				tr.kept = map[string][]byte{}
			}
			tr.kept[k.name] = raw
			if key := t.p.turnKey; key != nil && key.kept == k.name {
				tr.key, tr.keyed = v.String(), true
			}
		}
	}
}

func (t *translator) updateOut(u update, e *evalEnv, sess *session, tr *turn) (translate.Out, bool) {
	v := u.n.eval(e)
	if v.missing() {
		return translate.Out{}, false
	}
	// Room for the longest wrapper below (a text chunk's) around the value.
	b := make([]byte, 0, 112+len(sess.id)+len(u.kind)+len(v.raw)+len(v.str))
	b = append(b, `{"sessionId":`...)
	b = wire.AppendString(b, sess.id)
	b = append(b, `,"update":`...)
	switch u.kind {
	case "":
		if v.kind != vRaw || gjson.GetBytes(v.raw, "sessionUpdate").Type != gjson.String {
			return translate.Out{Kind: translate.Note, Method: "unroutable-updates", Body: []byte("update without sessionUpdate")}, true
		}
		b = append(b, v.raw...)
		if tr != nil && gjson.GetBytes(v.raw, "sessionUpdate").Str == "agent_message_chunk" {
			tr.streamed = true
		}
	case "plan":
		if v.kind != vRaw || !gjson.ParseBytes(v.raw).IsArray() {
			return translate.Out{}, false
		}
		b = append(b, `{"sessionUpdate":"plan","entries":`...)
		b = append(b, v.raw...)
		b = append(b, '}')
	default:
		b = append(b, `{"sessionUpdate":"`...)
		b = append(b, u.kind...)
		b = append(b, `","content":{"type":"text","text":`...)
		b = v.appendTextJSON(b)
		b = append(b, `}}`...)
		if tr != nil && u.kind == "agent_message_chunk" {
			tr.streamed = true
		}
	}
	b = append(b, '}')
	return translate.Out{Kind: translate.Notify, Method: "session/update", Body: b, Session: sess.id}, true
}
