// How a turn ends: its answer, its failure, and a cancel the agent acked,
// refused or left unanswered.

package rules

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// endTurn answers the turn's prompt with reason ("cancelled" when a cancel
// was forwarded) after closing its tool calls.
func (t *translator) endTurn(tr *turn, reason string) []translate.Out {
	outs := t.withdrawPermission(tr)
	t.popTurn(tr)
	if tr.dropped {
		return append(outs, t.closeToolsQuiet(tr.sess, nil)...)
	}
	status := "completed"
	if tr.cancelled {
		reason, status = "cancelled", "failed"
	}
	outs = append(outs, t.closeTools(tr.sess, status)...)
	return append(outs, reply(tr.ref, stopReasonBody(reason), tr.sess.id))
}

// failTurn fails the turn's prompt with errObj; a turn the editor cancelled
// ends "cancelled" instead (ACP spec, Prompt Turn: cancellation).
func (t *translator) failTurn(tr *turn, errObj []byte) []translate.Out {
	if tr.cancelled {
		return t.endTurn(tr, "cancelled")
	}
	outs := t.withdrawPermission(tr)
	t.popTurn(tr)
	if tr.dropped {
		return append(outs, t.closeToolsQuiet(tr.sess, nil)...)
	}
	outs = append(outs, t.closeTools(tr.sess, "failed")...)
	return append(outs, fail(tr.ref, errObj))
}

// refusesCancel reports whether an agent error, one not correlated to a
// request of its own, answers the cancel forwarded for tr: the error may
// just as well end the turn, but an agent that refused the stop goes on, and
// what it sends then must not reach the editor after "cancelled".
// An error reply to the prompt itself is the turn's end, not a refusal.
func refusesCancel(tr *turn) bool {
	return tr != nil && tr.cancelled && !tr.dropped
}

// cancelRefused handles an error from the agent after a forwarded cancel:
// most often the agent refusing the stop (a wrong id, a turn it no longer
// knows) and going on with the turn. The editor is answered "cancelled" as
// the cancel promises, and the turn stays, dropped, so that whatever the
// agent still sends for it is dropped rather than shown after that answer.
func (t *translator) cancelRefused(tr *turn, errObj []byte) []translate.Out {
	outs := t.withdrawPermission(tr)
	outs = append(outs, t.closeTools(tr.sess, "failed")...)
	tr.dropped, tr.refused = true, true
	// A refusal is the agent's answer to the stop; and a dropped turn is
	// watched for nothing but its end.
	tr.ackBy, tr.quietAt, tr.giveUpAt = time.Time{}, time.Time{}, time.Time{}
	msg := gjson.GetBytes(errObj, "message").Str
	outs = append(outs, translate.Out{Kind: translate.Note, Method: noteCancelRefused, Session: tr.sess.id,
		Body: []byte("the agent answered the cancel with an error; the turn is answered cancelled and its later frames dropped: " + msg)})
	return append(outs, reply(tr.ref, stopReasonBody("cancelled"), tr.sess.id))
}

// cancelAcked handles the agent's acknowledgement of a forwarded stop
// (the cancel block's ack): the agent says the turn is over, so it ends
// cancelled now, and what the agent still sends for it is dropped.
func (t *translator) cancelAcked(tr *turn) []translate.Out {
	tr.ackBy = time.Time{}
	outs := []translate.Out{{Kind: translate.Note, Method: noteCancelAcked, Session: tr.sess.id,
		Body: []byte("the agent acknowledged the stop")}}
	return append(outs, t.endTurn(tr, "cancelled")...)
}

// cancelUnacked handles a stop the agent has not acknowledged within the
// cancel block's grace: it is reported, and the prompt, if still open, is
// answered cancelled as the cancel promises, with the turn kept, dropped,
// as for a refused stop.
func (t *translator) cancelUnacked(tr *turn) []translate.Out {
	tr.ackBy = time.Time{}
	body := fmt.Sprintf("profile %s: the agent did not acknowledge the stop within %s (no frame matched the cancel block's ack %s); it may still be running the turn, whose later frames are dropped",
		t.p.Name, tr.ackGrace, t.p.cancel.ack)
	outs := []translate.Out{{Kind: translate.Note, Method: noteCancelUnacked, Session: tr.sess.id, Body: []byte(body)}}
	outs = append(outs, t.withdrawPermission(tr)...)
	tr.refused = true
	tr.quietAt, tr.giveUpAt = time.Time{}, time.Time{}
	if tr.dropped {
		return outs
	}
	outs = append(outs, t.closeTools(tr.sess, "failed")...)
	tr.dropped = true
	return append(outs, reply(tr.ref, stopReasonBody("cancelled"), tr.sess.id))
}

func (t *translator) popTurn(tr *turn) {
	if tr.cancelled || tr.dropped {
		tr.sess.draining = true
	}
	if tr.keyed && t.p.turnKey.kept != "" {
		if len(t.ended) == maxEnded {
			t.ended = slices.Delete(t.ended, 0, 1)
		}
		t.ended = append(t.ended, tr.key)
	}
	tr.sess.turns = slices.DeleteFunc(tr.sess.turns, func(x *turn) bool { return x == tr })
	if tr.ex != nil {
		t.removeWaiting(tr.ex)
		delete(t.byID, strconv.FormatUint(tr.ex.id, 10))
	}
}

func (t *translator) removeWaiting(ex *exchange) {
	t.waiting = slices.DeleteFunc(t.waiting, func(x *exchange) bool { return x == ex })
}
