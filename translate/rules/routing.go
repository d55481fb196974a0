// Routing a frame to its session and turn, and the state templates read.

package rules

import (
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

func (t *translator) session(id string) *session {
	if id == "" {
		return nil
	}
	for _, s := range t.sessions {
		if s.id == id {
			return s
		}
	}
	return nil
}

// route finds the session a frame belongs to: by the profile's route paths,
// else the session with a turn in progress, else the only session.
func (t *translator) route(frame []byte, env *translate.Envelope) *session {
	for _, p := range t.p.route {
		v := envGet(env, frame, p)
		if !v.Exists() {
			continue
		}
		for _, s := range t.sessions {
			if s.agentSession != "" && (s.agentSession == v.Str || s.agentSession == v.Raw) {
				return s
			}
		}
	}
	for _, s := range t.sessions {
		if len(s.turns) > 0 {
			return s
		}
	}
	if len(t.sessions) == 1 {
		return t.sessions[0]
	}
	return nil
}

// currentTurn is the oldest turn of sess still in progress (a dropped turn
// the agent has not finished comes before a newer live one).
func (t *translator) currentTurn(sess *session) *turn {
	if sess == nil || len(sess.turns) == 0 {
		return nil
	}
	return sess.turns[0]
}

// maxEnded is how many ended turns' keys a translator remembers.
const maxEnded = 64

// turnByKey finds the turn whose key (turn { key }) is v, and its session.
func (t *translator) turnByKey(v string) (*session, *turn) {
	for _, s := range t.sessions {
		for _, tr := range s.turns {
			if tr.keyed && tr.key == v {
				return s, tr
			}
		}
	}
	return nil, nil
}

func (t *translator) turnByRef(ref translate.Ref) *turn {
	for _, s := range t.sessions {
		for _, tr := range s.turns {
			if tr.ref == ref {
				return tr
			}
		}
	}
	return nil
}

type state struct {
	sess *session
	turn *turn
	// env is the frame's JSON-RPC envelope when one was read: the
	// fields it holds answer the lookups the rules make most.
	env *translate.Envelope
}

func (st *state) stateValue(name string) gjson.Result {
	if st == nil || st.sess == nil {
		if name == "$tool.output" {
			return gjson.Result{}
		}
		return gjson.Result{Type: gjson.False}
	}
	tl := st.sess.lastTool()
	switch name {
	case "$tool.open":
		if tl != nil {
			return gjson.Result{Type: gjson.True}
		}
		return gjson.Result{Type: gjson.False}
	case "$tool.output":
		if tl == nil {
			return gjson.Result{}
		}
		return gjson.Result{Type: gjson.String, Str: tl.output.String()}
	case "$turn.running":
		if st.sess.live() != nil {
			return gjson.Result{Type: gjson.True}
		}
		return gjson.Result{Type: gjson.False}
	}
	return gjson.Result{}
}

func (t *translator) evalEnv(frame, params []byte, sess *session, tl *tool) *evalEnv {
	e := &evalEnv{frame: frame, params: params, sess: sess, tool: tl, id: t.nextID, now: t.now, envVars: t.envVars}
	if t.cur != nil && len(frame) > 0 && len(frame) == len(t.cur.Frame) && &frame[0] == &t.cur.Frame[0] {
		e.frameParams = t.cur.Params
	}
	return e
}
