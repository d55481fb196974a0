package bridge

import (
	"encoding/json"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
)

// The engine's side of its parts' interfaces (sessionHooks, durable.go;
// linkHooks, supervise.go; v2Hooks, v2relay.go; each method's promise is
// written there): what the core does for a part beyond what it does for
// itself anyway (its own requests, a paused deadline, a new link's
// initialize, what depends on a lost link). The durable part asks the
// other parts what it needs of them itself (linkOpener, v2Turns;
// durable.go), and so does the supervisor (v2Links, supervise.go).

var (
	_ sessionHooks = (*engine)(nil)
	_ linkHooks    = (*engine)(nil)
	_ v2Hooks      = (*engine)(nil)
)

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

// editorInitialized reports whether the editor's initialize was answered.
func (e *engine) editorInitialized() bool { return e.init.state == initDone }

// initLink sends a new link the editor's initialize as an internal request
// and gates the link until it is answered: whatever the engine feeds the
// link meanwhile waits (see feed), so the agent sees initialize first and
// nothing else before its answer. then, if not nil, gets the answer.
func (e *engine) initLink(l *link, then func(translate.Out)) {
	e.nextRef++
	req := &request{ref: e.nextRef, method: "initialize", link: l, then: then}
	e.pending.add(req)
	l.initRef = req.ref
	e.feed(l, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: "initialize", Body: e.init.params})
}

// linkDown answers everything that depended on l, now down (no request
// may wait forever on an agent that is gone): pending editor requests get
// an error naming the cause, the editor is told to drop the requests l had
// made of it, and sessions on l are reported lost.
func (e *engine) linkDown(l *link) {
	for _, req := range e.pending.inOrder() {
		if req.link == l {
			e.fail(req, l.down)
			e.afterFailure(req, l.down.JSON())
		}
	}
	for _, key := range sortedKeys(l.calls) {
		if c := e.calls[key]; c != nil {
			e.cancelEditorCall(c)
		}
	}
	for _, s := range e.sessions.on(l) {
		if e.v2.on {
			e.v2.v2LinkLost(s.id, l.down)
		}
		e.dur.onSession(SessionEvent{Kind: SessionLost, Session: s.id, Body: l.down.JSON()})
	}
}
