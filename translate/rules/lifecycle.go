// What the translator does because the link came up or time passed rather
// than because a frame arrived: the profile's connect phase, heartbeats, and
// each turn's quiet warning and give-up deadline.

package rules

import (
	"fmt"
	"slices"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
)

func (t *translator) linkUp() []translate.Out {
	if t.p.connect == nil || t.conn != connWaitUp {
		return t.startHeartbeat(nil)
	}
	var outs []translate.Out
	outs = append(outs, frameOuts(t.evalFrames(t.p.connect.send, t.evalEnv(nil, nil, nil, nil), true))...)
	if t.p.connect.expect != nil {
		t.conn = connWaitFrame
		return append(outs, translate.Out{Kind: translate.Note, Method: noteConnectExpect,
			Body: []byte(fmt.Sprintf("profile %s waits for the agent's connect frame matching %s", t.p.Name, t.p.connect.expect))})
	}
	return t.ready(outs)
}

// ready ends the connect phase: held editor messages are handled now.
func (t *translator) ready(outs []translate.Out) []translate.Out {
	t.conn = connOpen
	outs = t.startHeartbeat(outs)
	held := t.held
	t.held = nil
	for _, m := range held {
		if m.Kind == translate.Request {
			outs = append(outs, t.request(m)...)
		} else {
			outs = append(outs, t.notification(m)...)
		}
	}
	return outs
}

func (t *translator) startHeartbeat(outs []translate.Out) []translate.Out {
	if t.p.heartbeat != nil && t.nextBeat.IsZero() {
		t.nextBeat = t.now.Add(t.p.heartbeat.every)
	}
	return outs
}

// tick sends due heartbeats and ends turns whose silence ran out.
func (t *translator) tick() []translate.Out {
	var outs []translate.Out
	if hb := t.p.heartbeat; hb != nil && !t.nextBeat.IsZero() && !t.now.Before(t.nextBeat) {
		outs = append(outs, frameOuts(t.evalFrames(hb.send, t.evalEnv(nil, nil, nil, nil), true))...)
		t.nextBeat = t.now.Add(hb.every)
	}
	for _, s := range slices.Clone(t.sessions) {
		for _, tr := range slices.Clone(s.turns) {
			if !tr.ackBy.IsZero() && !t.now.Before(tr.ackBy) {
				outs = append(outs, t.cancelUnacked(tr)...)
				continue
			}
			switch {
			case t.p.silence > 0 && !tr.deadline.IsZero() && !t.now.Before(tr.deadline):
				outs = append(outs, t.endTurn(tr, t.p.silenceTo)...)
				continue
			case tr.dropped:
				// Answered already and watched for nothing but its end: a
				// deadline left set would be past at every later tick,
				// and wake would ask for a tick a millisecond on, forever.
				tr.quietAt, tr.giveUpAt, tr.reportBy = time.Time{}, time.Time{}, time.Time{}
				continue
			case !tr.reportBy.IsZero() && !t.now.Before(tr.reportBy):
				// The agent sent no (more) report of the refused call in
				// time: the refusal ends the turn, as its rule says.
				outs = append(outs, t.endTurn(tr, "end_turn")...)
				continue
			case !tr.giveUpAt.IsZero() && !t.now.Before(tr.giveUpAt):
				msg := fmt.Sprintf("profile %s: no frame of the turn matched a rule for %s; the turn is given up", t.p.Name, t.p.giveUp)
				if tr.unmatched != nil {
					msg += fmt.Sprintf(" (the last frame no rule matched: %s)", tr.unmatched)
				}
				outs = append(outs, t.failTurn(tr, translate.Errorf(translate.CodeInternalError, "%s", msg).JSON())...)
				continue
			}
			if !tr.quietAt.IsZero() && !t.now.Before(tr.quietAt) {
				tr.quietAt = time.Time{} // once, until a frame matches again
				body := fmt.Sprintf("no frame of the turn matched a rule of profile %s for %s", t.p.Name, t.p.quiet)
				if tr.unmatched != nil {
					body += fmt.Sprintf("; the last frame no rule matched: %s", tr.unmatched)
				} else {
					body += "; the agent sent nothing no rule matched either"
				}
				outs = append(outs, translate.Out{Kind: translate.Note, Method: noteTurnQuiet, Session: s.id, Body: []byte(body)})
			}
		}
	}
	return outs
}

// matched rearms tr's quiet warning and give-up deadline: a frame of the
// turn matched a rule (or the turn just started).
func (t *translator) matched(tr *turn) {
	if tr == nil || tr.dropped {
		return
	}
	if t.p.quiet > 0 {
		tr.quietAt = t.now.Add(t.p.quiet)
	}
	if t.p.giveUp > 0 {
		tr.giveUpAt = t.now.Add(t.p.giveUp)
	}
	tr.unmatched = nil
}

// wake appends a Timer output when the next deadline moved.
func (t *translator) wake(outs []translate.Out) []translate.Out {
	var next time.Time
	if !t.nextBeat.IsZero() {
		next = t.nextBeat
	}
	for _, s := range t.sessions {
		for _, tr := range s.turns {
			for _, d := range [...]time.Time{tr.deadline, tr.quietAt, tr.giveUpAt, tr.ackBy, tr.reportBy} {
				if !d.IsZero() && (next.IsZero() || d.Before(next)) {
					next = d
				}
			}
		}
	}
	if next.IsZero() || next.Equal(t.armed) {
		return outs
	}
	t.armed = next
	d := next.Sub(t.now)
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return append(outs, translate.Out{Kind: translate.Timer, Delay: d})
}
