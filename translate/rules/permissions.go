// Permission requests: asking the editor on a rule's behalf, relaying its
// answer to the agent, and withdrawing a question whose turn ended.

package rules

import (
	"fmt"
	"strings"

	"github.com/acp-bridge/acp-bridge/internal/wire"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

var defaultOptions = []byte(`[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]`)

func (t *translator) askPermission(pr *permissionRule, frame []byte, tr *turn) []translate.Out {
	sess := tr.sess
	var outs []translate.Out
	tl := sess.lastTool()
	if tl == nil {
		// Nothing announced yet: the request needs a tool call to name.
		tl = &tool{id: sess.toolID(""), title: "Permission"}
		sess.tools = append(sess.tools, tl)
	}
	if !tl.announced {
		outs = append(outs, t.announce(sess, tl, ""))
	}
	e := t.evalEnv(frame, nil, sess, tl)
	e.turn = tr
	options := defaultOptions
	if pr.options != nil {
		if v := pr.options.eval(e); v.kind == vRaw && gjson.ParseBytes(v.raw).IsArray() {
			options = v.raw
		}
	}
	kinds := map[string]string{}
	gjson.ParseBytes(options).ForEach(func(_, o gjson.Result) bool {
		kinds[o.Get("optionId").String()] = o.Get("kind").String()
		return true
	})
	b := wire.AppendString([]byte(`{"sessionId":`), sess.id)
	b = append(b, `,"toolCall":{"toolCallId":`...)
	b = wire.AppendString(b, tl.id)
	if pr.title != nil {
		if v := pr.title.eval(e); !v.missing() {
			b = append(b, `,"title":`...)
			b = v.appendTextJSON(b)
		}
	}
	b = append(b, `,"status":"pending"},"options":`...)
	b = append(b, options...)
	b = append(b, '}')
	t.nextCall++
	ref := t.nextCall
	t.perms[ref] = &pendingPermission{rule: pr, turn: tr, tool: tl, frame: frame, options: kinds}
	tr.perm = ref
	return append(outs, translate.Out{Kind: translate.Call, Ref: ref, Method: "session/request_permission", Body: b, Session: sess.id})
}

func (t *translator) permissionAnswer(m translate.Msg) ([]translate.Out, error) {
	if t.stale[m.Ref] {
		delete(t.stale, m.Ref)
		return nil, nil
	}
	pp := t.perms[m.Ref]
	if pp == nil {
		return nil, fmt.Errorf("rules: editor answered call %d, which is not outstanding", m.Ref)
	}
	delete(t.perms, m.Ref)
	pp.turn.perm = 0
	outcome := "reject"
	if m.Error == nil {
		r := gjson.GetBytes(m.Body, "outcome")
		switch r.Get("outcome").Str {
		case "selected":
			kind, ok := pp.options[r.Get("optionId").String()]
			if ok && strings.HasPrefix(kind, "allow") {
				outcome = "allow"
			}
		case "cancelled":
			outcome = "cancelled"
		}
	}
	sess := pp.turn.sess
	// The answer frames are built now, when the editor answers, but in
	// the turn that asked: they read its turn.sent and turn.NAME.
	e := t.evalEnv(pp.frame, nil, sess, pp.tool)
	e.turn = pp.turn
	var outs []translate.Out
	frames := pp.rule.reject
	switch outcome {
	case "allow":
		frames = pp.rule.allow
	case "cancelled":
		frames = pp.rule.cancelled
	}
	sent := t.evalFrames(frames, e, true)
	outs = append(outs, frameOuts(sent)...)
	if pp.turn.dropped {
		return outs, nil
	}
	if outcome == "allow" {
		outs = append(outs, t.toolUpdate(sess, pp.tool, `"in_progress"`, false, nil))
		return outs, nil
	}
	outs = append(outs, t.toolUpdate(sess, pp.tool, `"failed"`, false, nil))
	pp.tool.rejected = true
	if outcome == "reject" && pp.rule.rejectEndsTurn {
		if pp.rule.reportWait > 0 && len(sent) > 0 && !pp.turn.cancelled {
			// The agent was told of the refusal and may report the call
			// (its output, why it stopped): the answer waits for that,
			// as every update of a turn comes before its answer.
			pp.turn.reportBy, pp.turn.reportWait = t.now.Add(pp.rule.reportWait), pp.rule.reportWait
			return outs, nil
		}
		outs = append(outs, t.endTurn(pp.turn, "end_turn")...)
	}
	return outs, nil
}

// withdrawPermission cancels the turn's pending permission request: the
// editor is told to drop it and the agent gets the cancelled frames.
func (t *translator) withdrawPermission(tr *turn) []translate.Out {
	if tr.perm == 0 {
		return nil
	}
	ref := tr.perm
	pp := t.perms[ref]
	delete(t.perms, ref)
	tr.perm = 0
	t.stale[ref] = true
	outs := []translate.Out{{Kind: translate.CancelCall, Ref: ref}}
	if pp != nil {
		e := t.evalEnv(pp.frame, nil, tr.sess, pp.tool)
		e.turn = tr
		outs = append(outs, frameOuts(t.evalFrames(pp.rule.cancelled, e, true))...)
	}
	return outs
}
