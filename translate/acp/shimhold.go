// What the shim holds back and lets go: prompt answers held through the
// quiet period, updates that came before their session was opened, and
// permission requests left pending when their turn ended.

package acp

import (
	"encoding/json"

	"github.com/acp-bridge/acp-bridge/translate"
)

// releaseHeld takes the prompt answers of session sid out of the quiet
// period's hold, in order, for a new prompt on the session.
func (s *Shim) releaseHeld(sid string) []translate.Out {
	var out []translate.Out
	keep := s.held[:0]
	for _, o := range s.held {
		if o.Session == sid {
			out = append(out, o)
			continue
		}
		keep = append(keep, o)
	}
	clear(s.held[len(keep):])
	s.held = keep
	s.session(sid).holding = false
	return out
}

// release appends the held early updates for session id (all of them when
// no session is being opened any more) as outputs after the answer.
func (s *Shim) release(id string, post []translate.Out) []translate.Out {
	keep := s.early[:0]
	for _, f := range s.early {
		env, _ := translate.ParseEnvelope(f)
		if env.SessionID == id || s.opening <= 0 {
			outs, _ := s.r.fromAgent(f, &env, nil)
			post = take(post, outs)
			continue
		}
		keep = append(keep, f)
	}
	s.early = keep
	return post
}

// withdraw answers "cancelled" to the permission requests of session sid
// that are still pending when its turn ends, and tells the editor to drop
// them.
func (s *Shim) withdraw(sid string, out []translate.Out) []translate.Out {
	if !s.on[iDanglingPermissions] {
		return out
	}
	for ref, psid := range s.permits {
		if psid != sid {
			continue
		}
		id, ok := s.r.callIDs[ref]
		if !ok {
			continue
		}
		delete(s.permits, ref)
		delete(s.r.callIDs, ref)
		delete(s.r.callRefs, key(id))
		s.withdrawn[ref] = true
		out = append(out,
			note(RuleDanglingPermissions, sid, "permission request %s was still pending when the turn ended", id),
			translate.Out{Kind: translate.Frame, Body: translate.ResultFrame(id, json.RawMessage(`{"outcome":{"outcome":"cancelled"}}`))},
			translate.Out{Kind: translate.CancelCall, Ref: ref})
	}
	return out
}
