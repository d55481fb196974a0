package bridge

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

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

// sessionTable is the engine's sessions by the editor's id. The core and
// the durable part (durableSessions) share it: both hold the same map, and
// both read and write it on the loop only.
type sessionTable map[string]*session

// on returns the sessions that live on l, in id order.
func (t sessionTable) on(l *link) []*session {
	var out []*session
	for _, s := range t {
		if s.link == l {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *session) int { return strings.Compare(a.id, b.id) })
	return out
}

// route picks the link for a message naming sessionID ("" for none).
func (e *engine) route(sessionID string) (*link, *translate.Error) {
	if s := e.sessions[sessionID]; s != nil {
		if s.link.down != nil {
			// A session the bridge recorded never gets here: durable
			// sessions re-attach it first (durableRequest). Any other
			// lost session stays lost, and says why and what to do.
			return nil, translate.Errorf(translate.CodeInternalError,
				"session %s was lost with its agent connection (%s): start a new session", s.id, s.link.down.Reason).
				With("sessionId", s.id)
		}
		return s.link, nil
	}
	if sessionID != "" && e.b.Dialect.PerSession {
		return nil, translate.Errorf(translate.CodeInvalidParams,
			"unknown sessionId %q: no session with that id was created through this bridge; create one with session/new", sessionID)
	}
	return e.sup.ensureControl()
}

// promptStarted records a prompt in its session before it is routed.
func (e *engine) promptStarted(req *request, params json.RawMessage) {
	if e.sessions[req.session] == nil && !e.b.Dialect.PerSession && e.sup.control != nil && e.sup.control.down == nil {
		// A session the engine did not see created (session/fork, an
		// extension): it lives on the one agent link, and its prompts
		// still need cancel-grace tracking.
		e.sessions[req.session] = &session{id: req.session, link: e.sup.control}
	}
	s := e.sessions[req.session]
	if s == nil {
		return
	}
	s.prompts = append(s.prompts, req.ref)
	if s.draining {
		e.log.Debug("new prompt ends the drop of late updates", "session", s.id)
		s.draining = false
	}
	e.dur.onSession(SessionEvent{Kind: SessionPrompt, Session: s.id, Body: params, ref: req.ref})
}

// turnEnded tells the session hook a prompt was answered.
func (e *engine) turnEnded(req *request, body json.RawMessage, failed bool) {
	if req.method != "session/prompt" {
		return
	}
	if e.dur.sessionHooked() {
		e.dur.onSession(SessionEvent{Kind: SessionTurnEnded, Session: req.session, Body: body, Failed: failed, ref: req.ref})
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
		// ACP results are objects; older peers send null.
		// Only methods ACP defines: an unknown method's result is the
		// agent's business.
		if objectResults[req.method] && !e.b.DisabledRepairs[RepairObjectResults] {
			result = json.RawMessage("{}")
			e.repaired(RepairObjectResults, req.session, req.method+" answered null")
		}
	}
	switch req.method {
	case "initialize":
		e.dur.learnCaps(req.link, result)
		out, err := e.initialized(req.link, result)
		if err != nil {
			return out, err
		}
		return e.dur.advertised(out), nil
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
		case !e.dur.on():
		case req.method == "session/new" || req.method == "session/fork":
			sid, result, owned = e.dur.claimNew(req, sid, result)
		case e.dur.held[sid] != nil:
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
			b := e.dur.bridgedOf(s)
			b.owned = true
			if agentID != sid {
				if other := e.sessions[agentID]; other != nil && other.link == req.link && other.b == nil {
					delete(e.sessions, agentID) // filed under the agent's id by openSessionLink
				}
				e.dur.setBackend(s, agentID)
			}
		}
		result = e.dur.sessionOpened(req, sid, result)
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
	e.dur.onSession(SessionEvent{Kind: SessionClosed, Session: s.id})
	if !s.link.control {
		e.sup.retireLink(s.link, "the session was closed")
	}
}

// afterFailure undoes what a failed request had started.
func (e *engine) afterFailure(req *request, errObj json.RawMessage) {
	switch req.method {
	case "initialize":
		e.initFailed(req, errObj)
	case "session/new", "session/load", "session/resume":
		if e.dur.held[req.session] != nil {
			// The agent's own load failed: the session is free again.
			delete(e.dur.held, req.session)
			e.dur.store().Release(req.session)
		}
		// A link opened for this session alone goes with it.
		if s := e.sessions[req.session]; s != nil && s.link == req.link && !s.link.control {
			delete(e.sessions, req.session)
			e.sup.retireLink(s.link, req.method+" failed")
		}
	}
}

// --- link supervision ------------------------------------------------------------

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
