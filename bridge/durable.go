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
	"strings"
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
	// IdleTimeout closes a session's backend (its own agent link) after
	// that long without a turn; the session re-attaches on its next
	// request. 0 means never.
	IdleTimeout time.Duration
}

// bridged is what the engine keeps of a durable session.
type bridged struct {
	// backend is the backend's session id when it is not the editor's.
	backend string
	bind    Binding
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
}

// durableState is the engine's durable-session state (loop-owned).
type durableState struct {
	alias map[string]*session        // backend session id → session
	caps  map[string]json.RawMessage // agent name → its agentCapabilities
	// opening is the method of the session answer being recorded.
	opening string
	// suppressing counts sessions whose backend is replaying a load.
	suppressing int
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

// onSession records ev in the store and passes it to Bridge.OnSession.
func (e *engine) onSession(ev SessionEvent) {
	if e.durable() && ev.Session != "" {
		e.record(ev)
	}
	if e.b.OnSession != nil {
		e.b.OnSession(ev)
	}
}

// sessionHooked reports whether session events are wanted at all.
func (e *engine) sessionHooked() bool { return e.b.OnSession != nil || e.durable() }

// recordUpdate stores one session/update the editor is sent: its params,
// or the whole notification as relayed (the store gives the params back
// on load; no parsing per streamed update here).
func (e *engine) recordUpdate(s *session, body []byte) {
	if bytes.HasPrefix(body, updateHead) && len(body) > len(updateHead) {
		body = body[len(updateHead) : len(body)-1] // the params, as most relays frame them
	}
	b := e.bridgedOf(s)
	if b.updPrefix == nil {
		b.updPrefix = []byte(`{"sessionId":` + mustJSON(s.id) + `,"update":`)
	}
	if bytes.HasPrefix(body, b.updPrefix) && len(body) > len(b.updPrefix) && body[len(body)-1] == '}' {
		e.records().SessionUpdate(s.id, body[len(b.updPrefix):len(body)-1])
		return
	}
	e.records().Update(s.id, body)
}

func (e *engine) record(ev SessionEvent) {
	st := e.store()
	switch ev.Kind {
	case SessionOpened:
		s := e.sessions[ev.Session]
		r := store.Record{Kind: store.KindMeta, Cwd: ev.Cwd}
		if s != nil {
			b := e.bridgedOf(s)
			r.Agent, r.Dialect = b.bind.Name, b.bind.Dialect.Name
		}
		// The store writes only the sessions this process holds.
		var err error
		if e.dur.opening == "session/new" {
			err = st.Create(ev.Session, store.Meta{Cwd: r.Cwd, Agent: r.Agent, Dialect: r.Dialect})
		} else if !st.Holds(ev.Session) {
			_, err = st.Acquire(ev.Session)
		}
		if err != nil {
			e.log.Warn("session not recorded", "session", ev.Session, "error", err)
		}
		st.Append(ev.Session, r)
	case SessionClosed:
		st.Release(ev.Session)
	case SessionPrompt:
		if s := e.sessions[ev.Session]; s != nil && s.b != nil && s.b.idle != nil {
			s.b.idle.Stop()
		}
		st.Append(ev.Session, store.Record{Kind: store.KindPrompt, Body: ev.Body})
	case SessionTurnEnded:
		st.Append(ev.Session, store.Record{Kind: store.KindStop, Body: ev.Body, Failed: ev.Failed, Sync: true})
		if s := e.sessions[ev.Session]; s != nil {
			e.armIdle(s)
		}
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

// --- initialize ------------------------------------------------------------------

// durableInitialized learns the agent's capabilities from its initialize
// answer and, with durable sessions on, advertises the bridge's own.
func (e *engine) durableInitialized(req *request, result json.RawMessage) (json.RawMessage, *translate.Error) {
	e.learnCaps(req.link, result)
	out, err := e.initialized(result)
	if err != nil || !e.durable() {
		return out, err
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
		if e.b.OneTurn != OneTurnOff && len(s.prompts) > 0 {
			// One turn at a time holds while a session re-attaches too.
			// Queue mode rejects here: a queued prompt is fed as the
			// editor sent it, and this session's backend ids differ.
			e.rejectSecondPrompt(req, s)
			return true
		}
		e.promptStarted(req, env.Params)
	}
	params := env.Params
	e.whenAttached(s, func(err *translate.Error) {
		if req.retired {
			return
		}
		if err != nil {
			e.fail(req, err)
			return
		}
		body := e.toBackend(s, params)
		if env.Method == "session/prompt" && s.b.primer != "" {
			body = withPreamble(body, s.b.primer)
			s.b.primer = ""
		}
		req.link = s.link
		e.feed(s.link, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: env.Method, Body: body})
	})
	return true
}

// durableNotification routes an editor notification for a bridged session
// whose backend id differs or which has no live backend. It reports whether
// it took it.
func (e *engine) durableNotification(env *translate.Envelope) bool {
	if !e.durable() {
		return false
	}
	s := e.sessions[gjson.GetBytes(env.Params, "sessionId").Str]
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
	e.feed(s.link, translate.Msg{Kind: translate.Notification, Method: env.Method, Body: e.toBackend(s, env.Params)})
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
func (e *engine) unalias(o translate.Out) (_ translate.Out, drop bool) {
	if !e.durable() || len(e.dur.alias) == 0 && e.dur.suppressing == 0 {
		return o, false
	}
	sid := o.Session
	if sid == "" {
		sid = updateSession(o)
		if o.Kind == translate.Call {
			sid = gjson.GetBytes(o.Body, "sessionId").Str
		}
	}
	s := e.dur.alias[sid]
	if s == nil {
		if s = e.sessions[sid]; s == nil || s.b == nil {
			return o, false
		}
	}
	if s.b.suppress && o.Method == "session/update" {
		return o, true
	}
	if s.b.backend == "" || s.b.backend != sid {
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

func (e *engine) listSessions(req *request, params json.RawMessage) {
	cwd := gjson.GetBytes(params, "cwd").Str
	cursor := gjson.GetBytes(params, "cursor").Str
	e.store().List(cwd, "", cursor, listPage, func(metas []store.Meta, next string, err error) {
		e.post(func() {
			if req.retired {
				return
			}
			if err != nil {
				e.fail(req, translate.Errorf(translate.CodeInvalidParams, "session/list: %v", err))
				return
			}
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
		})
	})
}

// listPage is how many sessions one session/list answer holds.
const listPage = 50

// --- load and resume -------------------------------------------------------------

// openStored serves session/load or resume from the store: the transcript
// is read off the loop, then replayed (load) and the backend re-attached.
func (e *engine) openStored(req *request, env *translate.Envelope) {
	e.store().Load(req.session, func(t *store.Transcript, err error) {
		e.post(func() { e.openLoaded(req, env, t, err) })
	})
}

func (e *engine) openLoaded(req *request, env *translate.Envelope, t *store.Transcript, err error) {
	if req.retired {
		return
	}
	s := e.sessions[req.session]
	if err != nil {
		if s != nil && s.link.down == nil {
			e.dispatch(req, env) // live, but never recorded: the agent's
			return
		}
		if s == nil && errors.Is(err, fs.ErrNotExist) {
			e.dispatch(req, env) // not ours: the agent may know it
			return
		}
		e.fail(req, translate.Errorf(translate.CodeInternalError,
			"session %s cannot be %s: its transcript is unreadable (%v)", req.session, pastTense(req.method), err).With("sessionId", req.session))
		return
	}
	bind := e.agentNamed(t.Meta.Agent)
	if s == nil && req.method == "session/load" && bind.Dialect.Relay && bind.Name == e.b.AgentName &&
		gjson.GetBytes(e.dur.caps[bind.Name], "loadSession").Bool() {
		e.dispatch(req, env) // the agent's own load, which replays itself
		return
	}
	if t.Skipped > 0 {
		e.log.Warn("session transcript had unreadable lines; they were skipped", "session", req.session, "lines", t.Skipped)
	}
	if req.method == "session/load" {
		for _, u := range replay(req.session, t) {
			e.writeEditorSession(editorMsg{head: updateHead, body: u, tail: closeBrace}, req.session)
		}
	}
	fresh := s == nil
	if fresh {
		s = &session{id: req.session, link: e.parkedLink(bind), cwd: req.cwd, dirs: req.dirs}
		e.sessions[s.id] = s
		s.b = &bridged{bind: bind, mcp: json.RawMessage("[]")}
	}
	if m := gjson.GetBytes(req.params, "mcpServers"); m.IsArray() {
		s.b.mcp = json.RawMessage(m.Raw)
	}
	s.cwd, s.dirs = req.cwd, req.dirs
	finish := func(err *translate.Error, result json.RawMessage) {
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
		b, _ := json.Marshal(out)
		b = e.sessionOpened(req, s.id, b)
		e.answer(req, b)
	}
	switch {
	case s.b.attaching:
		s.b.waiters = append(s.b.waiters, func(err *translate.Error) { finish(err, nil) })
	case s.link.down == nil:
		finish(nil, nil)
	default:
		e.attach(s, t, finish)
	}
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

// forget drops a session from the engine (not from the store).
func (e *engine) forget(s *session) {
	delete(e.sessions, s.id)
	if s.b != nil {
		if s.b.backend != "" {
			delete(e.dur.alias, s.b.backend)
		}
		if s.b.idle != nil {
			s.b.idle.Stop()
		}
	}
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
	e.store().Load(s.id, func(t *store.Transcript, err error) {
		e.post(func() {
			if err != nil {
				t = &store.Transcript{}
			}
			s.b.attaching = false
			e.attach(s, t, func(*translate.Error, json.RawMessage) {})
		})
	})
}

// attach opens a backend session for s: the backend's own resume or load
// when it advertises one, else a new session primed with the transcript.
// done gets the backend's answer.
func (e *engine) attach(s *session, t *store.Transcript, done func(*translate.Error, json.RawMessage)) {
	s.b.attaching = true
	bind := s.b.bind
	caps := gjson.ParseBytes(e.dur.caps[bind.Name])
	method := "session/new"
	switch {
	case s.b.switched:
	case caps.Get("sessionCapabilities.resume").IsObject():
		method = "session/resume"
	case caps.Get("loadSession").Bool():
		method = "session/load"
	}
	e.attachWith(s, t, bind, method, done)
}

func (e *engine) attachWith(s *session, t *store.Transcript, bind Binding, method string, done func(*translate.Error, json.RawMessage)) {
	backendID := s.id
	if s.b.backend != "" {
		backendID = s.b.backend
	}
	params := map[string]any{"cwd": s.cwd, "mcpServers": s.b.mcp}
	if len(s.dirs) > 0 {
		params["additionalDirectories"] = s.dirs
	}
	if method != "session/new" {
		params["sessionId"] = backendID
	}
	body, _ := json.Marshal(params)

	var l *link
	switch {
	case bind.Dialect.PerSession || bind.Name != e.b.AgentName:
		tr := bind.NewTranslator()
		spawn := Spawn{Cwd: s.cwd, Session: s.id}
		if sb, ok := tr.(translate.SpawnBuilder); ok {
			cmd, err := sb.BuildSpawn(translate.Msg{Kind: translate.Request, Method: method, Body: body, Session: s.id, At: time.Now()})
			if err != nil {
				e.attached(s, translate.Errorf(translate.CodeInternalError, "could not start agent %s for session %s: %v", bind.Name, s.id, err), nil, done)
				return
			}
			spawn.Command = cmd
		}
		l = e.newLink(spawn, bind, tr)
		e.nextRef++
		init := &request{ref: e.nextRef, method: "initialize", link: l, then: func(o translate.Out) {
			if o.Kind == translate.Reply {
				e.learnCaps(l, o.Body)
			}
		}}
		e.pending.add(init)
		e.feed(l, translate.Msg{Kind: translate.Request, Ref: init.ref, Method: "initialize", Body: e.initParams})
	default:
		var err *translate.Error
		if l, err = e.ensureControl(); err != nil {
			e.attached(s, err, nil, done)
			return
		}
	}
	if method == "session/load" {
		s.b.suppress = true
		e.dur.suppressing++
	}
	e.log.Info("re-attaching session", "session", s.id, "agent", bind.Name, "method", method)
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
				e.log.Info("backend could not reopen the session; starting a new one", "session", s.id, "method", method, "error", errorMessage(o.Body))
				if !l.control {
					e.retireLink(l, method+" failed")
				}
				e.attachWith(s, t, bind, "session/new", done)
				return
			}
			if !l.control {
				e.retireLink(l, "session/new failed")
			}
			e.attached(s, translate.Errorf(translate.CodeInternalError,
				"session %s could not be reopened on agent %s: %s; its transcript is kept, so fix the agent and try again", s.id, bind.Name, errorMessage(o.Body)).With("sessionId", s.id), nil, done)
			return
		}
		if old := s.link; old != l && old.down == nil && !old.control {
			e.retireLink(old, "the session moved to another backend session")
		}
		s.link = l
		if method == "session/new" {
			if s.b.backend != "" {
				delete(e.dur.alias, s.b.backend)
			}
			s.b.backend = ""
			id := gjson.GetBytes(o.Body, "sessionId").Str
			if id == "" {
				id = s.id
			}
			// An alias left by a session whose backend is gone must not
			// capture this backend session's messages.
			delete(e.dur.alias, id)
			if id != s.id {
				if e.dur.alias == nil {
					e.dur.alias = map[string]*session{}
				}
				e.dur.alias[id] = s
				s.b.backend = id
			}
			if !e.b.Sessions.NoPreamble {
				s.b.primer = preamble(t, e.b.Sessions.PreambleBytes)
			}
		}
		e.attached(s, nil, o.Body, done)
	})
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
		if s.link.down == nil {
			if s.link.control {
				if gjson.GetBytes(e.dur.caps[s.b.bind.Name], "sessionCapabilities.close").IsObject() {
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
		e.store().Has(req.session, func(_ store.Meta, ok bool) {
			e.post(func() {
				if req.retired {
					return
				}
				if ok {
					e.answer(req, json.RawMessage("{}"))
					return
				}
				e.dispatch(req, env)
			})
		})
		return true
	}
	e.store().Delete(req.session, func(err error) {
		e.post(func() {
			if req.retired {
				return
			}
			switch {
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

// --- replay and preamble ---------------------------------------------------------

// replayed are the session/update kinds session/load replays.
var replayed = map[string]bool{
	"user_message_chunk": true, "agent_message_chunk": true, "agent_thought_chunk": true,
	"tool_call": true, "tool_call_update": true, "plan": true,
}

// replay returns the session/update params that replay t, in order: each
// prompt's blocks as user_message_chunk, agent chunks and plans as they
// came, and each tool call once, where it started, in its final state.
func replay(sid string, t *store.Transcript) []json.RawMessage {
	type entry struct {
		update map[string]json.RawMessage
	}
	var out []*entry
	tools := map[string]*entry{}
	for _, r := range t.Records {
		switch r.Kind {
		case store.KindPrompt:
			gjson.GetBytes(r.Body, "prompt").ForEach(func(_, block gjson.Result) bool {
				out = append(out, &entry{map[string]json.RawMessage{
					"sessionUpdate": json.RawMessage(`"user_message_chunk"`),
					"content":       replayBlock(block),
				}})
				return true
			})
		case store.KindUpdate:
			kind := gjson.GetBytes(r.Body, "update.sessionUpdate").Str
			if !replayed[kind] {
				continue
			}
			var u map[string]json.RawMessage
			if json.Unmarshal([]byte(gjson.GetBytes(r.Body, "update").Raw), &u) != nil {
				continue
			}
			if c, ok := u["content"]; ok && (kind == "agent_message_chunk" || kind == "agent_thought_chunk" || kind == "user_message_chunk") {
				u["content"] = replayBlock(gjson.ParseBytes(c))
			}
			id := gjson.GetBytes(r.Body, "update.toolCallId").Str
			if kind == "tool_call_update" {
				if prev := tools[id]; prev != nil {
					for k, v := range u {
						if k != "sessionUpdate" {
							prev.update[k] = v
						}
					}
					continue
				}
			}
			en := &entry{u}
			if kind == "tool_call" {
				tools[id] = en
			}
			out = append(out, en)
		}
	}
	sidJSON, _ := json.Marshal(sid)
	params := make([]json.RawMessage, 0, len(out))
	for _, en := range out {
		u, _ := json.Marshal(en.update)
		params = append(params, json.RawMessage(`{"sessionId":`+string(sidJSON)+`,"update":`+string(u)+`}`))
	}
	return params
}

// replayBlock returns a content block as replayed: one whose payload the
// store omitted becomes a text block saying so.
func replayBlock(block gjson.Result) json.RawMessage {
	if n, ok := omitted(block); ok {
		text := fmt.Sprintf("[%s omitted from the session transcript: %s bytes of %s]", block.Get("type").Str, n, block.Get("mimeType").Str)
		b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
		return b
	}
	return json.RawMessage(block.Raw)
}

// omitted reports whether the store omitted a content block's payload,
// and its size.
func omitted(block gjson.Result) (string, bool) {
	for _, k := range []string{"data", "resource.blob"} {
		if v := block.Get(k).Str; strings.HasPrefix(v, store.Omitted) {
			return strings.TrimPrefix(v, store.Omitted), true
		}
	}
	return "", false
}

// preamble renders t as a text preamble for a new backend session, at most
// max bytes (its tail kept); "" when t holds no conversation.
func preamble(t *store.Transcript, max int) string {
	if t == nil {
		return ""
	}
	if max <= 0 {
		max = 32 << 10
	}
	records := t.Records
	if n := len(records); n > 0 && records[n-1].Kind == store.KindPrompt {
		records = records[:n-1] // the prompt being sent now, not history
	}
	var b strings.Builder
	last := ""
	say := func(who, text string) {
		if who != last {
			b.WriteString("\n\n" + who + ": ")
			last = who
		}
		b.WriteString(text)
	}
	for _, r := range records {
		switch r.Kind {
		case store.KindPrompt:
			gjson.GetBytes(r.Body, "prompt").ForEach(func(_, block gjson.Result) bool {
				if block.Get("type").Str == "text" {
					say("User", block.Get("text").Str)
				} else {
					say("User", "["+block.Get("type").Str+"]")
				}
				return true
			})
		case store.KindUpdate:
			u := gjson.GetBytes(r.Body, "update")
			switch u.Get("sessionUpdate").Str {
			case "agent_message_chunk":
				if u.Get("content.type").Str == "text" {
					say("Assistant", u.Get("content.text").Str)
				}
			case "tool_call":
				say("Assistant", "\n[tool: "+u.Get("title").Str+"]\n")
			}
		case store.KindSwitch:
			last = ""
			b.WriteString("\n\n[the conversation moved to agent " + r.Agent + "]")
		}
	}
	text := strings.TrimSpace(b.String())
	if text == "" {
		return ""
	}
	if len(text) > max {
		text = "…" + strings.ToValidUTF8(text[len(text)-max:], "")
	}
	return "[acp-bridge] This conversation was started earlier, in another session; its transcript so far follows. Continue from it; the user's new message comes after it.\n\n" +
		text + "\n\n[end of the earlier transcript]"
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
