package bridge

import (
	"bytes"
	"encoding/json"

	"github.com/acp-bridge/acp-bridge/internal/wire/ndjson"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// What the editor sends: requests routed to a session's link, notifications
// (cancel among them), and answers to the calls the engine made of it.

// tooLong answers a line over the size limit. The id is recovered from the
// start of the line when it comes before the large payload, as it does in
// the SDKs' serialisations.
func (e *engine) tooLong(err *ndjson.TooLongError) {
	id := json.RawMessage("null")
	if r := gjson.GetBytes(err.Head, "id"); r.Exists() && (r.Type == gjson.Number || r.Type == gjson.String) {
		id = json.RawMessage(r.Raw)
	} else if tid, ok := idAtEnd(err.Tail); ok {
		id = tid // the id came after the payload, as the last member
	}
	// When the id cannot be found the answer has id null, the JSON-RPC rule
	// for a request whose id cannot be read. Staying silent could leave an
	// editor request waiting forever.
	e.log.Warn("editor message over the size limit; answered with an error", "limit", err.Max, "id", string(id),
		"method", gjson.GetBytes(err.Head, "method").Str)
	e.writeEditor(translate.ErrorFrame(id, translate.Errorf(translate.CodeInvalidRequest,
		"message larger than the %d-byte limit: it was not read; raise --max-message (max_message in the config) or send less", err.Max).JSON()))
}

// editorLine handles one line read from the editor.
func (e *engine) editorLine(frame []byte) {
	if !e.v2.frontChosen && !e.v2.chooseFront(frame) {
		return
	}
	if e.v2.on {
		e.v2.v2FromEditor(frame) // relayed (v2relay.go)
		return
	}
	if e.v2.trying && e.v2.v2Line(frame) {
		return
	}
	if e.v2.front == nil {
		e.fromEditor(frame)
		return
	}
	// The tap and a trace record what crossed the editor hop: the v2
	// message, not the front's v1 translation of it.
	e.tappedFromEditor(frame)
	e.v2.viaFront = true
	e.v2.applyFront(e.v2.front.FromEditor(frame))
	e.v2.viaFront = false
}

func (e *engine) fromEditor(frame []byte) {
	defer e.afterLarge(len(frame))
	if !e.v2.viaFront {
		e.tappedFromEditor(frame)
	}
	env, perr := translate.ParseEnvelope(frame)
	if perr == nil && env.Version != "2.0" {
		perr = translate.Errorf(translate.CodeInvalidRequest, `"jsonrpc" must be "2.0"`)
	}
	if perr != nil {
		if perr.Code != translate.CodeParseError && env.ID == nil && env.Method != "" {
			e.log.Warn("invalid notification from the editor ignored", "error", perr)
			return
		}
		id := env.ID
		if perr.Code == translate.CodeParseError {
			id = recoverID(frame, perr)
		}
		if id == nil {
			id = json.RawMessage("null")
		}
		e.log.Warn("invalid message from the editor", "error", perr)
		e.writeEditor(translate.ErrorFrame(id, perr.JSON()))
		return
	}
	if e.init.state == initPending && !env.IsResponse() {
		// An editor may pipeline session/new (or even a second initialize)
		// behind initialize: hold it rather than refuse it, and keep the
		// order. Responses to the agent's calls need no initialize.
		e.held = append(e.held, frame)
		return
	}
	switch {
	case env.IsResponse():
		e.editorResponse(&env)
	case env.IsNotification():
		e.editorNotification(&env)
	default:
		e.editorRequest(&env)
	}
}

// tappedFromEditor shows the tap and the trace log a message the editor
// sent.
func (e *engine) tappedFromEditor(frame []byte) {
	e.tap(TapEvent{Hop: EditorHop, Inbound: true, Message: frame})
	if e.log.IsTrace() {
		e.log.Trace("editor → bridge", "message", truncate(frame, 2048))
	}
}

func (e *engine) editorRequest(env *translate.Envelope) {
	key := idKey(env.ID)
	if other := e.pending.byEditorID(key); other != nil {
		// Two requests in flight with one id cannot both be answered
		// unambiguously, and a $/cancel_request could reach the wrong one.
		// Answer the newcomer; the first keeps its own answer.
		e.log.Warn("editor reused the id of a pending request", "id", string(env.ID), "pending", other.method, "new", env.Method)
		e.writeEditor(translate.ErrorFrame(env.ID, translate.Errorf(translate.CodeInvalidRequest,
			"request id %s is already in use by a pending %s request: ids must be unique among requests in flight", env.ID, other.method).JSON()))
		return
	}
	e.nextRef++
	req := &request{
		ref:    e.nextRef,
		id:     bytes.Clone(env.ID),
		key:    key,
		method: env.Method,
	}
	e.pending.add(req)

	if err := checkParams(env.Method, env.Params); err != nil {
		e.fail(req, err)
		return
	}
	if env.Method == "initialize" {
		e.initialize(req, env.Params)
		return
	}
	if e.init.state != initDone {
		e.fail(req, notInitialized(env.Method, e.init.err))
		return
	}
	e.armTimeout(req)
	req.session = paramsSession(env.Params)
	if e.dur.durableRequest(req, env) {
		return
	}
	e.dispatch(req, env)
}

// dispatch routes an editor request to the link that serves it.
func (e *engine) dispatch(req *request, env *translate.Envelope) {
	if e.dur.refuseShadowed(req) {
		return
	}
	switch env.Method {
	case "session/new":
		req.cwd, req.dirs = gjson.GetBytes(env.Params, "cwd").Str, additionalDirs(env.Params)
		if bind, ok := e.b.bindSession(env.Method, env.Params, e.log); ok {
			e.sup.openSessionLink(req, env.Params, e.b.newSessionID(), bind)
			return
		}
		if e.b.Dialect.PerSession {
			e.sup.openSessionLink(req, env.Params, e.b.newSessionID(), e.b.defaultBinding())
			return
		}
	case "session/load", "session/resume":
		req.cwd, req.dirs = gjson.GetBytes(env.Params, "cwd").Str, additionalDirs(env.Params)
		if e.sessions[req.session] == nil {
			if bind, ok := e.b.bindSession(env.Method, env.Params, e.log); ok {
				e.sup.openSessionLink(req, env.Params, req.session, bind)
				return
			}
			if e.b.Dialect.PerSession {
				e.sup.openSessionLink(req, env.Params, req.session, e.b.defaultBinding())
				return
			}
		}
	case "session/prompt":
		if e.oneTurn(req, env) {
			return
		}
		e.promptStarted(req, env.Params)
	}
	l, err := e.route(req.session)
	if err != nil {
		e.fail(req, err)
		return
	}
	req.link = l
	e.feed(l, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: env.Method, Body: env.Params, Frame: env.Frame, IDAt: env.IDAt})
}

func (e *engine) editorNotification(env *translate.Envelope) {
	if e.init.state != initDone {
		e.log.Debug("notification before initialize ignored", "method", env.Method)
		return
	}
	if e.dur.durableNotification(env) {
		return
	}
	sid := paramsSession(env.Params)
	switch env.Method {
	case "$/cancel_request":
		e.cancelRequest(env.Params)
		return
	case "session/cancel":
		l, err := e.route(sid)
		if err != nil {
			e.log.Debug("session/cancel for an unroutable session ignored", "session", sid, "error", err)
			return
		}
		e.feed(l, translate.Msg{Kind: translate.Notification, Method: env.Method, Body: env.Params, Grace: e.b.cancelGrace()})
		e.armCancelGrace(sid)
		e.cancelQueued(sid)
		return
	}
	// Every other notification goes to the agent, known or not: the
	// dialect decides (a relay passes it on; a translator ignores what it
	// does not know: receivers may ignore unknown notifications).
	l, err := e.route(sid)
	if err != nil {
		e.log.Debug("notification for an unroutable session ignored", "method", env.Method, "error", err)
		return
	}
	e.feed(l, translate.Msg{Kind: translate.Notification, Method: env.Method, Body: env.Params, Frame: env.Frame})
}

func (e *engine) editorResponse(env *translate.Envelope) {
	key := idKey(env.ID)
	c := e.calls[key]
	if c == nil {
		e.log.Warn("response from the editor to an unknown request dropped", "id", string(env.ID))
		return
	}
	delete(e.calls, key)
	delete(c.link.calls, c.ref)
	if c.link.down != nil {
		return
	}
	e.feed(c.link, translate.Msg{Kind: translate.Response, Ref: c.ref, Body: env.Result, Error: env.Error})
}
