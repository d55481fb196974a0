package bridge

import (
	"encoding/json"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
)

// What the core promises the durable part (sessionHooks, durable.go) that
// it does not already do for itself: its own requests, a paused deadline,
// and the other parts' operations the durable part needs.

var _ sessionHooks = (*engine)(nil)

// internal sends l's agent a request of the bridge's own; then gets the
// answer, or the error that ended it.
func (e *engine) internal(l *link, method string, params json.RawMessage, sid string, then func(translate.Out)) {
	e.nextRef++
	req := &request{ref: e.nextRef, method: method, link: l, session: sid, then: then}
	e.pending.add(req)
	e.armTimeout(req)
	e.feed(l, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: method, Body: params, Session: sid, At: time.Now()})
}

// pauseTimeout takes req's deadline away; rearm gives it a fresh one.
func (e *engine) pauseTimeout(req *request) (rearm func()) {
	e.disarm(req)
	return func() { e.armTimeout(req) }
}

// controlLink is the shared link: ensured (dialled again) with open.
func (e *engine) controlLink(open bool) (*link, *translate.Error) {
	if !open {
		return e.control, nil
	}
	return e.sup.ensureControl()
}

// openLink opens a link of a session's own and initializes it.
func (e *engine) openLink(spawn Spawn, bind Binding, tr translate.Translator, then func(*link, translate.Out)) {
	l := e.sup.newLink(spawn, bind, tr)
	e.sup.initLink(l, func(o translate.Out) { then(l, o) })
}

// retireLink closes a link no session needs any more.
func (e *engine) retireLink(l *link, why string) { e.sup.retireLink(l, why) }

// relayingV2 reports whether a v2 editor is relayed to a v2 agent.
func (e *engine) relayingV2() bool { return e.v2.on }

// v2Running reports whether a relayed v2 session's turn runs.
func (e *engine) v2Running(sid string) bool { return e.v2.v2Running(sid) }

// v2EndTurns ends a relayed v2 session's turn before it is closed.
func (e *engine) v2EndTurns(s *session, why string) { e.v2.v2EndTurns(s, why) }
