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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/go-hclog"
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
	// turns are the session's prompts not yet answered, oldest first, when
	// the agent queues prompts (several open at once): a prompt is
	// recorded once the turns before it have ended, and a turn that ends
	// before those ahead of it has its stop held, so that a load replays
	// each turn's prompt, its updates and its end together (recordTurn).
	turns []openTurn
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

// sessionHooks is what durable sessions ask of the core: its request
// table, its turns, its agent links' translators and its editor. *engine
// implements it (hooks.go). Every method but post is called on the loop
// only. The core may call back into the part before a method returns (an
// answer's afterSuccess records the session it opened), as it does for any
// request or link. What the part asks of the other parts it asks them
// itself: link supervision (linkOpener) and the v2 relay (v2Turns).
type sessionHooks interface {
	// --- requests (the core's pending table) ---

	// answer answers req with result: the editor's request gets exactly
	// this answer (its own id restored), an internal request's then runs;
	// req is retired, and answering it again does nothing.
	answer(req *request, result json.RawMessage)
	// fail answers req with err, as answer does.
	fail(req *request, err *translate.Error)
	// dispatch routes req, an editor request the durable part does not
	// serve itself, as the core routes any request (env is the editor's
	// message it came in).
	dispatch(req *request, env *translate.Envelope)
	// internal sends l's agent a request of the bridge's own, timed as
	// an editor's; then gets the agent's answer, or the error that ended
	// it (a lost link, a timeout, shutdown), exactly once.
	internal(l *link, method string, params json.RawMessage, sid string, then func(translate.Out))
	// pauseTimeout stops req's deadline while the bridge does its own work
	// for it; rearm starts a fresh one.
	pauseTimeout(req *request) (rearm func())

	// --- turns ---

	// promptStarted files req, a session/prompt, as its session's running
	// turn (cancel grace, one turn at a time, the SessionPrompt event).
	promptStarted(req *request, params json.RawMessage)
	// armCancelGrace starts the cancel grace of sid's pending prompts: the
	// core answers each "cancelled" itself if the agent has not in time.
	armCancelGrace(sid string)
	// repaired counts a repair of the compliance shim (and taps it).
	repaired(r Repair, session, detail string)

	// --- agents, the editor, the loop ---

	// feed hands m to l's translator, in order; what is fed before l's
	// initialize is answered waits for it.
	feed(l *link, m translate.Msg)
	// writeEditorSession writes m to the editor, in order with the other
	// messages of session (which may be held behind a prompt's answer).
	writeEditorSession(m editorMsg, session string)
	// post runs f on the loop; from any goroutine. Once Serve stops, f
	// is dropped.
	post(f func())
}

// linkOpener is what durable sessions ask of link supervision: the shared
// link, links of a session's own, and retiring them. *supervisor
// implements it (supervise.go). Called on the loop only; like the core,
// the supervisor may call back into the part before a method returns (a
// retired link's sessions are reported lost, through the core).
type linkOpener interface {
	// controlLink returns the link sessions share (the control link):
	// with open, a live one, dialled again when there is none or it was
	// lost (or the error why it cannot be); else as it is, possibly nil
	// or lost.
	controlLink(open bool) (*link, *translate.Error)
	// openLink opens a link of its own for one session, to bind's agent
	// (spawned as spawn says, tr its translator), and sends it the
	// editor's initialize; then gets the link and initialize's answer.
	openLink(spawn Spawn, bind Binding, tr translate.Translator, then func(*link, translate.Out))
	// retireLink closes l, which no session needs any more: what is
	// pending on it is answered, its sessions are lost (SessionLost).
	retireLink(l *link, why string)
}

// v2Turns is what durable sessions ask of the part serving an editor that
// speaks ACP v2, when it is relayed to a v2 agent: whether it is, and the
// relayed sessions' turns. *v2editor implements it (v2relay.go). Called on
// the loop only.
type v2Turns interface {
	// relayingV2 reports whether the editor speaks v2 to a v2 agent,
	// relayed: sessions resume rather than load, and turns end with an
	// idle state update, not with the prompt's answer.
	relayingV2() bool
	// v2Running reports whether relayed v2 session sid has work running
	// (its turn outlives its prompt's answer).
	v2Running(sid string) bool
	// v2EndTurn closes relayed v2 session sid's running turn with an idle
	// state update (stopReason cancelled), as sid is closed, and forgets
	// its turn state.
	v2EndTurn(sid string)
}

// durableSessions are the engine's durable sessions: the state and the
// handling of sessions recorded in the store (loop-owned). It reaches the
// core through core alone, and the other parts through links and v2.
type durableSessions struct {
	core  sessionHooks
	links linkOpener // link supervision: the shared link, links of a session's own
	v2    v2Turns    // a v2 editor relayed to a v2 agent
	cfg   *Bridge    // its configuration: Sessions, AgentName, Redact, OnSession, OneTurn
	log   hclog.Logger
	// sessions is the engine's session table, shared with the core (the
	// same map): both read and write it, on the loop.
	sessions sessionTable
	// pending is the core's request table, shared for reading (a
	// session's prompts, a link's requests); only the core adds and
	// retires requests.
	pending *pendingTable
	// stopped is closed once Serve shuts down; helpers counts the
	// goroutines of this part that Serve waits for before it returns.
	stopped <-chan struct{}
	helpers *sync.WaitGroup
	// recorded is signalled when the store has written what a held
	// answer waits for; recordedSeq is the last such answer's number
	// (holdForStore). The loop then releases them (releaseAnswers).
	recorded    chan struct{}
	recordedSeq atomic.Uint64

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
	// The meta is the store's, for opening it here when the agent fails.
	held map[string]*store.Meta
	// closed are the sessions the editor closed in this process and has
	// not loaded or resumed since: their requests are refused (closedTo).
	closed map[string]bool
	// lines gathers streamed updates for the store on the loop, with no
	// lock per update; the loop flushes it after every event it handles,
	// and store() before anything else reaches the store (order).
	lines *store.Lines
}

// start makes d the durable sessions of a Serve, reaching its core
// through core, its link supervision through links and its v2 editor
// through v2.
func (d *durableSessions) start(core sessionHooks, links linkOpener, v2 v2Turns, cfg *Bridge, log hclog.Logger, sessions sessionTable, pending *pendingTable, stopped <-chan struct{}, helpers *sync.WaitGroup) {
	d.core, d.links, d.v2, d.cfg, d.log = core, links, v2, cfg, log
	d.sessions, d.pending = sessions, pending
	d.stopped, d.helpers = stopped, helpers
	d.recorded = make(chan struct{}, 1)
}

// on reports whether sessions are recorded at all (a store is configured).
func (d *durableSessions) on() bool { return d.cfg.Sessions != nil && d.cfg.Sessions.Store != nil }

// store returns the session store, with every update recorded so far
// handed to it first, so that what the caller appends or reads comes after
// them.
func (d *durableSessions) store() *store.Store {
	d.flushRecords()
	return d.cfg.Sessions.Store
}

// flushRecords hands the updates gathered for the store over to it.
func (d *durableSessions) flushRecords() {
	if d.lines != nil {
		d.lines.Flush()
	}
}

// records returns the loop's Lines for streamed updates.
func (d *durableSessions) records() *store.Lines {
	if d.lines == nil {
		d.lines = d.cfg.Sessions.Store.Lines()
	}
	return d.lines
}

func (d *durableSessions) bridgedOf(s *session) *bridged {
	if s.b == nil {
		s.b = &bridged{bind: s.link.bind, mcp: json.RawMessage("[]")}
		if s.b.bind.Name == "" {
			s.b.bind.Name = d.cfg.AgentName
		}
	}
	return s.b
}

// onSession records ev in the store, for a session this bridge holds there,
// and passes it to Bridge.OnSession.
func (d *durableSessions) onSession(ev SessionEvent) {
	if d.on() && ev.Session != "" {
		if s := d.sessions[ev.Session]; s != nil && s.b != nil && s.b.owned {
			d.record(s, ev)
		}
	}
	if d.cfg.OnSession != nil {
		d.cfg.OnSession(ev)
	}
}

// aliasing reports whether unalias may change or drop an output: some
// backend id differs from its editor id, a load is being replayed, or a
// closed session's backend may still speak. Its callers test it first,
// since nearly every output of a stream finds nothing to do.
func (d *durableSessions) aliasing() bool {
	return d.on() && (len(d.alias) != 0 || d.suppressing != 0 || len(d.gone) != 0)
}

// sessionHooked reports whether session events are wanted at all.
func (d *durableSessions) sessionHooked() bool { return d.cfg.OnSession != nil || d.on() }

// recordUpdate stores one session/update the editor is sent, scrubbed of
// secrets as the editor gets it: its params, or the whole notification as
// relayed (the store gives the params back on load; no parsing per
// streamed update here).
//
// chunk, when not "", is the kind of a text chunk that body holds exactly
// as the SDKs write it (translate.PlainChunk): a run of those is kept as
// one record of their joined text (store.Lines.TextChunk), so that a
// stream's transcript takes half the bytes, written and fsynced. Not when
// secrets are scrubbed: what is kept is then what the editor was sent.
func (d *durableSessions) recordUpdate(s *session, body []byte, chunk string) {
	if s.b == nil || !s.b.owned {
		return
	}
	if d.cfg.Redact != nil {
		body = d.cfg.Redact(body) // as the editor is sent it: a secret an agent echoed is not kept
		chunk = ""
	}
	if update, ok := recordBody(body, sessionPrefix(s)); ok && chunk != "" {
		d.records().TextChunk(s.id, update, chunk)
	} else if ok {
		d.records().SessionUpdate(s.id, update)
	} else {
		d.records().Update(s.id, update)
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

func (d *durableSessions) record(s *session, ev SessionEvent) {
	st := d.store()
	switch ev.Kind {
	case SessionOpened:
		// Listing data; a session just created got its meta from Create.
		if d.opening != "session/new" && d.opening != "session/fork" {
			st.Append(ev.Session, store.Record{Kind: store.KindMeta, Cwd: ev.Cwd, Agent: s.b.bind.Name, Dialect: s.b.bind.Dialect.Name})
		}
	case SessionPrompt:
		if s.b.idle != nil {
			s.b.idle.Stop()
		}
		if len(s.b.turns) > 0 {
			// An earlier turn runs (the agent queues prompts): this one
			// is recorded when it starts, after that turn's end.
			s.b.turns = append(s.b.turns, openTurn{ref: ev.ref, prompt: bytes.Clone(ev.Body)})
			return
		}
		st.Append(ev.Session, store.Record{Kind: store.KindPrompt, Body: ev.Body})
		d.holdTurn(ev.Session)
		if ev.ref != 0 {
			s.b.turns = append(s.b.turns, openTurn{ref: ev.ref})
		}
	case SessionTurnEnded:
		body := ev.Body
		if d.cfg.Redact != nil {
			body = d.cfg.Redact(body) // the agent's answer, as the editor is sent it
		}
		stop := store.Record{Kind: store.KindStop, Body: body, Failed: ev.Failed, Sync: true}
		d.recordTurn(s, st, ev.ref, stop)
		d.armIdle(s)
	}
}

// An openTurn is a prompt of a session not answered yet (bridged.turns).
type openTurn struct {
	ref translate.Ref
	// prompt is the prompt's record, until it is written; stop the
	// turn's end, held while a turn ahead of it runs.
	prompt []byte
	stop   *store.Record
}

// recordTurn writes the end of the turn of prompt ref: at once when it is
// the oldest open turn, and then the turns queued behind it, each prompt
// with its end if it came already; a turn ending ahead of its turn waits.
func (d *durableSessions) recordTurn(s *session, st *store.Store, ref translate.Ref, stop store.Record) {
	i := slices.IndexFunc(s.b.turns, func(t openTurn) bool { return t.ref == ref })
	switch {
	case i < 0:
		st.Append(s.id, stop) // a turn the store did not see start
		return
	case i > 0:
		stop.Body = bytes.Clone(stop.Body)
		s.b.turns[i].stop = &stop
		return
	}
	st.Append(s.id, stop)
	s.b.turns = s.b.turns[1:]
	for len(s.b.turns) > 0 {
		t := &s.b.turns[0]
		if t.prompt != nil {
			st.Append(s.id, store.Record{Kind: store.KindPrompt, Body: t.prompt})
			t.prompt = nil
		}
		if t.stop == nil {
			return
		}
		st.Append(s.id, *t.stop)
		s.b.turns = s.b.turns[1:]
	}
	s.b.turns = nil
}

// sessionOpened tells the hooks a session/new, load or resume succeeded,
// and returns the answer with the bridge's config options added.
func (d *durableSessions) sessionOpened(req *request, sid string, result json.RawMessage) json.RawMessage {
	if s := d.sessions[sid]; s != nil && d.on() {
		b := d.bridgedOf(s)
		if m := gjson.GetBytes(req.params, "mcpServers"); m.IsArray() {
			b.mcp = json.RawMessage(m.Raw)
		}
		result = d.withAgentOptionResult(s, result)
	}
	d.opening = req.method
	d.onSession(SessionEvent{Kind: SessionOpened, Session: sid, Cwd: req.cwd, Body: result})
	d.opening = ""
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
func (d *durableSessions) claimNew(req *request, agentID string, result json.RawMessage) (string, json.RawMessage, bool) {
	bind := d.cfg.defaultBinding()
	if req.link != nil {
		bind = req.link.bind
	}
	if bind.Name == "" {
		bind.Name = d.cfg.AgentName
	}
	linkKind := "shared"
	if req.link != nil && !req.link.control {
		linkKind = "own"
	}
	st := d.store()
	id := agentID
	for n := 1; ; n++ {
		if n > 1 {
			id = fmt.Sprintf("%s~%d", agentID, n)
		}
		if n > 1000 {
			d.log.Warn("session not recorded: no free session id", "session", agentID)
			return agentID, result, false
		}
		if s := d.sessions[id]; s != nil && (s.b != nil || s.link != req.link) && s.link.down == nil {
			continue // an editor id this engine already serves
		}
		err := st.Create(id, store.Meta{SessionID: id, Cwd: req.cwd, Agent: bind.Name, Dialect: bind.Dialect.Name, Backend: agentID, Link: linkKind})
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrTaken) {
			d.log.Warn("session not recorded: its transcript could not be created", "session", id, "error", err)
			return agentID, result, false
		}
	}
	if id != agentID {
		d.log.Info("the agent handed out a session id the editor may already know; the editor is given another", "agent_session", agentID, "session", id)
		result = withKey(result, "sessionId", json.RawMessage(mustJSON(id)))
	}
	return id, result, true
}

// --- initialize ------------------------------------------------------------------

// advertised is the core's answer to an initialize (see learnCaps) with,
// when durable sessions are on, the session capabilities the bridge
// provides added; not for a relayed v2 editor, whose agent must have
// them (v2's session list, resume and close are not optional).
func (d *durableSessions) advertised(result json.RawMessage) json.RawMessage {
	if !d.on() || d.v2.relayingV2() {
		return result
	}
	return advertise(result)
}

// learnCaps learns l's agent's capabilities from its initialize answer.
func (d *durableSessions) learnCaps(l *link, result json.RawMessage) {
	if l == nil {
		return
	}
	if d.caps == nil {
		d.caps = map[string]json.RawMessage{}
	}
	name := l.bind.Name
	if name == "" {
		name = d.cfg.AgentName
	}
	d.caps[name] = json.RawMessage(gjson.GetBytes(result, "agentCapabilities").Raw)
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
func (d *durableSessions) durableRequest(req *request, env *translate.Envelope) bool {
	if !d.on() {
		return false
	}
	switch env.Method {
	case "session/new":
		req.params = env.Params
		return false
	case "session/list":
		d.listSessions(req, env.Params)
		return true
	case "session/load", "session/resume":
		delete(d.closed, req.session)
		req.params = env.Params
		req.cwd, req.dirs = gjson.GetBytes(env.Params, "cwd").Str, additionalDirs(env.Params)
		if err := d.v2ReplayFrom(req); err != nil {
			d.core.fail(req, err)
			return true
		}
		d.openStored(req, env)
		return true
	case "session/close":
		return d.closeSession(req, env, false)
	case "session/delete":
		return d.closeSession(req, env, true)
	}
	if d.closed[req.session] && d.sessions[req.session] == nil {
		d.closedTo(req)
		return true
	}
	s := d.sessions[req.session]
	if s == nil || s.b == nil {
		return false
	}
	if env.Method == "session/set_config_option" && d.switchable() && gjson.GetBytes(env.Params, "configId").Str == agentOption {
		d.switchAgent(req, s, env.Params)
		return true
	}
	if s.link.down == nil && !s.b.attaching && s.b.backend == "" && s.b.primer == "" {
		return false // live on its backend under its own id: the usual path
	}
	if env.Method == "session/prompt" {
		if d.cfg.OneTurn != OneTurnOff && len(s.prompts) > 0 && !s.link.queuesPrompts {
			// editor sent it, and this session's backend ids differ.
			rejectSecondPrompt(d.core, req, s)
			return true
		}
		d.core.promptStarted(req, env.Params)
	}
	params, method := env.Params, env.Method // (env itself stays off the heap)
	d.whenAttached(s, func(err *translate.Error) {
		if req.retired {
			return
		}
		if err != nil {
			d.core.fail(req, err)
			return
		}
		body := d.toBackend(s, params)
		if method == "session/prompt" && s.b.primer != "" {
			body = withPreamble(body, s.b.primer)
			s.b.primer = ""
		}
		req.link = s.link
		d.core.feed(s.link, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: method, Body: body})
	})
	return true
}

// closedTo answers req, a request for a session the editor closed: ACP's
// session/close frees the session, which is no longer active until
// session/load or session/resume opens it again. Serving it anyway would
// open the session behind the editor's back, or send the agent an id it
// was told is gone.
func (d *durableSessions) closedTo(req *request) {
	d.core.fail(req, translate.Errorf(translate.CodeResourceNotFound,
		"session %s was closed (session/close), so it takes no %s: open it again with session/load or session/resume first, or start a new session",
		req.session, req.method).With("sessionId", req.session))
}

// shadowed returns the session whose backend id on the agent's shared link
// is sid, when sid names no session of this engine: the editor means
// another session (one open in another window, one it remembers), and
// passed on as it is, sid would reach that other conversation on the
// agent. nil when there is none.
func (d *durableSessions) shadowed(sid string) *session {
	if sid == "" || len(d.alias) == 0 {
		return nil
	}
	control, _ := d.links.controlLink(false)
	if control == nil {
		return nil
	}
	if s := d.sessions[sid]; s != nil && s.b != nil {
		return nil
	}
	return d.alias[aliasKey{control, sid}]
}

// refuseShadowed answers a request naming a shadowed session id (see
// shadowed) as the agent would an id it does not have. It reports whether
// it did.
func (d *durableSessions) refuseShadowed(req *request) bool {
	if !d.on() || d.shadowed(req.session) == nil {
		return false
	}
	d.log.Warn("request for a session not open here refused: its id is another session's on the agent", "method", req.method, "session", req.session)
	d.core.fail(req, translate.Errorf(translate.CodeResourceNotFound,
		"session %s is not open in this bridge: load it first with session/load (session/list shows the recorded sessions)", req.session).With("sessionId", req.session))
	return true
}

// durableNotification routes an editor notification for a bridged session
// whose backend id differs or which has no live backend. It reports whether
// it took it.
func (d *durableSessions) durableNotification(env *translate.Envelope) bool {
	if !d.on() {
		return false
	}
	sid := paramsSession(env.Params)
	if d.shadowed(sid) != nil {
		d.log.Warn("notification for a session not open here dropped: its id is another session's on the agent", "method", env.Method, "session", sid)
		return true
	}
	s := d.sessions[sid]
	if s == nil || s.b == nil || (s.b.backend == "" && s.link.down == nil && !s.b.attaching) {
		return false
	}
	if s.link.down != nil || s.b.attaching {
		if env.Method == "session/cancel" {
			// Prompts still waiting for their backend end here.
			for _, ref := range slices.Clone(s.prompts) {
				if req := d.pending.get(ref); req != nil && req.link == nil {
					d.core.answer(req, json.RawMessage(`{"stopReason":"cancelled"}`))
				}
			}
		}
		return true
	}
	m := translate.Msg{Kind: translate.Notification, Method: env.Method, Body: d.toBackend(s, env.Params)}
	if env.Method == "session/cancel" {
		m.Grace = d.cfg.cancelGrace()
	}
	d.core.feed(s.link, m)
	if env.Method == "session/cancel" {
		d.core.armCancelGrace(s.id)
	}
	return true
}

// toBackend rewrites params for the session's backend id.
func (d *durableSessions) toBackend(s *session, params json.RawMessage) json.RawMessage {
	if s.b.backend == "" {
		return params
	}
	id, _ := json.Marshal(s.b.backend)
	return withKey(params, "sessionId", id)
}

// unalias maps an agent's output for a backend session id that is not the
// editor's back to the editor's id. drop is set for updates of a backend's
// own load that the editor must not see twice.
func (d *durableSessions) unalias(l *link, o translate.Out) (_ translate.Out, drop bool) {
	if !d.aliasing() {
		return o, false
	}
	sid := o.Session
	if sid == "" {
		sid = updateSession(o)
		if o.Kind == translate.Call {
			sid = gjson.GetBytes(o.Body, "sessionId").Str
		}
	}
	// A session closed here and now being loaded by the agent itself
	// (held) gets its replay: those updates are not the closed one's late
	// ones.
	if d.gone[aliasKey{l, sid}] && d.held[sid] == nil && o.Method == "session/update" && d.sessions[sid] == nil {
		d.core.repaired(RepairDrainedTurnUpdates, sid, "update for a session closed here: "+gjson.GetBytes(o.Body, "update.sessionUpdate").Str)
		return o, true
	}
	s := d.alias[aliasKey{l, sid}]
	if s == nil {
		if s = d.sessions[sid]; s == nil || s.b == nil || s.link != l {
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
