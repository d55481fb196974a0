package bridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/wire/reclaim"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// session is what the engine knows of one ACP session.
type session struct {
	id   string
	link *link
	cwd  string
	// dirs are the session's additionalDirectories (absolute paths), which
	// files served from disk may come from as well as cwd.
	dirs []string
	// prompts are the session/prompt requests still pending, oldest first.
	prompts []translate.Ref
	// queued are prompts waiting for the running turn (OneTurnQueue).
	queued []queuedPrompt
	// draining is set when the engine answered a prompt itself after the
	// cancel grace period: updates the agent still sends for that turn are
	// dropped until its own late answer arrives or the next prompt starts.
	draining bool
	// b is the durable-session state (durable.go); nil when off.
	b *bridged
}

// route picks the link for a message naming sessionID ("" for none).
func (e *engine) route(sessionID string) (*link, *translate.Error) {
	if s := e.sessions[sessionID]; s != nil {
		if s.link.down != nil {
			return e.reattach(s)
		}
		return s.link, nil
	}
	if sessionID != "" && e.b.Dialect.PerSession {
		return nil, translate.Errorf(translate.CodeInvalidParams,
			"unknown sessionId %q: no session with that id was created through this bridge; create one with session/new", sessionID)
	}
	return e.ensureControl()
}

// reattach is called when a request names a session whose agent link was
// lost. It returns the link to use, or the error to answer with.
//
// With durable sessions on, a session the bridge recorded never gets here:
// durableRequest (durable.go) re-attaches it first (the backend's own
// session/resume or load, or a new backend session primed with the
// transcript). Any other lost session stays lost, and says why and what to
// do.
func (e *engine) reattach(s *session) (*link, *translate.Error) {
	return nil, translate.Errorf(translate.CodeInternalError,
		"session %s was lost with its agent connection (%s): start a new session", s.id, s.link.down.Reason).
		With("sessionId", s.id)
}

// ensureControl returns the control link, dialling it again if it was lost
// (the link supervisor: a lost link comes back for the next request that
// needs it; the agent is initialized again before that request reaches it).
func (e *engine) ensureControl() (*link, *translate.Error) {
	if e.control != nil && e.control.down == nil {
		return e.control, nil
	}
	if e.b.Dialect.NoControlLink {
		e.control = e.newDetached()
		return e.control, nil
	}
	reconnect := e.control != nil
	e.control = e.newLink(Spawn{}, e.defaultBinding(), nil)
	e.control.control = true
	if reconnect {
		e.log.Info("dialling the agent again", "link", e.control.String(), "after", e.control.delay)
	}
	if e.init == initDone {
		e.replayInitialize(e.control)
	}
	return e.control, nil
}

// defaultBinding is the Bridge's own agent.
func (e *engine) defaultBinding() Binding {
	return Binding{Dialect: e.b.Dialect, NewTranslator: e.b.NewTranslator, Dial: e.b.Dial, Name: e.b.AgentName}
}

// bindSession asks the BindSession hook which agent a new session goes to.
func (e *engine) bindSession(method string, params []byte) (Binding, bool) {
	if e.b.BindSession == nil {
		return Binding{}, false
	}
	b, ok := e.b.BindSession(method, params)
	if ok && (b.NewTranslator == nil || b.Dial == nil) {
		e.log.Error("BindSession returned a binding without NewTranslator or Dial; using the default agent")
		return Binding{}, false
	}
	return b, ok
}

// newLink starts dialling an agent link in the background, after the
// reconnect backoff if earlier dials failed. Frames the translator produces
// before the dial completes wait in the link's queue. tr nil means a new
// translator of bind.
func (e *engine) newLink(spawn Spawn, bind Binding, tr translate.Translator) *link {
	if tr == nil {
		tr = bind.NewTranslator()
	}
	e.v2Link(tr)
	e.nextLinkID++
	ctx, cancel := context.WithCancel(e.ctx)
	l := &link{id: e.nextLinkID, spawn: spawn, bind: bind, tr: tr, calls: make(map[translate.Ref]string), cancel: cancel}
	l.out.init(e.queueBytes(), e.drained)
	if p, ok := tr.(translate.UpdatePasser); ok {
		l.pass = p.UpdateFilter()
		l.caughtUp = make(chan struct{}, 1)
	}
	l.delay = e.dialing.delay(time.Now())
	e.links = append(e.links, l)
	e.linkWG.Add(1)
	go e.runLink(ctx, l)
	e.log.Debug("agent link opening", "link", l.String(), "cwd", spawn.Cwd)
	return l
}

// runLink is the goroutine of one link (named so stack dumps read).
func (e *engine) runLink(ctx context.Context, l *link) {
	defer e.linkWG.Done()
	l.run(ctx, l.bind.Dial, e.inbox, e)
}

// newDetached makes the control "link" of a dialect that needs no agent for
// connection-level requests: a translator with no connection.
func (e *engine) newDetached() *link {
	e.nextLinkID++
	l := &link{id: e.nextLinkID, bind: e.defaultBinding(), tr: e.b.NewTranslator(), calls: make(map[translate.Ref]string),
		control: true, detached: true, up: true, cancel: func() {}}
	l.out.init(e.queueBytes(), nil)
	return l
}

func (e *engine) queueBytes() int {
	if e.b.QueueBytes > 0 {
		return e.b.QueueBytes
	}
	return defaultQueueBytes
}

// replayInitialize feeds a new link the editor's initialize, as an internal
// request, so that the agent behind it is initialized before anything else.
func (e *engine) replayInitialize(l *link) { e.initLink(l, nil) }

// initLink sends a new link the editor's initialize as an internal request
// and gates the link until it is answered: whatever the engine feeds the
// link meanwhile waits (see feed), so the agent sees initialize first and
// nothing else before its answer. then, if not nil, gets the answer.
func (e *engine) initLink(l *link, then func(translate.Out)) {
	e.nextRef++
	req := &request{ref: e.nextRef, method: "initialize", link: l, then: then}
	e.pending.add(req)
	l.initRef = req.ref
	e.feed(l, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: "initialize", Body: e.initParams})
}

// linkInitialized opens l's gate once its initialize is answered: the
// messages held for it are fed in order. When the agent refused the
// initialize, the requests held are failed with its words instead (sending
// them would only earn each the same refusal, in the agent's terms).
func (e *engine) linkInitialized(l *link, ref translate.Ref, o translate.Out) {
	if l.initRef != ref {
		return
	}
	l.initRef = 0
	gated := l.gated
	l.gated = nil
	for _, m := range gated {
		if l.down != nil {
			return // linkLost answered what depended on the link
		}
		if m.Kind == translate.Request {
			req := e.pending.get(m.Ref)
			if req == nil || req.retired {
				continue // answered meanwhile (a timeout, a cancel)
			}
			if o.Kind == translate.Fail {
				err := translate.Errorf(translate.CodeInternalError,
					"agent %s refused initialize on a new connection, so %s was not sent: %s", l.bind.displayName(), m.Method, errorMessage(o.Body))
				e.fail(req, err)
				e.afterFailure(req, err.JSON())
				continue
			}
		} else if o.Kind == translate.Fail {
			continue
		}
		e.feed(l, m)
	}
}

// openSessionLink opens the link of a session of its own (a per-session
// dialect, or an agent BindSession picked): the dialect may build the
// agent's command line from the request, the editor's initialize is
// replayed on the new link, then the request follows. sid is the session
// id the engine chose; an agent whose dialect is not per-session picks its
// own in its answer, and the session is known by that one from then on.
func (e *engine) openSessionLink(req *request, params json.RawMessage, sid string, bind Binding) {
	tr := bind.NewTranslator()
	spawn := Spawn{Cwd: req.cwd, Session: sid}
	msg := translate.Msg{Kind: translate.Request, Ref: req.ref, Method: req.method, Body: params, Session: sid, At: time.Now()}
	if sb, ok := tr.(translate.SpawnBuilder); ok {
		cmd, err := sb.BuildSpawn(msg)
		if err != nil {
			e.fail(req, translate.Errorf(translate.CodeInvalidParams, "%s: %v", req.method, err))
			return
		}
		spawn.Command = cmd
	}
	req.session = sid
	l := e.newLink(spawn, bind, tr)
	req.link = l
	e.sessions[sid] = &session{id: sid, link: l, cwd: req.cwd, dirs: req.dirs}
	e.replayInitialize(l)
	e.feed(l, msg)
}

func (e *engine) newSessionID() string {
	if e.b.NewSessionID != nil {
		return e.b.NewSessionID()
	}
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand doc)
	return "sess-" + hex.EncodeToString(b[:])
}

// promptStarted records a prompt in its session before it is routed.
func (e *engine) promptStarted(req *request, params json.RawMessage) {
	if e.sessions[req.session] == nil && !e.b.Dialect.PerSession && e.control != nil && e.control.down == nil {
		// A session the engine did not see created (session/fork, an
		// extension): it lives on the one agent link, and its prompts
		// still need cancel-grace tracking.
		e.sessions[req.session] = &session{id: req.session, link: e.control}
	}
	s := e.sessions[req.session]
	if s == nil {
		return
	}
	s.prompts = append(s.prompts, req.ref)
	e.streaming[s.id] = struct{}{} // (see refreshFast)
	if s.draining {
		e.log.Debug("new prompt ends the drop of late updates", "session", s.id)
		s.draining = false
	}
	e.onSession(SessionEvent{Kind: SessionPrompt, Session: s.id, Body: params})
}

// turnEnded tells the session hook a prompt was answered.
func (e *engine) turnEnded(req *request, body json.RawMessage, failed bool) {
	if req.method != "session/prompt" {
		return
	}
	if e.sessionHooked() {
		e.onSession(SessionEvent{Kind: SessionTurnEnded, Session: req.session, Body: body, Failed: failed})
	}
	if e.streamed >= reclaim.Threshold {
		// A long stream leaves its garbage in the heap, and the runtime
		// keeps the pages for minutes: hand them back now, in the
		// background, so that an idle bridge (or the next large message)
		// starts from its idle footprint, not from the stream's.
		reclaim.Release(e.streamed)
	}
	e.streamed = 0
}

// afterSuccess updates the engine's view of sessions from a successful answer
// and rewrites the answers the engine owns.
func (e *engine) afterSuccess(req *request, result json.RawMessage) (json.RawMessage, *translate.Error) {
	if t := bytes.TrimSpace(result); string(t) == "null" || len(t) == 0 {
		// ACP results are objects; older peers send null (acp-spec.md §2.1).
		// Only methods ACP defines: an unknown method's result is the
		// agent's business.
		if objectResults[req.method] && !e.b.DisabledRepairs[RepairObjectResults] {
			result = json.RawMessage("{}")
			e.repaired(RepairObjectResults, req.session, req.method+" answered null")
		}
	}
	switch req.method {
	case "initialize":
		return e.durableInitialized(req, result)
	case "session/new", "session/fork", "session/load", "session/resume":
		sid := req.session
		if req.method == "session/new" || req.method == "session/fork" {
			if id := gjson.GetBytes(result, "sessionId").Str; id != "" && req.link != nil && !req.link.bind.Dialect.PerSession {
				// The agent chose the id: forget the one the engine may
				// have filed a link of its own under.
				if s := e.sessions[sid]; s != nil && sid != id && s.link == req.link {
					delete(e.sessions, sid)
				}
				sid = id
			}
		}
		if sid == "" {
			break
		}
		agentID, owned := sid, false
		switch {
		case !e.durable():
		case req.method == "session/new" || req.method == "session/fork":
			sid, result, owned = e.claimNew(req, sid, result)
		case e.dur.held[sid]:
			delete(e.dur.held, sid)
			owned = true
		}
		if req.link != nil {
			delete(e.dur.gone, aliasKey{req.link, agentID}) // the agent's id names a new session now
		}
		if s := e.sessions[sid]; s == nil || s.link.down != nil || owned && s.b == nil {
			s = &session{id: sid, link: req.link, cwd: req.cwd, dirs: req.dirs}
			if old := e.sessions[sid]; old != nil {
				s.prompts, s.queued = old.prompts, old.queued
			}
			e.sessions[sid] = s
		}
		if owned {
			s := e.sessions[sid]
			b := e.bridgedOf(s)
			b.owned = true
			if agentID != sid {
				if other := e.sessions[agentID]; other != nil && other.link == req.link && other.b == nil {
					delete(e.sessions, agentID) // filed under the agent's id by openSessionLink
				}
				e.setBackend(s, agentID)
			}
		}
		result = e.sessionOpened(req, sid, result)
	}
	return result, nil
}

// afterAnswer acts on a success once the editor has been answered.
func (e *engine) afterAnswer(req *request, _ json.RawMessage) {
	if req.method != "session/close" {
		return
	}
	s := e.sessions[req.session]
	if s == nil {
		return
	}
	delete(e.sessions, req.session)
	e.onSession(SessionEvent{Kind: SessionClosed, Session: s.id})
	if !s.link.control {
		e.retireLink(s.link, "the session was closed")
	}
}

// afterFailure undoes what a failed request had started.
func (e *engine) afterFailure(req *request, errObj json.RawMessage) {
	switch req.method {
	case "initialize":
		e.initFailed(req, errObj)
	case "session/new", "session/load", "session/resume":
		if e.dur.held[req.session] {
			// The agent's own load failed: the session is free again.
			delete(e.dur.held, req.session)
			e.store().Release(req.session)
		}
		// A link opened for this session alone goes with it.
		if s := e.sessions[req.session]; s != nil && s.link == req.link && !s.link.control {
			delete(e.sessions, req.session)
			e.retireLink(s.link, req.method+" failed")
		}
	}
}

// --- link supervision ------------------------------------------------------------

// linkUp feeds the translator the news that its connection is established.
func (e *engine) linkUp(l *link) {
	if l.down != nil {
		return
	}
	l.up = true
	e.dialing.succeeded()
	e.log.Debug("agent link up", "link", l.String())
	e.feed(l, translate.Msg{Kind: translate.LinkUp})
}

// linkLost answers everything that depended on l (peers.md §c.2): pending
// editor requests get an error naming the cause, the editor is told to drop
// the requests l had made of it, and sessions on l are marked lost. The
// next request that needs a control link dials a new one.
func (e *engine) linkLost(l *link, err error) {
	if l.down != nil {
		return
	}
	var de *dialError
	if errors.As(err, &de) {
		e.dialing.failed(time.Now())
	}
	l.down = e.linkError(l, err)
	// What waited for the link's initialize is answered below, with the
	// pending requests that depend on the link.
	l.initRef, l.gated = 0, nil
	if l.closedByEngine() {
		e.log.Debug("agent link closed", "link", l.String(), "cause", l.down.Reason)
	} else {
		e.log.Error("agent link lost", "link", l.String(), "error", l.down.Reason)
	}
	e.stopWake(l)
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
	for _, s := range e.sessionsOn(l) {
		if e.v2.on {
			e.v2LinkLost(s.id, l.down)
		}
		e.onSession(SessionEvent{Kind: SessionLost, Session: s.id, Body: l.down.JSON()})
	}
	e.feed(l, translate.Msg{Kind: translate.LinkDown, Error: l.down.JSON()})
	e.closeLinkAsync(l)
	e.links = slices.DeleteFunc(e.links, func(x *link) bool { return x == l })
}

// linkError is the error that requests depending on l are answered with:
// the transport's own sentence (legacy names the URL or command and the
// cause), the agent's name in data.
func (e *engine) linkError(l *link, err error) *translate.Error {
	reason := err.Error()
	if errors.Is(err, context.Canceled) && e.ctx.Err() != nil {
		reason = "acp-bridge is shutting down"
	}
	name := l.bind.Name
	if name == "" {
		name = "agent"
	}
	return translate.Errorf(translate.CodeInternalError, "%s", reason).With("agent", name)
}

// sessionsOn returns the sessions that live on l, in id order.
func (e *engine) sessionsOn(l *link) []*session {
	var out []*session
	for _, s := range e.sessions {
		if s.link == l {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *session) int { return strings.Compare(a.id, b.id) })
	return out
}

// retireLink closes a link the engine no longer needs.
func (e *engine) retireLink(l *link, why string) {
	if l.down != nil || l.detached {
		return
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	e.linkLost(l, errors.New(why))
}

// armWake arms the translator's Timer: a Tick after d. A new Timer output
// replaces the pending one.
func (e *engine) armWake(l *link, d time.Duration) {
	e.stopWake(l)
	l.wake = time.AfterFunc(d, func() {
		e.post(func() {
			if l.down == nil {
				l.wake = nil
				e.feed(l, translate.Msg{Kind: translate.Tick})
			}
		})
	})
}

func (e *engine) stopWake(l *link) {
	if l.wake != nil {
		l.wake.Stop()
		l.wake = nil
	}
}

// cancelEditorCall tells the editor to drop a request the agent no longer
// wants answered, and forgets it: a late answer is then dropped.
func (e *engine) cancelEditorCall(c *call) {
	key := idKey(c.id)
	delete(e.calls, key)
	delete(c.link.calls, c.ref)
	params, _ := json.Marshal(map[string]json.RawMessage{"requestId": c.id})
	e.writeEditor(translate.NotificationFrame("$/cancel_request", params))
}

func sortedKeys(m map[translate.Ref]string) []string {
	refs := make([]translate.Ref, 0, len(m))
	for ref := range m {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	keys := make([]string, len(refs))
	for i, ref := range refs {
		keys[i] = m[ref]
	}
	return keys
}
