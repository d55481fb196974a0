package bridge

// Durable sessions: the bridge's own session/list, load, resume, close and
// delete for every backend, built on the transcript store (bridge/store),
// and the re-attaching of a session whose backend is gone (a lost link, an
// idle backend closed, a bridge restarted).
//
// A session the engine knows through the store is "bridged": the editor's
// session id stays the same for its whole life, whatever the backend
// session behind it. When a backend session has to be opened again the
// engine asks, in this order, for the backend's own session/resume, its own
// session/load (whose replayed updates are dropped: the editor already has
// the history), or a new backend session, primed with a context preamble
// built from the transcript on the next prompt. A backend that answers the
// new session with an id of its own gets it mapped: the engine rewrites
// sessionId both ways for that session (such messages are re-encoded, so
// their member order may change).
//
// session/list is answered from the store (sessions the bridge has
// recorded, newest first), not from the agent. session/load replays the
// transcript (user_message_chunk, agent chunks, tool calls in their final
// state, plans) before its answer, except for a relayed ACP agent that
// advertises loadSession itself: then its own load is used and it replays.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// Durable configures the bridge's durable sessions (Bridge.Sessions).
type Durable struct {
	// Store keeps the transcripts; required.
	Store *store.Store
	// Agents are the agents a session can be switched between, by Name;
	// the Bridge's own agent (AgentName) need not be listed. With two or
	// more, every session offers an "agent" config option.
	Agents []Binding
	// NoPreamble: a new backend session for an existing transcript gets no
	// history (by default its first prompt is preceded by a text block
	// holding the transcript, up to PreambleBytes).
	NoPreamble bool
	// PreambleBytes bounds the preamble (its tail is kept); 0 means 32 KiB.
	PreambleBytes int
	// ListAll makes session/list list every session in the store, not
	// only those of the agents this bridge serves.
	ListAll bool
	// IdleTimeout closes a session's backend (its own agent link) after
	// that long without a turn; the session re-attaches on its next
	// request. 0 means never.
	IdleTimeout time.Duration
}

// bridged is what the engine keeps of a durable session.
type bridged struct {
	// backend is the backend's session id when it is not the editor's,
	// on backendLink.
	backend     string
	backendLink *link
	// resumeID is the agent's own id of this session recorded by an
	// earlier bridge process: the next attach asks the agent to resume
	// or load that one.
	resumeID string
	bind     Binding
	// mcp are the mcpServers of the last open, sent again on re-attach.
	mcp json.RawMessage
	// attaching is set while a backend session is being opened; waiters
	// run when it is (nil) or could not be (the error).
	attaching bool
	waiters   []func(*translate.Error)
	// primer is the history preamble for the next prompt.
	primer string
	// suppress drops the updates of a backend's own session/load.
	suppress bool
	idle     *time.Timer
	// switched: the agent was just switched; its backend session is new.
	switched bool
	// updPrefix is how params naming this session start (recordUpdate).
	updPrefix []byte
	// owned: this bridge holds the session in the store (it created it,
	// or loaded or resumed it), so the session's records are written. A
	// session the engine merely routes (an id the editor named that no
	// bridge opened, an agent's session nobody recorded) is never recorded.
	owned bool
}

// aliasKey names a backend session: its id on the link that serves it.
type aliasKey struct {
	link *link
	id   string
}

// durableState is the engine's durable-session state (loop-owned).
type durableState struct {
	// alias maps a backend session id, on the link that serves it, to
	// the session it is: agents on different links (another agent, a
	// restarted one) hand out the same ids, and one link's "s-1" must
	// never reach another session.
	alias map[aliasKey]*session
	caps  map[string]json.RawMessage // agent name → its agentCapabilities
	// opening is the method of the session answer being recorded.
	opening string
	// suppressing counts sessions whose backend is replaying a load.
	suppressing int
	// gone are backend sessions on the shared link of sessions closed
	// here: their late updates are dropped (forgetBackend).
	gone map[aliasKey]bool
	// answers are prompt answers held until the store has written their
	// turn (holdForStore), oldest first; nextSeq numbers them.
	answers []heldAnswer
	nextSeq uint64
	// releasing is set while releaseAnswers writes them.
	releasing bool
	// held are sessions taken in the store for a load that the agent
	// serves itself (its own session/load), until it answers.
	held map[string]bool
	// lines gathers streamed updates for the store on the loop, with no
	// lock per update; the loop flushes it after every event it handles,
	// and store() before anything else reaches the store (order).
	lines *store.Lines
}

func (e *engine) durable() bool { return e.b.Sessions != nil && e.b.Sessions.Store != nil }

// store returns the session store, with every update recorded so far
// handed to it first, so that what the caller appends or reads comes after
// them.
func (e *engine) store() *store.Store {
	e.flushRecords()
	return e.b.Sessions.Store
}

// flushRecords hands the updates gathered for the store over to it.
func (e *engine) flushRecords() {
	if e.dur.lines != nil {
		e.dur.lines.Flush()
	}
}

// records returns the loop's Lines for streamed updates.
func (e *engine) records() *store.Lines {
	if e.dur.lines == nil {
		e.dur.lines = e.b.Sessions.Store.Lines()
	}
	return e.dur.lines
}

func (e *engine) bridgedOf(s *session) *bridged {
	if s.b == nil {
		s.b = &bridged{bind: s.link.bind, mcp: json.RawMessage("[]")}
		if s.b.bind.Name == "" {
			s.b.bind.Name = e.b.AgentName
		}
	}
	return s.b
}

// onSession records ev in the store, for a session this bridge holds there,
// and passes it to Bridge.OnSession.
func (e *engine) onSession(ev SessionEvent) {
	if e.durable() && ev.Session != "" {
		if s := e.sessions[ev.Session]; s != nil && s.b != nil && s.b.owned {
			e.record(s, ev)
		}
	}
	if e.b.OnSession != nil {
		e.b.OnSession(ev)
	}
}

// sessionHooked reports whether session events are wanted at all.
func (e *engine) sessionHooked() bool { return e.b.OnSession != nil || e.durable() }

// recordUpdate stores one session/update the editor is sent, scrubbed of
// secrets as the editor gets it: its params, or the whole notification as
// relayed (the store gives the params back on load; no parsing per
// streamed update here).
func (e *engine) recordUpdate(s *session, body []byte) {
	if s.b == nil || !s.b.owned {
		return
	}
	if e.b.Redact != nil {
		body = e.b.Redact(body) // as the editor is sent it: a secret an agent echoed is not kept
	}
	if update, ok := recordBody(body, sessionPrefix(s)); ok {
		e.records().SessionUpdate(s.id, update)
	} else {
		e.records().Update(s.id, update)
	}
}

// sessionPrefix is how the params of s's updates start as relays write
// them: {"sessionId":…,"update":.
func sessionPrefix(s *session) []byte {
	if s.b.updPrefix == nil {
		s.b.updPrefix = []byte(`{"sessionId":` + mustJSON(s.id) + `,"update":`)
	}
	return s.b.updPrefix
}

// recordBody returns what the store records of an update the editor is
// sent as body: the params' update member (ok) when the params are exactly
// prefix, update and "}" as relays write them; else the params, or the
// whole notification when it is not framed as relays frame it (the store
// gives the params back on load either way; no parsing per update).
func recordBody(body, prefix []byte) (_ []byte, ok bool) {
	if bytes.HasPrefix(body, updateHead) && len(body) > len(updateHead) {
		body = body[len(updateHead) : len(body)-1]
	}
	if bytes.HasPrefix(body, prefix) && len(body) > len(prefix) && body[len(body)-1] == '}' {
		return body[len(prefix) : len(body)-1], true
	}
	return body, false
}

func (e *engine) record(s *session, ev SessionEvent) {
	st := e.store()
	switch ev.Kind {
	case SessionOpened:
		// Listing data; a session just created got its meta from Create.
		if e.dur.opening != "session/new" && e.dur.opening != "session/fork" {
			st.Append(ev.Session, store.Record{Kind: store.KindMeta, Cwd: ev.Cwd, Agent: s.b.bind.Name, Dialect: s.b.bind.Dialect.Name})
		}
	case SessionPrompt:
		if s.b.idle != nil {
			s.b.idle.Stop()
		}
		st.Append(ev.Session, store.Record{Kind: store.KindPrompt, Body: ev.Body})
	case SessionTurnEnded:
		body := ev.Body
		if e.b.Redact != nil {
			body = e.b.Redact(body) // the agent's answer, as the editor is sent it
		}
		st.Append(ev.Session, store.Record{Kind: store.KindStop, Body: body, Failed: ev.Failed, Sync: true})
		e.armIdle(s)
	}
}

// sessionOpened tells the hooks a session/new, load or resume succeeded,
// and returns the answer with the bridge's config options added.
func (e *engine) sessionOpened(req *request, sid string, result json.RawMessage) json.RawMessage {
	if s := e.sessions[sid]; s != nil && e.durable() {
		b := e.bridgedOf(s)
		if m := gjson.GetBytes(req.params, "mcpServers"); m.IsArray() {
			b.mcp = json.RawMessage(m.Raw)
		}
		result = e.withAgentOptionResult(s, result)
	}
	e.dur.opening = req.method
	e.onSession(SessionEvent{Kind: SessionOpened, Session: sid, Cwd: req.cwd, Body: result})
	e.dur.opening = ""
	return result
}

// claimNew records a session the agent just created (session/new, fork)
// under an editor id no bridge has handed out before: the agent's own id
// when it is new to this engine and to the store, else the agent's id with
// a "~N" suffix, the agent's id then being this session's backend id (the
// engine maps the two both ways). Agents that number sessions per process
// hand out "sess-1" again after every restart; the editor must never be
// given an id it already has, or another window has. It returns the
// editor's id and the answer as the editor gets it.
func (e *engine) claimNew(req *request, agentID string, result json.RawMessage) (string, json.RawMessage, bool) {
	bind := e.defaultBinding()
	if req.link != nil {
		bind = req.link.bind
	}
	if bind.Name == "" {
		bind.Name = e.b.AgentName
	}
	linkKind := "shared"
	if req.link != nil && !req.link.control {
		linkKind = "own"
	}
	st := e.store()
	id := agentID
	for n := 1; ; n++ {
		if n > 1 {
			id = fmt.Sprintf("%s~%d", agentID, n)
		}
		if n > 1000 {
			e.log.Warn("session not recorded: no free session id", "session", agentID)
			return agentID, result, false
		}
		if s := e.sessions[id]; s != nil && (s.b != nil || s.link != req.link) && s.link.down == nil {
			continue // an editor id this engine already serves
		}
		err := st.Create(id, store.Meta{SessionID: id, Cwd: req.cwd, Agent: bind.Name, Dialect: bind.Dialect.Name, Backend: agentID, Link: linkKind})
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrTaken) {
			e.log.Warn("session not recorded: its transcript could not be created", "session", id, "error", err)
			return agentID, result, false
		}
	}
	if id != agentID {
		e.log.Info("the agent handed out a session id the editor may already know; the editor is given another", "agent_session", agentID, "session", id)
		result = withKey(result, "sessionId", json.RawMessage(mustJSON(id)))
	}
	return id, result, true
}

// --- initialize ------------------------------------------------------------------

// durableInitialized learns the agent's capabilities from its initialize
// answer and, with durable sessions on, advertises the bridge's own.
func (e *engine) durableInitialized(req *request, result json.RawMessage) (json.RawMessage, *translate.Error) {
	e.learnCaps(req.link, result)
	out, err := e.initialized(req.link, result)
	if err != nil || !e.durable() || e.v2.on {
		return out, err // v2's session list, resume and close are not optional
	}
	return advertise(out), nil
}

func (e *engine) learnCaps(l *link, result json.RawMessage) {
	if l == nil {
		return
	}
	if e.dur.caps == nil {
		e.dur.caps = map[string]json.RawMessage{}
	}
	name := l.bind.Name
	if name == "" {
		name = e.b.AgentName
	}
	e.dur.caps[name] = json.RawMessage(gjson.GetBytes(result, "agentCapabilities").Raw)
	l.queuesPrompts = queuesPrompts(result)
}

// queuesPrompts reports whether an initialize answer says the agent queues
// a prompt sent while a turn runs itself (claude-agent-acp:
// _meta.claudeCode.promptQueueing, at the top or in agentCapabilities).
func queuesPrompts(result json.RawMessage) bool {
	return gjson.GetBytes(result, "_meta.claudeCode.promptQueueing").Bool() ||
		gjson.GetBytes(result, "agentCapabilities._meta.claudeCode.promptQueueing").Bool()
}

// advertise adds loadSession and the session capabilities the bridge
// provides to an initialize answer.
func advertise(result json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(result, &m) != nil {
		return result
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(m["agentCapabilities"], &caps) != nil || caps == nil {
		caps = map[string]json.RawMessage{}
	}
	caps["loadSession"] = json.RawMessage("true")
	var sc map[string]json.RawMessage
	if json.Unmarshal(caps["sessionCapabilities"], &sc) != nil || sc == nil {
		sc = map[string]json.RawMessage{}
	}
	for _, k := range []string{"list", "resume", "close", "delete"} {
		if v, ok := sc[k]; !ok || string(v) == "null" {
			sc[k] = json.RawMessage("{}")
		}
	}
	caps["sessionCapabilities"], _ = json.Marshal(sc)
	m["agentCapabilities"], _ = json.Marshal(caps)
	out, err := json.Marshal(m)
	if err != nil {
		return result
	}
	return out
}

// --- editor requests -------------------------------------------------------------

// durableRequest serves the session methods the bridge provides itself. It
// reports whether it took req (then req is answered, now or later).
func (e *engine) durableRequest(req *request, env *translate.Envelope) bool {
	if !e.durable() {
		return false
	}
	switch env.Method {
	case "session/new":
		req.params = env.Params
		return false
	case "session/list":
		e.listSessions(req, env.Params)
		return true
	case "session/load", "session/resume":
		req.params = env.Params
		req.cwd, req.dirs = gjson.GetBytes(env.Params, "cwd").Str, additionalDirs(env.Params)
		if err := e.v2ReplayFrom(req); err != nil {
			e.fail(req, err)
			return true
		}
		e.openStored(req, env)
		return true
	case "session/close":
		return e.closeSession(req, env, false)
	case "session/delete":
		return e.closeSession(req, env, true)
	}
	s := e.sessions[req.session]
	if s == nil || s.b == nil {
		return false
	}
	if env.Method == "session/set_config_option" && e.switchable() && gjson.GetBytes(env.Params, "configId").Str == agentOption {
		e.switchAgent(req, s, env.Params)
		return true
	}
	if s.link.down == nil && !s.b.attaching && s.b.backend == "" && s.b.primer == "" {
		return false // live on its backend under its own id: the usual path
	}
	if env.Method == "session/prompt" {
		if e.b.OneTurn != OneTurnOff && len(s.prompts) > 0 && !s.link.queuesPrompts {
			// One turn at a time holds while a session re-attaches too.
			// Queue mode rejects here: a queued prompt is fed as the
			// editor sent it, and this session's backend ids differ.
			e.rejectSecondPrompt(req, s)
			return true
		}
		e.promptStarted(req, env.Params)
	}
	params, method := env.Params, env.Method // (env itself stays off the heap)
	e.whenAttached(s, func(err *translate.Error) {
		if req.retired {
			return
		}
		if err != nil {
			e.fail(req, err)
			return
		}
		body := e.toBackend(s, params)
		if method == "session/prompt" && s.b.primer != "" {
			body = withPreamble(body, s.b.primer)
			s.b.primer = ""
		}
		req.link = s.link
		e.feed(s.link, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: method, Body: body})
	})
	return true
}

// shadowed returns the session whose backend id on the agent's shared link
// is sid, when sid names no session of this engine: the editor means
// another session (one open in another window, one it remembers), and
// passed on as it is, sid would reach that other conversation on the
// agent. nil when there is none.
func (e *engine) shadowed(sid string) *session {
	if sid == "" || e.control == nil || len(e.dur.alias) == 0 {
		return nil
	}
	if s := e.sessions[sid]; s != nil && s.b != nil {
		return nil
	}
	return e.dur.alias[aliasKey{e.control, sid}]
}

// refuseShadowed answers a request naming a shadowed session id (see
// shadowed) as the agent would an id it does not have. It reports whether
// it did.
func (e *engine) refuseShadowed(req *request) bool {
	if !e.durable() || e.shadowed(req.session) == nil {
		return false
	}
	e.log.Warn("request for a session not open here refused: its id is another session's on the agent", "method", req.method, "session", req.session)
	e.fail(req, translate.Errorf(translate.CodeResourceNotFound,
		"session %s is not open in this bridge: load it first with session/load (session/list shows the recorded sessions)", req.session).With("sessionId", req.session))
	return true
}

// durableNotification routes an editor notification for a bridged session
// whose backend id differs or which has no live backend. It reports whether
// it took it.
func (e *engine) durableNotification(env *translate.Envelope) bool {
	if !e.durable() {
		return false
	}
	sid := paramsSession(env.Params)
	if e.shadowed(sid) != nil {
		e.log.Warn("notification for a session not open here dropped: its id is another session's on the agent", "method", env.Method, "session", sid)
		return true
	}
	s := e.sessions[sid]
	if s == nil || s.b == nil || (s.b.backend == "" && s.link.down == nil && !s.b.attaching) {
		return false
	}
	if s.link.down != nil || s.b.attaching {
		if env.Method == "session/cancel" {
			// Prompts still waiting for their backend end here.
			for _, ref := range slices.Clone(s.prompts) {
				if req := e.pending.get(ref); req != nil && req.link == nil {
					e.answer(req, json.RawMessage(`{"stopReason":"cancelled"}`))
				}
			}
		}
		return true
	}
	m := translate.Msg{Kind: translate.Notification, Method: env.Method, Body: e.toBackend(s, env.Params)}
	if env.Method == "session/cancel" {
		m.Grace = e.cancelGrace()
	}
	e.feed(s.link, m)
	if env.Method == "session/cancel" {
		e.armCancelGrace(s.id)
	}
	return true
}

// toBackend rewrites params for the session's backend id.
func (e *engine) toBackend(s *session, params json.RawMessage) json.RawMessage {
	if s.b.backend == "" {
		return params
	}
	id, _ := json.Marshal(s.b.backend)
	return withKey(params, "sessionId", id)
}

// unalias maps an agent's output for a backend session id that is not the
// editor's back to the editor's id. drop is set for updates of a backend's
// own load that the editor must not see twice.
func (e *engine) unalias(l *link, o translate.Out) (_ translate.Out, drop bool) {
	if !e.durable() || len(e.dur.alias) == 0 && e.dur.suppressing == 0 && len(e.dur.gone) == 0 {
		return o, false
	}
	sid := o.Session
	if sid == "" {
		sid = updateSession(o)
		if o.Kind == translate.Call {
			sid = gjson.GetBytes(o.Body, "sessionId").Str
		}
	}
	if e.dur.gone[aliasKey{l, sid}] && o.Method == "session/update" && e.sessions[sid] == nil {
		e.repaired(RepairDrainedTurnUpdates, sid, "update for a session closed here: "+gjson.GetBytes(o.Body, "update.sessionUpdate").Str)
		return o, true
	}
	s := e.dur.alias[aliasKey{l, sid}]
	if s == nil {
		if s = e.sessions[sid]; s == nil || s.b == nil || s.link != l {
			return o, false
		}
	}
	if s.b.suppress && o.Method == "session/update" {
		return o, true
	}
	if s.b.backend == "" || s.b.backend != sid || s.b.backendLink != l {
		return o, false
	}
	id, _ := json.Marshal(s.id)
	if o.Session != "" {
		o.Session = s.id
	}
	if o.Kind == translate.Forward {
		params := withKey(json.RawMessage(gjson.GetBytes(o.Body, "params").Raw), "sessionId", id)
		o.Body = withKey(o.Body, "params", params)
	} else {
		o.Body = withKey(o.Body, "sessionId", id)
	}
	return o, false
}

// --- list ------------------------------------------------------------------------

// listSessions serves session/list from the store: the sessions of the
// agents this bridge serves (the agent's own name, and every agent a
// session can switch to), or every session with Durable.ListAll. Several
// agents are listed by filtering pages of the whole store, so a page may
// hold fewer than listPage sessions; nextCursor still leads to the rest.
func (e *engine) listSessions(req *request, params json.RawMessage) {
	cwd := gjson.GetBytes(params, "cwd").Str
	cursor := gjson.GetBytes(params, "cursor").Str
	var agents map[string]bool
	agent := ""
	if !e.b.Sessions.ListAll {
		agents = map[string]bool{e.b.AgentName: true}
		for _, b := range e.b.Sessions.Agents {
			agents[b.Name] = true
		}
		if len(agents) == 1 {
			agent, agents = e.b.AgentName, nil
		}
	}
	var found []store.Meta
	var page func(cursor string)
	page = func(cursor string) {
		e.store().List(cwd, agent, cursor, listPage, func(metas []store.Meta, next string, err error) {
			e.post(func() {
				if req.retired {
					return
				}
				if err != nil {
					e.fail(req, translate.Errorf(translate.CodeInvalidParams, "session/list: %v", err))
					return
				}
				for _, m := range metas {
					if agents == nil || agents[m.Agent] {
						found = append(found, m)
					}
				}
				if next != "" && len(found) < listPage/2 {
					page(next)
					return
				}
				e.answerList(req, found, next)
			})
		})
	}
	page(cursor)
}

func (e *engine) answerList(req *request, metas []store.Meta, next string) {
	type info struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
		Title     string `json:"title,omitempty"`
		UpdatedAt string `json:"updatedAt"`
	}
	out := struct {
		Sessions   []info `json:"sessions"`
		NextCursor string `json:"nextCursor,omitempty"`
	}{Sessions: []info{}, NextCursor: next}
	for _, m := range metas {
		out.Sessions = append(out.Sessions, info{m.SessionID, m.Cwd, m.Title, m.UpdatedAt.UTC().Format(time.RFC3339Nano)})
	}
	b, _ := json.Marshal(out)
	e.answer(req, b)
}

// listPage is how many sessions one session/list answer holds.
const listPage = 50

// --- load and resume -------------------------------------------------------------

// openStored serves session/load or resume of a session the store may
// have. The session is taken for this bridge first (Store.Acquire: no
// other live bridge process may have it open), synchronously, so that a
// prompt pipelined behind the load waits for it; then its transcript is
// read off the loop and replayed (load) as it is read, and its backend
// re-attached. An id the store does not have is the agent's business.
func (e *engine) openStored(req *request, env *translate.Envelope) {
	sid := req.session
	if s := e.sessions[sid]; s != nil && s.b != nil && s.b.owned {
		e.reopen(req, s) // open here already
		return
	}
	st := e.store()
	meta, err := st.Acquire(sid)
	var busy *store.BusyError
	switch {
	case errors.Is(err, store.ErrDeleted):
		// The agent may still have its side of it; the user deleted the
		// conversation through the bridge, and it stays deleted.
		e.fail(req, translate.Errorf(translate.CodeResourceNotFound,
			"session %s was deleted: start a new session (session/list shows the ones there are)", sid).With("sessionId", sid))
		return
	case errors.Is(err, fs.ErrNotExist):
		e.dispatch(req, env) // not recorded by any bridge: the agent may know it
		return
	case errors.As(err, &busy):
		e.fail(req, translate.Errorf(translate.CodeInternalError,
			"session %s cannot be %s here: it is open in another acp-bridge process (pid %d), probably another editor window; close it there, or end that process, and try again",
			sid, pastTense(req.method), busy.PID).With("sessionId", sid).With("pid", busy.PID))
		return
	case err != nil:
		e.fail(req, translate.Errorf(translate.CodeInternalError,
			"session %s cannot be %s: its transcript cannot be opened (%v)", sid, pastTense(req.method), err).With("sessionId", sid))
		return
	}
	bind := e.agentNamed(meta.Agent)
	if req.method == "session/load" && bind.Dialect.Relay && bind.Name == e.b.AgentName &&
		(meta.Backend == "" || meta.Backend == sid) && gjson.GetBytes(e.dur.caps[bind.Name], "loadSession").Bool() {
		// The agent's own load of its own session, which replays itself.
		if e.dur.held == nil {
			e.dur.held = map[string]bool{}
		}
		e.dur.held[sid] = true
		e.dispatch(req, env)
		return
	}
	// A session the engine only routed so far (a prompt for an id it did
	// not know, sent before this load) becomes the recorded one.
	old := e.sessions[sid]
	s := &session{id: sid, link: e.parkedLink(bind), cwd: req.cwd, dirs: req.dirs}
	if old != nil {
		s.prompts, s.queued = old.prompts, old.queued
	}
	e.sessions[sid] = s
	s.b = &bridged{bind: bind, mcp: json.RawMessage("[]"), owned: true, attaching: true}
	if m := gjson.GetBytes(req.params, "mcpServers"); m.IsArray() {
		s.b.mcp = json.RawMessage(m.Raw)
	}
	if meta.Backend != sid && (meta.Agent == "" || meta.Agent == bind.Name) {
		s.b.resumeID = meta.Backend
	}
	e.log.Info("opening a recorded session", "session", sid, "method", req.method, "agent", bind.Name, "backend", meta.Backend)
	// The replay is the bridge's own work, however long the transcript:
	// the agent's answer is timed from the re-attach on.
	e.disarm(req)
	e.readHistory(sid, e.replays(req), func(primer string, skipped int, err error) {
		e.armTimeout(req)
		if skipped > 0 {
			e.log.Warn("session transcript had unreadable lines; they were skipped", "session", sid, "lines", skipped)
		}
		if err != nil {
			e.log.Warn("session transcript could not be read to its end", "session", sid, "error", err)
		}
		s.b.attaching = false
		if e.sessions[sid] != s {
			if !req.retired {
				e.fail(req, translate.Errorf(translate.CodeInternalError, "session %s was closed while it was being %s", sid, pastTense(req.method)).With("sessionId", sid))
			}
			return
		}
		e.attachHistory(s, primer, e.openAnswer(req, s, true))
	})
}

// reopen serves a load or resume of a session this bridge has open: a
// load replays its transcript again; the backend session stays. Requests
// for the session that arrive meanwhile (a prompt pipelined behind the
// load) wait until it is answered, as they do behind a first load: their
// updates must not read as history.
func (e *engine) reopen(req *request, s *session) {
	if s.b.attaching {
		s.b.waiters = append(s.b.waiters, func(err *translate.Error) {
			if req.retired {
				return
			}
			if err != nil {
				e.fail(req, err)
				return
			}
			e.reopen(req, s)
		})
		return
	}
	s.cwd, s.dirs = req.cwd, req.dirs
	if m := gjson.GetBytes(req.params, "mcpServers"); m.IsArray() {
		s.b.mcp = json.RawMessage(m.Raw)
	}
	finish := e.openAnswer(req, s, false)
	s.b.attaching = true
	e.readHistory(s.id, e.replays(req), func(primer string, _ int, _ error) {
		s.b.attaching = false
		if e.sessions[s.id] != s {
			if !req.retired {
				e.fail(req, translate.Errorf(translate.CodeInternalError, "session %s was closed while it was being %s", s.id, pastTense(req.method)).With("sessionId", s.id))
			}
			return
		}
		e.attachHistory(s, primer, finish)
	})
}

// openAnswer returns what answers a load or resume once the backend is
// attached: the modes, models and config options of the backend's answer,
// with the bridge's own. fresh: the session was opened by this request, so
// a failure forgets it (and gives it up in the store).
func (e *engine) openAnswer(req *request, s *session, fresh bool) func(*translate.Error, json.RawMessage) {
	return func(err *translate.Error, result json.RawMessage) {
		if req.retired {
			return
		}
		if err != nil {
			if fresh && e.sessions[s.id] == s {
				e.forget(s)
			}
			e.fail(req, err)
			return
		}
		out := map[string]json.RawMessage{}
		for _, k := range []string{"modes", "models", "configOptions"} {
			if v := gjson.GetBytes(result, k); v.Exists() {
				out[k] = json.RawMessage(v.Raw)
			}
		}
		if e.v2.on {
			e.v2Opened(req, s, result)
			return
		}
		b, _ := json.Marshal(out)
		b = e.sessionOpened(req, s.id, b)
		e.answer(req, b)
	}
}

// attachHistory attaches s's backend, priming a new backend session with
// primer, and then runs done and the waiters.
func (e *engine) attachHistory(s *session, primer string, done func(*translate.Error, json.RawMessage)) {
	if s.link.down == nil {
		e.attached(s, nil, nil, done)
		return
	}
	e.attach(s, primer, done)
}

func pastTense(method string) string {
	if method == "session/resume" {
		return "resumed"
	}
	return "loaded"
}

// parkedLink is the stand-in link of a session with no backend now.
func (e *engine) parkedLink(bind Binding) *link {
	return &link{bind: bind, calls: map[translate.Ref]string{}, cancel: func() {},
		down: translate.Errorf(translate.CodeInternalError, "the session has no backend session open")}
}

// agentNamed returns the binding of the agent called name, the Bridge's own
// agent when name is empty or unknown.
func (e *engine) agentNamed(name string) Binding {
	if e.b.Sessions != nil {
		for _, b := range e.b.Sessions.Agents {
			if b.Name == name && b.NewTranslator != nil && b.Dial != nil {
				return b
			}
		}
	}
	return e.defaultBinding()
}

// forget drops a session from the engine (not from the store, where it is
// given up for other bridge processes to open).
func (e *engine) forget(s *session) {
	delete(e.sessions, s.id)
	if s.b != nil {
		if s.b.owned {
			s.b.owned = false
			e.store().Release(s.id)
		}
		e.setBackend(s, "")
		if s.b.idle != nil {
			s.b.idle.Stop()
		}
	}
}

// heldAnswer is a prompt's answer waiting for the store (holdForStore).
type heldAnswer struct {
	seq     uint64
	msg     editorMsg
	session string
}

// holdForStore holds an answer until what the store was asked before it
// is done (Store.Written):
//   - a prompt's on a recorded session, until the prompt, the turn's
//     updates and its stop are written: the editor is never told a turn
//     ended that a kill -9 of the bridge could still lose, and another
//     window lists the session's title as soon as its first turn is
//     answered;
//   - session/close's, and a failed load's or resume's, until the session
//     is released: another window may open it the moment the editor sees
//     the answer.
//
// Answers go out in order; only those wait (a late update of the same
// session may overtake a prompt's answer, which an editor takes as part of
// the turn). It reports whether it took m.
func (e *engine) holdForStore(req *request, m editorMsg, failed bool) bool {
	if !e.durable() || e.stopping() {
		return false
	}
	switch req.method {
	case "session/prompt":
		if s := e.sessions[req.session]; s == nil || s.b == nil || !s.b.owned {
			return false
		}
	case "session/close":
	case "session/load", "session/resume":
		if !failed {
			return false
		}
	default:
		return false
	}
	e.dur.nextSeq++
	seq := e.dur.nextSeq
	e.dur.answers = append(e.dur.answers, heldAnswer{seq: seq, msg: m, session: req.session})
	e.store().Written(func() {
		e.recordedSeq.Store(seq) // barriers complete in order
		signal(e.recorded)
	})
	return true
}

// queueBehindAnswer keeps the editor's order of a session's messages while
// its answer is held: a message for a session with a held answer (an
// update the agent sent after answering) waits behind it, as the agent
// sent it. It reports whether it took m.
func (e *engine) queueBehindAnswer(m editorMsg, session string) bool {
	if e.dur.releasing || session == "" {
		return false
	}
	for _, a := range e.dur.answers {
		if a.session == session {
			e.dur.answers = append(e.dur.answers, heldAnswer{seq: e.dur.answers[len(e.dur.answers)-1].seq, msg: m, session: session})
			return true
		}
	}
	return false
}

// releaseAnswers writes the held answers whose records are written, and the
// messages queued behind them; all of them when all is set (shutdown: the
// store is closed after Serve, which writes everything).
func (e *engine) releaseAnswers(all bool) {
	done := e.recordedSeq.Load()
	n := 0
	e.dur.releasing = true
	for _, a := range e.dur.answers {
		if !all && a.seq > done {
			break
		}
		e.writeEditorSession(a.msg, a.session)
		n++
	}
	e.dur.releasing = false
	e.dur.answers = append(e.dur.answers[:0], e.dur.answers[n:]...)
}

// releaseSessions gives up, at shutdown, every session this bridge holds
// in the store, once what was recorded for it is written: another bridge
// process (the editor's next window) may open them.
func (e *engine) releaseSessions() {
	if !e.durable() {
		return
	}
	st := e.store()
	for _, s := range e.sessions {
		if s.b != nil && s.b.owned {
			s.b.owned = false
			st.Release(s.id)
		}
	}
	for sid := range e.dur.held {
		st.Release(sid)
	}
	e.dur.held = nil
}

// --- attaching a backend session -------------------------------------------------

// whenAttached runs f once s has a live backend session, attaching one if
// needed (the transcript read first, for the preamble).
func (e *engine) whenAttached(s *session, f func(*translate.Error)) {
	if s.link.down == nil && !s.b.attaching {
		f(nil)
		return
	}
	if s.b.attaching {
		s.b.waiters = append(s.b.waiters, f)
		return
	}
	s.b.attaching = true
	s.b.waiters = append(s.b.waiters, f)
	e.readHistory(s.id, false, func(primer string, _ int, _ error) {
		s.b.attaching = false
		e.attach(s, primer, func(*translate.Error, json.RawMessage) {})
	})
}

// attach opens a backend session for s: the backend's own resume or load
// when it advertises one, else a new session primed with the transcript.
// done gets the backend's answer.
func (e *engine) attach(s *session, history string, done func(*translate.Error, json.RawMessage)) {
	s.b.attaching = true
	e.attachWith(s, history, s.b.bind, "", done)
}

// attachMethod picks how a backend session is reopened on an agent whose
// capabilities are known: its own session/resume, its own session/load, or
// a new session (always, right after a switch of agents).
func (e *engine) attachMethod(s *session, bind Binding) string {
	caps := gjson.ParseBytes(e.dur.caps[bind.Name])
	switch {
	case s.b.switched:
	case e.v2.on:
		return "session/resume" // v2 agents must have it
	case caps.Get("sessionCapabilities.resume").IsObject():
		return "session/resume"
	case caps.Get("loadSession").Bool():
		return "session/load"
	}
	return "session/new"
}

// attachWith opens the backend session with method, or with the method the
// agent's capabilities call for when method is "". A link of the session's
// own is opened first when the session needs one; the method is sent once
// that link's initialize is answered (agents refuse requests before it),
// and chosen then, from the capabilities that answer declares.
func (e *engine) attachWith(s *session, history string, bind Binding, method string, done func(*translate.Error, json.RawMessage)) {
	if !bind.Dialect.PerSession && bind.Name == e.b.AgentName {
		l, err := e.ensureControl()
		if err != nil {
			e.attached(s, err, nil, done)
			return
		}
		if method == "" {
			method = e.attachMethod(s, bind)
		}
		e.attachOn(l, s, history, bind, method, done)
		return
	}
	tr := bind.NewTranslator()
	spawn := Spawn{Cwd: s.cwd, Session: s.id}
	if sb, ok := tr.(translate.SpawnBuilder); ok {
		m := method
		if m == "" {
			m = e.attachMethod(s, bind)
		}
		cmd, err := sb.BuildSpawn(translate.Msg{Kind: translate.Request, Method: m, Body: e.attachParams(s, m), Session: s.id, At: time.Now()})
		if err != nil {
			e.attached(s, translate.Errorf(translate.CodeInternalError, "could not start agent %s for session %s: %v", bind.displayName(), s.id, err), nil, done)
			return
		}
		spawn.Command = cmd
	}
	l := e.newLink(spawn, bind, tr)
	e.initLink(l, func(o translate.Out) {
		if e.stopping() {
			s.b.attaching, s.b.waiters = false, nil
			return
		}
		if o.Kind != translate.Reply {
			if l.down == nil {
				e.retireLink(l, "initialize failed")
			}
			e.attached(s, translate.Errorf(translate.CodeInternalError,
				"session %s could not be reopened on agent %s: its initialize failed (%s); its transcript is kept, so fix the agent and try again",
				s.id, bind.displayName(), errorMessage(o.Body)).With("sessionId", s.id), nil, done)
			return
		}
		e.learnCaps(l, o.Body)
		m := method
		if m == "" {
			m = e.attachMethod(s, bind)
		}
		e.attachOn(l, s, history, bind, m, done)
	})
}

// attachParams are the params of the request that reopens s's backend.
func (e *engine) attachParams(s *session, method string) json.RawMessage {
	params := map[string]any{"cwd": s.cwd, "mcpServers": s.b.mcp}
	if len(s.dirs) > 0 {
		params["additionalDirectories"] = s.dirs
	}
	if method != "session/new" {
		backendID := s.id
		switch {
		case s.b.resumeID != "":
			backendID = s.b.resumeID
		case s.b.backend != "":
			backendID = s.b.backend
		}
		params["sessionId"] = backendID
	}
	body, _ := json.Marshal(params)
	return body
}

// attachOn sends method on l, an initialized link, to open s's backend
// session there.
func (e *engine) attachOn(l *link, s *session, history string, bind Binding, method string, done func(*translate.Error, json.RawMessage)) {
	body := e.attachParams(s, method)
	if method == "session/load" {
		s.b.suppress = true
		e.dur.suppressing++
	}
	e.log.Info("re-attaching session", "session", s.id, "agent", bind.Name, "method", method, "backend", gjson.GetBytes(body, "sessionId").Str)
	e.internal(l, method, body, s.id, func(o translate.Out) {
		if s.b.suppress {
			s.b.suppress = false
			e.dur.suppressing--
		}
		if e.stopping() {
			// Shutdown answers every pending request itself.
			s.b.attaching, s.b.waiters = false, nil
			return
		}
		if o.Kind == translate.Fail {
			if method != "session/new" {
				// The backend no longer has it (restarted, expired): a new
				// backend session, primed with the transcript.
				e.log.Warn("the agent could not reopen its own session; starting a new one primed with the transcript",
					"session", s.id, "method", method, "backend", gjson.GetBytes(body, "sessionId").Str, "error", errorMessage(o.Body))
				if !l.control {
					e.retireLink(l, method+" failed")
				}
				e.attachWith(s, history, bind, "session/new", done)
				return
			}
			if !l.control {
				e.retireLink(l, "session/new failed")
			}
			e.attached(s, translate.Errorf(translate.CodeInternalError,
				"session %s could not be reopened on agent %s: %s; its transcript is kept, so fix the agent and try again", s.id, bind.displayName(), errorMessage(o.Body)).With("sessionId", s.id), nil, done)
			return
		}
		if old := s.link; old != l && old.down == nil && !old.control {
			e.retireLink(old, "the session moved to another backend session")
		}
		s.link = l
		if method == "session/new" {
			id := gjson.GetBytes(o.Body, "sessionId").Str
			if id == "" {
				id = s.id
			}
			e.setBackend(s, id)
			if !e.b.Sessions.NoPreamble {
				s.b.primer = history
			}
		} else {
			e.setBackend(s, gjson.GetBytes(body, "sessionId").Str)
		}
		s.b.resumeID = ""
		e.recordBackend(s)
		e.attached(s, nil, o.Body, done)
	})
}

// setBackend makes id, on s's link, the backend session id of s: the
// engine maps it to the editor's id both ways when they differ ("" or the
// editor's own id: no mapping). An alias left on that link by a session
// whose backend is gone must not capture this backend session's messages.
func (e *engine) setBackend(s *session, id string) {
	if s.b.backend != "" {
		if k := (aliasKey{s.b.backendLink, s.b.backend}); e.dur.alias[k] == s {
			delete(e.dur.alias, k)
		}
	}
	s.b.backend, s.b.backendLink = "", nil
	if id == "" || id == s.id {
		return
	}
	k := aliasKey{s.link, id}
	if other := e.dur.alias[k]; other != nil && other != s {
		other.b.backend, other.b.backendLink = "", nil
	}
	if e.dur.alias == nil {
		e.dur.alias = map[aliasKey]*session{}
	}
	delete(e.dur.gone, k)
	e.dur.alias[k] = s
	s.b.backend, s.b.backendLink = id, s.link
}

// recordBackend writes down which agent session serves s now, so that a
// later bridge process asks the agent for that very session again.
func (e *engine) recordBackend(s *session) {
	if !s.b.owned {
		return
	}
	id := s.b.backend
	if id == "" {
		id = s.id
	}
	linkKind := "shared"
	if !s.link.control {
		linkKind = "own"
	}
	e.store().Append(s.id, store.Record{Kind: store.KindBackend, Agent: s.b.bind.Name, Dialect: s.b.bind.Dialect.Name, Backend: id, Link: linkKind})
}

func (e *engine) attached(s *session, err *translate.Error, result json.RawMessage, done func(*translate.Error, json.RawMessage)) {
	s.b.attaching = false
	waiters := s.b.waiters
	s.b.waiters = nil
	done(err, result)
	for _, w := range waiters {
		w(err)
	}
	if err == nil {
		e.armIdle(s)
	}
}

// stopping reports whether Serve is shutting down.
func (e *engine) stopping() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// internal sends the agent a request of the engine's own; then gets the
// answer, or the error that ended it.
func (e *engine) internal(l *link, method string, params json.RawMessage, sid string, then func(translate.Out)) {
	e.nextRef++
	req := &request{ref: e.nextRef, method: method, link: l, session: sid, then: then}
	e.pending.add(req)
	e.armTimeout(req)
	e.feed(l, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: method, Body: params, Session: sid, At: time.Now()})
}

// --- close and delete ------------------------------------------------------------

// closeSession serves session/close and session/delete of a bridged
// session: its backend is closed (a link of its own retired, a shared one
// told with session/close when the agent has it) and, for delete, its
// transcript removed.
func (e *engine) closeSession(req *request, env *translate.Envelope, del bool) bool {
	s := e.sessions[req.session]
	if s != nil && s.b == nil {
		e.bridgedOf(s)
	}
	if s != nil {
		e.endTurns(s, "the session was closed")
		if s.link.down == nil {
			if s.link.control {
				e.forgetBackend(s)
				if e.v2.on || gjson.GetBytes(e.dur.caps[s.b.bind.Name], "sessionCapabilities.close").IsObject() {
					e.internal(s.link, "session/close", e.toBackend(s, json.RawMessage(fmt.Sprintf(`{"sessionId":%q}`, s.id))), s.id, func(translate.Out) {})
				}
			} else {
				e.retireLink(s.link, "the session was closed")
			}
		}
		e.forget(s)
		e.onSession(SessionEvent{Kind: SessionClosed, Session: s.id})
	}
	if !del {
		if s != nil {
			e.answer(req, json.RawMessage("{}"))
			return true
		}
		// A copy for the closure: capturing env would move every
		// editor message's envelope to the heap (fromEditor's).
		held := *env
		e.store().Has(req.session, func(_ store.Meta, ok bool) {
			e.post(func() {
				if req.retired {
					return
				}
				if ok {
					e.answer(req, json.RawMessage("{}"))
					return
				}
				e.dispatch(req, &held)
			})
		})
		return true
	}
	e.store().Delete(req.session, func(err error) {
		e.post(func() {
			if req.retired {
				return
			}
			var busy *store.BusyError
			switch {
			case errors.As(err, &busy):
				e.fail(req, translate.Errorf(translate.CodeInternalError,
					"session %s cannot be deleted here: it is open in another acp-bridge process (pid %d), probably another editor window; close it there first",
					req.session, busy.PID).With("sessionId", req.session).With("pid", busy.PID))
			case err == nil || s != nil:
				e.answer(req, json.RawMessage("{}"))
			case errors.Is(err, fs.ErrNotExist):
				e.fail(req, translate.Errorf(translate.CodeInvalidParams,
					"unknown sessionId %q: acp-bridge has no session by that id (see session/list)", req.session).With("sessionId", req.session))
			default:
				e.fail(req, translate.Errorf(translate.CodeInternalError, "session %s could not be deleted: %v", req.session, err))
			}
		})
	})
	return true
}

// endTurns ends the turns still running on s, which is being closed or
// deleted: the agent is told session/cancel, each pending prompt is
// answered cancelled now (its own late answer is dropped), and prompts
// still waiting for a backend are answered too. Otherwise a prompt of a
// closed session would never be answered.
func (e *engine) endTurns(s *session, why string) {
	if e.v2.on {
		e.v2EndTurns(s, why)
		return
	}
	if len(s.prompts) == 0 {
		return
	}
	e.log.Info("ending the running turn of a session being closed", "session", s.id, "why", why)
	if s.link.down == nil && !s.b.attaching {
		e.feed(s.link, translate.Msg{Kind: translate.Notification, Method: "session/cancel", Body: e.toBackend(s, json.RawMessage(`{"sessionId":`+mustJSON(s.id)+`}`)), Grace: e.cancelGrace()})
	}
	for _, ref := range slices.Clone(s.prompts) {
		if req := e.pending.get(ref); req != nil {
			e.answer(req, json.RawMessage(`{"stopReason":"cancelled"}`))
		}
	}
}

// forgetBackend remembers that s's backend session on the shared link is
// closed: what the agent still sends for it (the end of a cancelled turn)
// is dropped rather than shown under an id the editor no longer has.
func (e *engine) forgetBackend(s *session) {
	id := s.b.backend
	if id == "" {
		id = s.id
	}
	if e.dur.gone == nil {
		e.dur.gone = map[aliasKey]bool{}
	}
	e.dur.gone[aliasKey{s.link, id}] = true
}

// --- idle cleanup ----------------------------------------------------------------

// armIdle (re)starts s's idle timer: after Durable.IdleTimeout without a
// turn its backend session is closed. A link of the session's own is
// closed with it; on the shared link the agent is told session/close (when
// it has it), and the link itself is closed once no session is left on it.
// The session re-attaches on its next request.
func (e *engine) armIdle(s *session) {
	if !e.durable() || s.b == nil || s.link.down != nil {
		return
	}
	d := e.b.Sessions.IdleTimeout
	if d <= 0 {
		return
	}
	if s.b.idle != nil {
		s.b.idle.Stop()
	}
	l := s.link
	s.b.idle = time.AfterFunc(d, func() {
		e.post(func() {
			if e.sessions[s.id] == s && e.v2Running(s.id) {
				e.armIdle(s) // a v2 turn outlives its prompt's answer
				return
			}
			if e.sessions[s.id] != s || s.link != l || l.down != nil || len(s.prompts) > 0 || s.b.attaching || e.busy(l, s.id) {
				return
			}
			e.log.Info("closing an idle backend session; it re-attaches on the next request", "session", s.id, "idle", d)
			if !l.control {
				e.retireLink(l, fmt.Sprintf("the session was idle for %s", d))
				return
			}
			e.detach(s, "idle", func() {
				if l.down == nil && len(e.sessionsOn(l)) == 0 && !e.busy(l, "") {
					e.retireLink(l, fmt.Sprintf("every session on it was idle for %s", d))
				}
			})
		})
	})
}

// busy reports whether an editor request is pending on l (for session sid
// only, when not "").
func (e *engine) busy(l *link, sid string) bool {
	for _, req := range e.pending.inOrder() {
		if req.link == l && req.id != nil && (sid == "" || req.session == sid) {
			return true
		}
	}
	return false
}

// withPreamble puts a text block holding text before a prompt's blocks.
func withPreamble(params json.RawMessage, text string) json.RawMessage {
	block, _ := json.Marshal(map[string]string{"type": "text", "text": text})
	prompt := gjson.GetBytes(params, "prompt")
	blocks := []json.RawMessage{block}
	prompt.ForEach(func(_, b gjson.Result) bool {
		blocks = append(blocks, json.RawMessage(b.Raw))
		return true
	})
	all, _ := json.Marshal(blocks)
	return withKey(params, "prompt", all)
}
