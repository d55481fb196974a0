package bridge

import (
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

// Durable sessions (durable.go): attaching a backend session to a stored
// one, closing and deleting sessions, and closing idle backends.

// --- attaching a backend session -------------------------------------------------

// whenAttached runs f once s has a live backend session, attaching one if
// needed (the transcript read first, for the preamble).
func (d *durableSessions) whenAttached(s *session, f func(*translate.Error)) {
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
	d.readHistory(s.id, false, func(primer string, _ int, _ error) {
		s.b.attaching = false
		d.attach(s, primer, func(*translate.Error, json.RawMessage) {})
	})
}

// attach opens a backend session for s: the backend's own resume or load
// when it advertises one, else a new session primed with the transcript.
// done gets the backend's answer.
func (d *durableSessions) attach(s *session, history string, done func(*translate.Error, json.RawMessage)) {
	s.b.attaching = true
	d.attachWith(s, history, s.b.bind, "", done)
}

// attachMethod picks how a backend session is reopened on an agent whose
// capabilities are known: its own session/resume, its own session/load, or
// a new session (always, right after a switch of agents).
func (d *durableSessions) attachMethod(s *session, bind Binding) string {
	caps := gjson.ParseBytes(d.caps[bind.Name])
	switch {
	case s.b.switched:
	case d.v2.relayingV2():
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
func (d *durableSessions) attachWith(s *session, history string, bind Binding, method string, done func(*translate.Error, json.RawMessage)) {
	if !bind.Dialect.PerSession && bind.Name == d.cfg.AgentName {
		l, err := d.links.controlLink(true)
		if err != nil {
			d.attached(s, err, nil, done)
			return
		}
		if method == "" {
			method = d.attachMethod(s, bind)
		}
		d.attachOn(l, s, history, bind, method, done)
		return
	}
	tr := bind.NewTranslator()
	spawn := Spawn{Cwd: s.cwd, Session: s.id}
	if sb, ok := tr.(translate.SpawnBuilder); ok {
		m := method
		if m == "" {
			m = d.attachMethod(s, bind)
		}
		cmd, err := sb.BuildSpawn(translate.Msg{Kind: translate.Request, Method: m, Body: d.attachParams(s, m), Session: s.id, At: time.Now()})
		if err != nil {
			d.attached(s, translate.Errorf(translate.CodeInternalError, "could not start agent %s for session %s: %v", bind.displayName(), s.id, err), nil, done)
			return
		}
		spawn.Command = cmd
	}
	d.links.openLink(spawn, bind, tr, func(l *link, o translate.Out) {
		if d.stopping() {
			s.b.attaching, s.b.waiters = false, nil
			return
		}
		if o.Kind != translate.Reply {
			if l.down == nil {
				d.links.retireLink(l, "initialize failed")
			}
			d.attached(s, translate.Errorf(translate.CodeInternalError,
				"session %s could not be reopened on agent %s: its initialize failed (%s); its transcript is kept, so fix the agent and try again",
				s.id, bind.displayName(), errorMessage(o.Body)).With("sessionId", s.id), nil, done)
			return
		}
		d.learnCaps(l, o.Body)
		m := method
		if m == "" {
			m = d.attachMethod(s, bind)
		}
		d.attachOn(l, s, history, bind, m, done)
	})
}

// attachParams are the params of the request that reopens s's backend.
func (d *durableSessions) attachParams(s *session, method string) json.RawMessage {
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
func (d *durableSessions) attachOn(l *link, s *session, history string, bind Binding, method string, done func(*translate.Error, json.RawMessage)) {
	body := d.attachParams(s, method)
	if method == "session/load" {
		s.b.suppress = true
		d.suppressing++
	}
	d.log.Info("re-attaching session", "session", s.id, "agent", bind.Name, "method", method, "backend", gjson.GetBytes(body, "sessionId").Str)
	d.core.internal(l, method, body, s.id, func(o translate.Out) {
		if s.b.suppress {
			s.b.suppress = false
			d.suppressing--
		}
		if d.stopping() {
			// Shutdown answers every pending request itself.
			s.b.attaching, s.b.waiters = false, nil
			return
		}
		if o.Kind == translate.Fail {
			if method != "session/new" {
				// The backend no longer has it (restarted, expired): a new
				// backend session, primed with the transcript.
				msg := "the agent could not reopen its own session; starting a new one primed with the transcript"
				if d.cfg.Sessions.NoPreamble || bind.Dialect.NoHistory {
					msg = "the agent could not reopen its own session; starting a new one (without the transcript: no history preamble)"
				}
				d.log.Warn(msg,
					"session", s.id, "method", method, "backend", gjson.GetBytes(body, "sessionId").Str, "error", errorMessage(o.Body))
				if !l.control {
					d.links.retireLink(l, method+" failed")
				}
				d.attachWith(s, history, bind, "session/new", done)
				return
			}
			if !l.control {
				d.links.retireLink(l, "session/new failed")
			}
			d.attached(s, translate.Errorf(translate.CodeInternalError,
				"session %s could not be reopened on agent %s: %s; its transcript is kept, so fix the agent and try again", s.id, bind.displayName(), errorMessage(o.Body)).With("sessionId", s.id), nil, done)
			return
		}
		if old := s.link; old != l && old.down == nil && !old.control {
			d.links.retireLink(old, "the session moved to another backend session")
		}
		s.link = l
		if method == "session/new" {
			id := gjson.GetBytes(o.Body, "sessionId").Str
			if id == "" {
				id = s.id
			}
			d.setBackend(s, id)
			if !d.cfg.Sessions.NoPreamble && !bind.Dialect.NoHistory {
				s.b.primer = history
			}
		} else {
			d.setBackend(s, gjson.GetBytes(body, "sessionId").Str)
		}
		s.b.resumeID = ""
		d.recordBackend(s)
		d.attached(s, nil, o.Body, done)
	})
}

// setBackend makes id, on s's link, the backend session id of s: the
// engine maps it to the editor's id both ways when they differ ("" or the
// editor's own id: no mapping). An alias left on that link by a session
// whose backend is gone must not capture this backend session's messages.
func (d *durableSessions) setBackend(s *session, id string) {
	if s.b.backend != "" {
		if k := (aliasKey{s.b.backendLink, s.b.backend}); d.alias[k] == s {
			delete(d.alias, k)
		}
	}
	s.b.backend, s.b.backendLink = "", nil
	if id == "" || id == s.id {
		return
	}
	k := aliasKey{s.link, id}
	if other := d.alias[k]; other != nil && other != s {
		other.b.backend, other.b.backendLink = "", nil
	}
	if d.alias == nil {
		d.alias = map[aliasKey]*session{}
	}
	delete(d.gone, k)
	d.alias[k] = s
	s.b.backend, s.b.backendLink = id, s.link
}

// recordBackend writes down which agent session serves s now, so that a
// later bridge process asks the agent for that very session again.
func (d *durableSessions) recordBackend(s *session) {
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
	d.store().Append(s.id, store.Record{Kind: store.KindBackend, Agent: s.b.bind.Name, Dialect: s.b.bind.Dialect.Name, Backend: id, Link: linkKind})
}

func (d *durableSessions) attached(s *session, err *translate.Error, result json.RawMessage, done func(*translate.Error, json.RawMessage)) {
	s.b.attaching = false
	waiters := s.b.waiters
	s.b.waiters = nil
	done(err, result)
	for _, w := range waiters {
		w(err)
	}
	if err == nil {
		d.armIdle(s)
	}
}

// stopping reports whether Serve is shutting down.
func (d *durableSessions) stopping() bool {
	select {
	case <-d.stopped:
		return true
	default:
		return false
	}
}

// --- close and delete ------------------------------------------------------------

// closeSession serves session/close and session/delete of a bridged
// session: its backend is closed (a link of its own retired, a shared one
// told with session/close when the agent has it) and, for delete, its
// transcript removed.
func (d *durableSessions) closeSession(req *request, env *translate.Envelope, del bool) bool {
	s := d.sessions[req.session]
	if s != nil && s.b == nil {
		d.bridgedOf(s)
	}
	if s != nil {
		d.endTurns(s, "the session was closed")
		if s.link.down == nil {
			if s.link.control {
				d.forgetBackend(s)
				if d.v2.relayingV2() || gjson.GetBytes(d.caps[s.b.bind.Name], "sessionCapabilities.close").IsObject() {
					d.core.internal(s.link, "session/close", d.toBackend(s, json.RawMessage(fmt.Sprintf(`{"sessionId":%q}`, s.id))), s.id, func(translate.Out) {})
				}
			} else {
				d.links.retireLink(s.link, "the session was closed")
			}
		}
		d.forget(s)
		d.onSession(SessionEvent{Kind: SessionClosed, Session: s.id})
	}
	if del {
		delete(d.closed, req.session)
	} else if s != nil {
		if d.closed == nil {
			d.closed = map[string]bool{}
		}
		d.closed[req.session] = true
	}
	if !del {
		if s != nil {
			d.core.answer(req, json.RawMessage("{}"))
			return true
		}
		// A copy for the closure: capturing env would move every
		// editor message's envelope to the heap (fromEditor's).
		held := *env
		d.store().Has(req.session, func(_ store.Meta, ok bool) {
			d.core.post(func() {
				if req.retired {
					return
				}
				if ok {
					d.core.answer(req, json.RawMessage("{}"))
					return
				}
				d.core.dispatch(req, &held)
			})
		})
		return true
	}
	d.store().Delete(req.session, func(err error) {
		d.core.post(func() {
			if req.retired {
				return
			}
			var busy *store.BusyError
			switch {
			case errors.As(err, &busy):
				d.core.fail(req, translate.Errorf(translate.CodeInternalError,
					"session %s cannot be deleted here: it is open in %s; close it there first",
					req.session, busyWhere(busy.PID)).With("sessionId", req.session).With("pid", busy.PID))
			case err == nil || s != nil:
				d.core.answer(req, json.RawMessage("{}"))
			case errors.Is(err, fs.ErrNotExist):
				d.core.fail(req, translate.Errorf(translate.CodeInvalidParams,
					"unknown sessionId %q: acp-bridge has no session by that id (see session/list)", req.session).With("sessionId", req.session))
			default:
				d.core.fail(req, translate.Errorf(translate.CodeInternalError, "session %s could not be deleted: %v", req.session, err))
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
func (d *durableSessions) endTurns(s *session, why string) {
	if d.v2.relayingV2() {
		d.endTurnsV2(s, why)
		return
	}
	if len(s.prompts) == 0 {
		return
	}
	d.log.Info("ending the running turn of a session being closed", "session", s.id, "why", why)
	if s.link.down == nil && !s.b.attaching {
		d.core.feed(s.link, translate.Msg{Kind: translate.Notification, Method: "session/cancel", Body: d.toBackend(s, json.RawMessage(`{"sessionId":`+mustJSON(s.id)+`}`)), Grace: d.cfg.cancelGrace()})
	}
	for _, ref := range slices.Clone(s.prompts) {
		if req := d.pending.get(ref); req != nil {
			d.core.answer(req, json.RawMessage(`{"stopReason":"cancelled"}`))
		}
	}
}

// endTurnsV2 is endTurns for a relayed v2 editor's session: v2 wants the
// running turn closed (idle, cancelled) before the close is answered, and
// prompts the agent has not taken answered -32800.
func (d *durableSessions) endTurnsV2(s *session, why string) {
	if len(s.prompts) == 0 && !d.v2.v2Running(s.id) {
		d.v2.v2EndTurn(s.id)
		return
	}
	d.log.Info("ending the running turn of a session being closed", "session", s.id, "why", why)
	if s.link.down == nil && (s.b == nil || !s.b.attaching) {
		d.core.feed(s.link, translate.Msg{Kind: translate.Notification, Method: "session/cancel", Body: d.toBackend(s, json.RawMessage(`{"sessionId":`+mustJSON(s.id)+`}`))})
	}
	for _, ref := range slices.Clone(s.prompts) {
		if req := d.pending.get(ref); req != nil {
			d.core.fail(req, translate.Errorf(codeRequestCancelled, "the prompt was not taken by the agent before %s", why).With("sessionId", s.id))
		}
	}
	d.v2.v2EndTurn(s.id)
}

// forgetBackend remembers that s's backend session on the shared link is
// closed: what the agent still sends for it (the end of a cancelled turn)
// is dropped rather than shown under an id the editor no longer has.
func (d *durableSessions) forgetBackend(s *session) {
	id := s.b.backend
	if id == "" {
		id = s.id
	}
	if d.gone == nil {
		d.gone = map[aliasKey]bool{}
	}
	d.gone[aliasKey{s.link, id}] = true
}

// --- idle cleanup ----------------------------------------------------------------

// armIdle (re)starts s's idle timer: after Durable.IdleTimeout without a
// turn its backend session is closed. A link of the session's own is
// closed with it; on the shared link the agent is told session/close (when
// it has it), and the link itself is closed once no session is left on it.
// The session re-attaches on its next request.
func (d *durableSessions) armIdle(s *session) { d.armIdleAfter(s, false) }

// armIdleAfter is armIdle; running says a relayed v2 turn was running when
// the timer was last looked at. Such a turn outlives its prompt's answer,
// so the timer starts again while it runs, and once more after it has
// ended: the session is idle a whole IdleTimeout after the turn's end,
// not whatever was left of the period the turn ended in.
func (d *durableSessions) armIdleAfter(s *session, running bool) {
	if !d.on() || s.b == nil || s.link.down != nil {
		return
	}
	timeout := d.cfg.Sessions.IdleTimeout
	if timeout <= 0 {
		return
	}
	if s.b.idle != nil {
		s.b.idle.Stop()
	}
	l := s.link
	s.b.idle = time.AfterFunc(timeout, func() {
		d.core.post(func() {
			if now := d.v2.v2Running(s.id); d.sessions[s.id] == s && (now || running) {
				d.armIdleAfter(s, now)
				return
			}
			if d.sessions[s.id] != s || s.link != l || l.down != nil || len(s.prompts) > 0 || s.b.attaching || d.busy(l, s.id) {
				return
			}
			d.log.Info("closing an idle backend session; it re-attaches on the next request", "session", s.id, "idle", timeout)
			if !l.control {
				d.links.retireLink(l, fmt.Sprintf("the session was idle for %s", timeout))
				return
			}
			d.detach(s, "idle", func() {
				if l.down == nil && len(d.sessions.on(l)) == 0 && !d.busy(l, "") {
					d.links.retireLink(l, fmt.Sprintf("every session on it was idle for %s", timeout))
				}
			})
		})
	})
}

// busy reports whether an editor request is pending on l (for session sid
// only, when not "").
func (d *durableSessions) busy(l *link, sid string) bool {
	for _, req := range d.pending.inOrder() {
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
