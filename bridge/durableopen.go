package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// Durable sessions (durable.go): session/list answered from the store, and
// session/load and session/resume of a stored session.

// --- list ------------------------------------------------------------------------

// listSessions serves session/list from the store: the sessions of the
// agents this bridge serves (the agent's own name, and every agent a
// session can switch to), or every session with Durable.ListAll. Several
// agents are listed by filtering pages of the whole store, so a page may
// hold fewer than listPage sessions; nextCursor still leads to the rest.
func (d *durableSessions) listSessions(req *request, params json.RawMessage) {
	cwd := gjson.GetBytes(params, "cwd").Str
	cursor := gjson.GetBytes(params, "cursor").Str
	var agents map[string]bool
	agent := ""
	if !d.cfg.Sessions.ListAll {
		agents = map[string]bool{d.cfg.AgentName: true}
		for _, b := range d.cfg.Sessions.Agents {
			agents[b.Name] = true
		}
		if len(agents) == 1 {
			agent, agents = d.cfg.AgentName, nil
		}
	}
	var found []store.Meta
	var page func(cursor string)
	page = func(cursor string) {
		d.store().List(cwd, agent, cursor, listPage, func(metas []store.Meta, next string, err error) {
			d.core.post(func() {
				if req.retired {
					return
				}
				if err != nil {
					d.core.fail(req, translate.Errorf(translate.CodeInvalidParams, "session/list: %v", err))
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
				d.answerList(req, found, next)
			})
		})
	}
	page(cursor)
}

func (d *durableSessions) answerList(req *request, metas []store.Meta, next string) {
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
	d.core.answer(req, b)
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
func (d *durableSessions) openStored(req *request, env *translate.Envelope) {
	sid := req.session
	if s := d.sessions[sid]; s != nil && s.b != nil && s.b.owned {
		d.reopen(req, s) // open here already
		return
	}
	st := d.store()
	meta, err := st.Acquire(sid)
	var busy *store.BusyError
	switch {
	case errors.Is(err, store.ErrDeleted):
		// The agent may still have its side of it; the user deleted the
		// conversation through the bridge, and it stays deleted.
		d.core.fail(req, translate.Errorf(translate.CodeResourceNotFound,
			"session %s was deleted: start a new session (session/list shows the ones there are)", sid).With("sessionId", sid))
		return
	case errors.Is(err, fs.ErrNotExist):
		d.core.dispatch(req, env) // not recorded by any bridge: the agent may know it
		return
	case errors.As(err, &busy):
		d.core.fail(req, translate.Errorf(translate.CodeInternalError,
			"session %s cannot be %s here: it is open in %s; close it there, or end that process, and try again",
			sid, pastTense(req.method), busyWhere(busy.PID)).With("sessionId", sid).With("pid", busy.PID))
		return
	case err != nil:
		d.core.fail(req, translate.Errorf(translate.CodeInternalError,
			"session %s cannot be %s: its transcript cannot be opened (%v)", sid, pastTense(req.method), err).With("sessionId", sid))
		return
	}
	bind := d.agentNamed(meta.Agent)
	if req.method == "session/load" && bind.Dialect.Relay && bind.Name == d.cfg.AgentName &&
		(meta.Backend == "" || meta.Backend == sid) && gjson.GetBytes(d.caps[bind.Name], "loadSession").Bool() {
		// The agent's own load of its own session, which replays itself;
		// when the agent no longer has it, ownLoadFailed opens it here.
		if d.held == nil {
			d.held = map[string]*store.Meta{}
		}
		d.held[sid] = &meta
		d.core.dispatch(req, env)
		return
	}
	d.openRecorded(req, meta, bind)
}

// ownLoadFailed takes over a session/load the agent was serving itself
// (openStored) and failed with -32002, resource not found: the agent no
// longer has the session (it forgot it on session/close, or lost it in a
// restart), but the store does, so the session is opened as one the agent
// cannot load: the store's replay, and a new agent session primed with the
// history. It reports whether it took req over (then req is not failed).
func (d *durableSessions) ownLoadFailed(req *request, errObj json.RawMessage) bool {
	meta := d.held[req.session]
	if req.method != "session/load" || meta == nil || gjson.GetBytes(errObj, "code").Int() != translate.CodeResourceNotFound {
		return false
	}
	delete(d.held, req.session)
	d.log.Info("the agent could not load its own session; opening it from the transcript", "session", req.session,
		"agent_error", gjson.GetBytes(errObj, "message").Str)
	d.openRecorded(req, *meta, d.agentNamed(meta.Agent))
	return true
}

// openRecorded opens the recorded session meta, taken in the store for
// req: its transcript replayed (load) and its backend re-attached.
func (d *durableSessions) openRecorded(req *request, meta store.Meta, bind Binding) {
	sid := req.session
	// A session the engine only routed so far (a prompt for an id it did
	// not know, sent before this load) becomes the recorded one.
	old := d.sessions[sid]
	s := &session{id: sid, link: d.parkedLink(bind), cwd: req.cwd, dirs: req.dirs}
	if old != nil {
		s.prompts, s.queued = old.prompts, old.queued
	}
	d.sessions[sid] = s
	s.b = &bridged{bind: bind, mcp: json.RawMessage("[]"), owned: true, attaching: true}
	if m := gjson.GetBytes(req.params, "mcpServers"); m.IsArray() {
		s.b.mcp = json.RawMessage(m.Raw)
	}
	if meta.Backend != sid && (meta.Agent == "" || meta.Agent == bind.Name) {
		s.b.resumeID = meta.Backend
	}
	d.log.Info("opening a recorded session", "session", sid, "method", req.method, "agent", bind.Name, "backend", meta.Backend)
	// The replay is the bridge's own work, however long the transcript:
	// the agent's answer is timed from the re-attach on.
	rearm := d.core.pauseTimeout(req)
	d.readHistory(sid, d.replays(req), func(primer string, skipped int, err error) {
		rearm()
		if skipped > 0 {
			d.log.Warn("session transcript had unreadable lines; they were skipped", "session", sid, "lines", skipped)
		}
		if err != nil {
			d.log.Warn("session transcript could not be read to its end", "session", sid, "error", err)
		}
		s.b.attaching = false
		if d.sessions[sid] != s {
			if !req.retired {
				d.core.fail(req, translate.Errorf(translate.CodeInternalError, "session %s was closed while it was being %s", sid, pastTense(req.method)).With("sessionId", sid))
			}
			return
		}
		d.attachHistory(s, primer, d.openAnswer(req, s, true))
	})
}

// reopen serves a load or resume of a session this bridge has open: a
// load replays its transcript again; the backend session stays. Requests
// for the session that arrive meanwhile (a prompt pipelined behind the
// load) wait until it is answered, as they do behind a first load: their
// updates must not read as history.
func (d *durableSessions) reopen(req *request, s *session) {
	if s.b.attaching {
		s.b.waiters = append(s.b.waiters, func(err *translate.Error) {
			if req.retired {
				return
			}
			if err != nil {
				d.core.fail(req, err)
				return
			}
			d.reopen(req, s)
		})
		return
	}
	s.cwd, s.dirs = req.cwd, req.dirs
	if m := gjson.GetBytes(req.params, "mcpServers"); m.IsArray() {
		s.b.mcp = json.RawMessage(m.Raw)
	}
	finish := d.openAnswer(req, s, false)
	s.b.attaching = true
	d.readHistory(s.id, d.replays(req), func(primer string, _ int, _ error) {
		s.b.attaching = false
		if d.sessions[s.id] != s {
			if !req.retired {
				d.core.fail(req, translate.Errorf(translate.CodeInternalError, "session %s was closed while it was being %s", s.id, pastTense(req.method)).With("sessionId", s.id))
			}
			return
		}
		d.attachHistory(s, primer, finish)
	})
}

// openAnswer returns what answers a load or resume once the backend is
// attached: the modes, models and config options of the backend's answer,
// with the bridge's own. fresh: the session was opened by this request, so
// a failure forgets it (and gives it up in the store).
func (d *durableSessions) openAnswer(req *request, s *session, fresh bool) func(*translate.Error, json.RawMessage) {
	return func(err *translate.Error, result json.RawMessage) {
		if req.retired {
			return
		}
		if err != nil {
			if fresh && d.sessions[s.id] == s {
				d.forget(s)
			}
			d.core.fail(req, err)
			return
		}
		out := map[string]json.RawMessage{}
		for _, k := range []string{"modes", "models", "configOptions"} {
			if v := gjson.GetBytes(result, k); v.Exists() {
				out[k] = json.RawMessage(v.Raw)
			}
		}
		if d.v2.relayingV2() {
			d.v2Opened(req, s, result)
			return
		}
		b, _ := json.Marshal(out)
		b = d.sessionOpened(req, s.id, b)
		d.core.answer(req, b)
	}
}

// --- a relayed v2 editor --------------------------------------------------------

// replays reports whether opening a recorded session replays its history
// to the editor: v1's session/load does, and v2's session/resume when it
// names where to replay from.
func (d *durableSessions) replays(req *request) bool {
	if req.method == "session/load" {
		return true
	}
	if !d.v2.relayingV2() || req.method != "session/resume" {
		return false
	}
	from := gjson.GetBytes(req.params, "replayFrom")
	return from.Exists() && from.Type != gjson.Null
}

// v2ReplayFrom refuses a relayed v2 editor's resume whose replayFrom the
// bridge cannot honour: v2 defines {"type":"start"}, and an unknown cursor
// must be refused, not replaced by another or by no replay.
func (d *durableSessions) v2ReplayFrom(req *request) *translate.Error {
	if !d.v2.relayingV2() {
		return nil
	}
	from := gjson.GetBytes(req.params, "replayFrom")
	if !from.Exists() || from.Type == gjson.Null || from.Get("type").Str == "start" {
		return nil
	}
	return translate.Errorf(translate.CodeInvalidParams,
		`session/resume: acp-bridge replays a recorded session from its start only, and replayFrom is %s: send {"type":"start"}, or no replayFrom for no replay`, from.Raw).
		With("replayFrom", json.RawMessage(from.Raw))
}

// v2Opened answers a relayed v2 editor's resume of a recorded session once
// its backend is attached: the current state_update v2 requires after the
// replay and before the answer, then the backend's own answer (its config
// options and commands; nothing of v1's modes or models).
func (d *durableSessions) v2Opened(req *request, s *session, result json.RawMessage) {
	state := "idle"
	if d.v2.v2Running(s.id) {
		state = "running"
	}
	params, _ := json.Marshal(map[string]any{"sessionId": s.id, "update": map[string]any{"sessionUpdate": "state_update", "state": state}})
	d.core.writeEditorSession(editorMsg{body: translate.NotificationFrame("session/update", params)}, s.id)
	out := map[string]json.RawMessage{}
	for _, k := range []string{"configOptions", "availableCommands", "_meta"} {
		if v := gjson.GetBytes(result, k); v.Exists() {
			out[k] = json.RawMessage(v.Raw)
		}
	}
	b, _ := json.Marshal(out)
	d.core.answer(req, d.sessionOpened(req, s.id, b))
}

// attachHistory attaches s's backend, priming a new backend session with
// primer, and then runs done and the waiters.
func (d *durableSessions) attachHistory(s *session, primer string, done func(*translate.Error, json.RawMessage)) {
	if s.link.down == nil {
		d.attached(s, nil, nil, done)
		return
	}
	d.attach(s, primer, done)
}

// busyWhere names the holder of a session the store found busy: another
// process, or this one (another connection of acp-bridge serve, or a
// session this editor has open already).
func busyWhere(pid int) string {
	if pid == os.Getpid() {
		return fmt.Sprintf("this acp-bridge process (pid %d), by another of its connections (another editor of acp-bridge serve) or already by this one", pid)
	}
	return fmt.Sprintf("another acp-bridge process (pid %d), probably another editor window", pid)
}

func pastTense(method string) string {
	if method == "session/resume" {
		return "resumed"
	}
	return "loaded"
}

// parkedLink is the stand-in link of a session with no backend now.
func (d *durableSessions) parkedLink(bind Binding) *link {
	return &link{bind: bind, calls: map[translate.Ref]string{}, cancel: func() {},
		down: translate.Errorf(translate.CodeInternalError, "the session has no backend session open")}
}

// agentNamed returns the binding of the agent called name, the Bridge's own
// agent when name is empty or unknown.
func (d *durableSessions) agentNamed(name string) Binding {
	if d.cfg.Sessions != nil {
		for _, b := range d.cfg.Sessions.Agents {
			if b.Name == name && b.NewTranslator != nil && b.Dial != nil {
				return b
			}
		}
	}
	return d.cfg.defaultBinding()
}

// forget drops a session from the engine (not from the store, where it is
// given up for other bridge processes to open).
func (d *durableSessions) forget(s *session) {
	delete(d.sessions, s.id)
	if s.b != nil {
		if s.b.owned {
			s.b.owned = false
			d.store().Release(s.id)
		}
		d.setBackend(s, "")
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
	// mark holds no message: it holds the session's next ones (holdTurn).
	mark bool
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
func (d *durableSessions) holdForStore(req *request, m editorMsg, failed bool) bool {
	if !d.on() || d.stopping() {
		return false
	}
	switch req.method {
	case "session/prompt":
		if s := d.sessions[req.session]; s == nil || s.b == nil || !s.b.owned {
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
	d.nextSeq++
	seq := d.nextSeq
	d.answers = append(d.answers, heldAnswer{seq: seq, msg: m, session: req.session})
	d.store().Written(func() {
		d.recordedSeq.Store(seq) // barriers complete in order
		signal(d.recorded)
	})
	return true
}

// holdTurn holds what session sid is sent from now on (the turn's updates,
// its answer) until the store has handed its prompt's record, just
// appended, to the OS (Store.Handed): an update of a turn never reaches
// the editor before the turn's start is in the transcript, so that a
// process killed mid-turn leaves an open turn there, which the next one to
// take the session marks with a gap record (store.Acquire). It costs the
// turn's first update one hand-off to the store's writer; the rest of the
// stream is not held.
func (d *durableSessions) holdTurn(sid string) {
	if d.stopping() {
		return
	}
	d.nextSeq++
	seq := d.nextSeq
	d.answers = append(d.answers, heldAnswer{seq: seq, session: sid, mark: true})
	d.store().Handed(func() {
		d.recordedSeq.Store(seq) // barriers complete in order
		signal(d.recorded)
	})
}

// queueBehindAnswer keeps the editor's order of a session's messages while
// its answer is held: a message for a session with a held answer (an
// update the agent sent after answering) waits behind it, as the agent
// sent it. It reports whether it took m.
func (d *durableSessions) queueBehindAnswer(m editorMsg, session string) bool {
	if d.releasing || session == "" {
		return false
	}
	for _, a := range d.answers {
		if a.session == session {
			d.answers = append(d.answers, heldAnswer{seq: d.answers[len(d.answers)-1].seq, msg: m, session: session})
			return true
		}
	}
	return false
}

// releaseAnswers writes the held answers whose records are written, and the
// messages queued behind them; all of them when all is set (shutdown: the
// store is closed after Serve, which writes everything).
func (d *durableSessions) releaseAnswers(all bool) {
	done := d.recordedSeq.Load()
	n := 0
	d.releasing = true
	for _, a := range d.answers {
		if !all && a.seq > done {
			break
		}
		if a.mark {
			n++
			continue
		}
		d.core.writeEditorSession(a.msg, a.session)
		n++
	}
	d.releasing = false
	d.answers = append(d.answers[:0], d.answers[n:]...)
}

// releaseSessions gives up, at shutdown, every session this bridge holds
// in the store, once what was recorded for it is written: another bridge
// process (the editor's next window) may open them.
func (d *durableSessions) releaseSessions() {
	if !d.on() {
		return
	}
	st := d.store()
	for _, s := range d.sessions {
		if s.b != nil && s.b.owned {
			s.b.owned = false
			st.Release(s.id)
		}
	}
	for sid := range d.held {
		st.Release(sid)
	}
	d.held = nil
}
