package codexapp

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// FromAgent handles one frame of the app-server.
func (t *translator) FromAgent(frame []byte) ([]translate.Out, error) {
	env, perr := translate.ParseEnvelope(frame)
	if perr != nil {
		return nil, fmt.Errorf("codex-app-server: unusable frame: %w", perr)
	}
	switch {
	case env.IsResponse():
		return t.response(&env)
	case env.IsRequest():
		return t.serverRequest(&env), nil
	case env.IsNotification():
		return t.notification(env.Method, gjson.ParseBytes(env.Params)), nil
	}
	return nil, fmt.Errorf("codex-app-server: a frame that is no request, notification or response")
}

// --- answers to the translator's requests --------------------------------------

func (t *translator) response(env *translate.Envelope) ([]translate.Out, error) {
	var id int64
	if err := json.Unmarshal(env.ID, &id); err != nil {
		return nil, fmt.Errorf("codex-app-server: an answer with id %s, which the bridge never sent", env.ID)
	}
	r := t.reqs[id]
	if r == nil {
		return nil, fmt.Errorf("codex-app-server: an answer with id %d, which is not outstanding", id)
	}
	delete(t.reqs, id)
	res := gjson.ParseBytes(env.Result)
	var errObj json.RawMessage
	if env.Error != nil {
		errObj = translate.ErrorObject(env.Error)
	}
	switch r.kind {
	case reqInitialize:
		if errObj != nil {
			t.initWait = 0
			return t.answerOrNot(r.ref, fail(r.ref, errObj)), nil
		}
		t.userAgent = res.Get("userAgent").Str
		t.initWait = 2
		return []translate.Out{
			notification("initialized"),
			t.request("account/read", map[string]any{}, &agentReq{kind: reqAccount, ref: r.ref}),
			t.request("model/list", map[string]any{}, &agentReq{kind: reqModels, ref: r.ref}),
		}, nil
	case reqAccount:
		if errObj == nil {
			t.needsAuth = res.Get("requiresOpenaiAuth").Bool() && res.Get("account").Type == gjson.Null
		}
		return t.initialized(r.ref), nil
	case reqModels:
		if errObj == nil {
			t.models = t.models[:0]
			for _, m := range res.Get("data").Array() {
				if m.Get("hidden").Bool() {
					continue
				}
				name := m.Get("displayName").Str
				if name == "" {
					name = m.Get("id").Str
				}
				t.models = append(t.models, model{m.Get("id").Str, name, m.Get("description").Str})
			}
		}
		return t.initialized(r.ref), nil
	case reqThreadStart, reqThreadResume:
		return t.opened(r, res, errObj), nil
	case reqThreadList:
		if errObj != nil {
			return t.answerOrNot(r.ref, fail(r.ref, errObj)), nil
		}
		sessions := []map[string]any{}
		for _, th := range res.Get("data").Array() {
			s := map[string]any{"sessionId": th.Get("id").Str, "cwd": th.Get("cwd").Str}
			if title := th.Get("name").Str; title != "" {
				s["title"] = title
			} else if title := th.Get("preview").Str; title != "" {
				s["title"] = title
			}
			if u := th.Get("updatedAt"); u.Type == gjson.Number {
				s["updatedAt"] = isoTime(u.Int())
			}
			sessions = append(sessions, s)
		}
		out := map[string]any{"sessions": sessions}
		if c := res.Get("nextCursor"); c.Type == gjson.String {
			out["nextCursor"] = c.Str
		}
		return t.answerOrNot(r.ref, reply(r.ref, out)), nil
	case reqUnsubscribe:
		// Closing a session the app-server no longer holds is done all the same.
		return t.answerOrNot(r.ref, reply(r.ref, struct{}{})), nil
	case reqTurnStart:
		s := t.agentSession(r.session)
		if s == nil {
			return nil, nil
		}
		if errObj != nil && t.closing[r.session] == s && s.turn == nil {
			delete(t.closing, r.session) // no turn to interrupt
		}
		if s.turn != r.turn {
			// The prompt was abandoned before Codex answered: its turn is
			// interrupted now that it has an id, and its items dropped.
			if id := res.Get("turn.id").Str; errObj == nil && id != "" && r.turn.id == "" {
				r.turn.id = id
				s.drop(id)
				if r.turn.cancelled {
					return t.interrupt(s, r.turn), nil
				}
			}
			return nil, nil
		}
		if errObj != nil {
			s.turn = nil
			return t.answerOrNot(r.ref, fail(r.ref, errObj)), nil
		}
		if s.turn.id == "" {
			s.turn.id = res.Get("turn.id").Str
		}
		if s.turn.cancelled {
			return t.interrupt(s, s.turn), nil
		}
		return nil, nil
	case reqInterrupt:
		s := t.agentSession(r.session)
		if errObj == nil && s != nil && t.closing[r.session] == s {
			// Interrupted: nothing more to do for a closed session, whose
			// thread may send no turn/completed now it is unsubscribed.
			delete(t.closing, r.session)
		}
		if errObj == nil || s == nil {
			return nil, nil
		}
		if s.turn != r.turn {
			// An abandoned turn's interrupt, refused: again at its
			// turn/started if it had not started.
			if !r.turn.started {
				r.turn.interrupt = false
				s.retry = r.turn
			}
			return []translate.Out{{Kind: translate.Note, Method: noteInterruptRefused, Session: s.id, Body: errObj}}, nil
		}
		tu := s.turn
		if !tu.started {
			// Too early: Codex has not started the turn it named. The
			// interrupt goes again at turn/started.
			tu.interrupt = false
			return nil, nil
		}
		// Codex refused: the prompt is answered cancelled now, the turn's
		// later items dropped.
		outs := []translate.Out{{Kind: translate.Note, Method: noteInterruptRefused, Session: s.id, Body: errObj}}
		outs = append(outs, t.closeTools(s, tu)...)
		s.turn = nil
		if tu.id != "" {
			s.drop(tu.id)
		}
		if tu.ref != 0 {
			outs = append(outs, reply(tu.ref, map[string]any{"stopReason": "cancelled",
				"_meta": map[string]any{"codex": map[string]any{"interruptError": errObj}}}))
		}
		return outs, nil
	}
	return nil, nil
}

func (t *translator) answerOrNot(ref translate.Ref, out translate.Out) []translate.Out {
	if ref == 0 {
		return nil
	}
	return []translate.Out{out}
}

// initialized answers the editor's initialize once account/read and
// model/list are both answered.
func (t *translator) initialized(ref translate.Ref) []translate.Out {
	t.initWait--
	if t.initWait > 0 {
		return nil
	}
	t.initDone = true
	if ref == 0 || ref != t.initRef {
		return nil
	}
	name, version := "codex", ""
	if before, _, ok := strings.Cut(t.userAgent, " "); ok || before != "" {
		if _, v, ok := strings.Cut(before, "/"); ok {
			version = v
		}
	}
	info := map[string]any{"name": name, "title": "Codex"}
	if version != "" {
		info["version"] = version
	}
	return []translate.Out{reply(ref, map[string]any{
		"protocolVersion": 1,
		"agentCapabilities": map[string]any{
			"loadSession":        true,
			"promptCapabilities": map[string]any{"image": true, "audio": false, "embeddedContext": true},
			"mcpCapabilities":    map[string]any{"http": true, "sse": false},
			"sessionCapabilities": map[string]any{
				"list": map[string]any{}, "resume": map[string]any{}, "close": map[string]any{},
			},
		},
		"agentInfo": info,
		"authMethods": []map[string]any{
			{"id": "codex-login", "name": "Log in with Codex", "description": "Run `codex login` in a terminal, where `codex app-server` runs"},
		},
	})}
}

// opened answers session/new, load or resume from thread/start or
// thread/resume's answer; load replays the thread's items first.
func (t *translator) opened(r *agentReq, res gjson.Result, errObj json.RawMessage) []translate.Out {
	if errObj != nil {
		return t.answerOrNot(r.ref, fail(r.ref, errObj))
	}
	th := res.Get("thread")
	id := th.Get("id").Str
	if id == "" {
		return t.answerOrNot(r.ref, failf(r.ref, translate.CodeInternalError, "codex-app-server: %s answered without a thread id", map[reqKind]string{reqThreadStart: "thread/start", reqThreadResume: "thread/resume"}[r.kind]))
	}
	s := t.sessions[id]
	if s == nil {
		s = &session{id: id, modeSent: true, modelSent: true}
		t.sessions[id] = s
	}
	s.cwd = res.Get("cwd").Str
	if s.mode == "" || s.modeSent {
		s.mode = modeOf(res.Get("approvalPolicy").Str, res.Get("sandbox.type").Str)
		if s.mode == "" {
			s.mode = "auto"
			s.modeSent = false
		}
	}
	if s.model == "" || s.modelSent {
		s.model = res.Get("model").Str
	}
	var outs []translate.Out
	if r.method == "session/load" {
		for _, tu := range th.Get("turns").Array() {
			for _, item := range tu.Get("items").Array() {
				outs = append(outs, t.replay(id, item)...)
			}
		}
	}
	result := map[string]any{
		"modes":         t.modes(s),
		"models":        t.modelState(s),
		"configOptions": t.configOptions(s),
	}
	if r.kind == reqThreadStart {
		result["sessionId"] = id
	}
	return append(outs, t.answerOrNot(r.ref, reply(r.ref, result))...)
}

func (t *translator) modes(s *session) map[string]any {
	var list []map[string]any
	for _, p := range presets {
		list = append(list, map[string]any{"id": p.id, "name": p.name, "description": p.description})
	}
	return map[string]any{"currentModeId": s.mode, "availableModes": list}
}

// modelList is the app-server's models plus the session's own.
func (t *translator) modelList(s *session) []model {
	list := append([]model(nil), t.models...)
	found := false
	for _, m := range list {
		found = found || m.id == s.model
	}
	if !found && s.model != "" {
		list = append([]model{{id: s.model, name: s.model}}, list...)
	}
	return list
}

func (t *translator) modelState(s *session) map[string]any {
	var list []map[string]any
	for _, m := range t.modelList(s) {
		e := map[string]any{"modelId": m.id, "name": m.name}
		if m.description != "" {
			e["description"] = m.description
		}
		list = append(list, e)
	}
	return map[string]any{"currentModelId": s.model, "availableModels": list}
}

func (t *translator) configOptions(s *session) []map[string]any {
	var modes, models []map[string]any
	for _, p := range presets {
		modes = append(modes, map[string]any{"value": p.id, "name": p.name, "description": p.description})
	}
	for _, m := range t.modelList(s) {
		e := map[string]any{"value": m.id, "name": m.name}
		if m.description != "" {
			e["description"] = m.description
		}
		models = append(models, e)
	}
	return []map[string]any{
		{"id": "mode", "name": "Approval Preset", "description": "Choose an approval and sandboxing preset for your session", "category": "mode", "type": "select", "currentValue": s.mode, "options": modes},
		{"id": "model", "name": "Model", "description": "Choose which model Codex should use", "category": "model", "type": "select", "currentValue": s.model, "options": models},
	}
}

// --- requests of the app-server -----------------------------------------------

func (t *translator) serverRequest(env *translate.Envelope) []translate.Out {
	id := append(json.RawMessage(nil), env.ID...)
	p := gjson.ParseBytes(env.Params)
	switch env.Method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
	default:
		return []translate.Out{answerError(id, translate.CodeMethodNotFound,
			fmt.Sprintf("acp-bridge (codex-app-server dialect) does not support %s: the editor cannot be asked it", env.Method))}
	}
	sid := p.Get("threadId").Str
	s := t.sessions[sid]
	if s == nil || s.turn == nil || s.turn.cancelled || (s.turn.id != "" && p.Get("turnId").Str != s.turn.id) {
		// No prompt waits for this turn: nobody can be asked.
		return []translate.Out{answer(id, map[string]any{"decision": "cancel"})}
	}
	itemID := p.Get("itemId").Str
	tu := s.turn
	var outs []translate.Out
	tc := map[string]any{"toolCallId": itemID, "status": "pending"}
	if tl := tu.tools[itemID]; tl != nil {
		tc["title"], tc["kind"] = tl.title, tl.kind
	} else if env.Method == "item/commandExecution/requestApproval" {
		tl := &tool{kind: "execute", title: commandTitle(p.Get("command").Str, p.Get("commandActions"))}
		tu.tools[itemID], tu.order = tl, append(tu.order, itemID)
		outs = append(outs, update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": itemID, "title": tl.title, "kind": tl.kind,
			"status": "pending", "rawInput": map[string]any{"command": p.Get("command").Str, "cwd": p.Get("cwd").Str}}))
		tc["title"], tc["kind"] = tl.title, tl.kind
	}
	if reason := p.Get("reason").Str; reason != "" {
		tc["rawInput"] = map[string]any{"reason": reason}
	}
	a := &approval{agentID: id, session: sid, turn: tu}
	command := env.Method == "item/commandExecution/requestApproval"
	alwaysName := "Yes, and don't ask again for these files in this session"
	if command {
		alwaysName = "Yes, and don't ask again for this command in this session"
	}
	decisions := p.Get("availableDecisions")
	switch {
	case !command || !decisions.Exists():
		a.always, a.alwaysID = json.RawMessage(`"acceptForSession"`), optAlways
	default:
		for _, d := range decisions.Array() {
			if d.Str == "acceptForSession" {
				a.always, a.alwaysID = json.RawMessage(`"acceptForSession"`), optAlways
				break
			}
			if am := d.Get("acceptWithExecpolicyAmendment"); d.IsObject() && am.Exists() && a.always == nil {
				a.always, a.alwaysID = json.RawMessage(d.Raw), optAmendment
				var words []string
				for _, w := range am.Get("execpolicy_amendment").Array() {
					words = append(words, w.Str)
				}
				alwaysName = "Yes, and don't ask again for commands that start with `" + strings.Join(words, " ") + "`"
			}
		}
	}
	allowName, rejectName := "Yes", "No, provide feedback"
	if command {
		allowName, rejectName = "Yes, proceed", "No, and tell Codex what to do differently"
	}
	options := []map[string]any{{"optionId": optAllow, "name": allowName, "kind": "allow_once"}}
	if a.always != nil {
		options = append(options, map[string]any{"optionId": a.alwaysID, "name": alwaysName, "kind": "allow_always"})
	}
	options = append(options, map[string]any{"optionId": optReject, "name": rejectName, "kind": "reject_once"})
	return append(outs, t.calls.Call(sid, "session/request_permission",
		marshal(map[string]any{"sessionId": sid, "toolCall": tc, "options": options}), a))
}

// --- notifications ----------------------------------------------------------------

// quiet are the notifications the translator does not use.
var quiet = map[string]bool{
	"thread/started": true, "thread/status/changed": true, "thread/readState/changed": true,
	"turn/started": true, "turn/diff/updated": true, "account/rateLimits/updated": true,
	"remoteControl/status/changed": true, "configWarning": true, "warning": true,
	"deprecationNotice": true, "thread/goal/cleared": true, "thread/goal/updated": true,
	"item/reasoning/summaryPartAdded": true, "mcpServer/startupStatus/updated": true,
	"account/updated": true, "thread/name/updated": true, "thread/settings/updated": true,
	"skills/changed": true, "app/list/updated": true, "thread/compacted": true,
	"model/rerouted": true, "item/plan/delta": true, "guardianWarning": true,
	"thread/closed": true, "thread/archived": true, "thread/unarchived": true,
	"hook/started": true, "hook/completed": true, "item/fileChange/patchUpdated": true,
	"item/fileChange/outputDelta": true, "item/commandExecution/terminalInteraction": true,
	"fs/changed": true, "thread/environment/connected": true, "thread/environment/disconnected": true,
}

func (t *translator) notification(method string, p gjson.Result) []translate.Out {
	if method == "serverRequest/resolved" {
		rid := p.Get("requestId").Raw
		return t.calls.Withdraw(func(a *approval) bool { return string(a.agentID) == rid }, nil)
	}
	sid := p.Get("threadId").Str
	s := t.agentSession(sid)
	if method == "turn/completed" {
		delete(t.closing, sid) // a turn of the thread has ended: nothing more to interrupt
	}
	tu := (*turn)(nil)
	if s != nil {
		tu = s.turn
	}
	turnID := p.Get("turnId").Str
	if method == "turn/completed" {
		turnID = p.Get("turn.id").Str
	}
	if method == "turn/started" && s != nil && s.retry != nil && s.retry.id == p.Get("turn.id").Str {
		r := s.retry
		s.retry, r.started = nil, true
		return t.interrupt(s, r)
	}
	// The items of a turn that is not the running one are dropped.
	if tu == nil || (turnID != "" && s.dropped[turnID]) {
		if method == "thread/tokenUsage/updated" && s != nil {
			s.setUsage(p.Get("tokenUsage"))
		}
		if !quiet[method] && !known[method] {
			return []translate.Out{note(noteIgnored, method)}
		}
		return nil
	}
	// The turn's id comes with turn/start's answer or turn/started; until
	// then a notification naming another turn (a resumed thread's usage)
	// is not the turn's.
	if method == "turn/started" && (tu.id == "" || tu.id == p.Get("turn.id").Str) {
		tu.id, tu.started = p.Get("turn.id").Str, true
		if tu.cancelled {
			return t.interrupt(s, tu)
		}
		return nil
	}
	if method == "thread/tokenUsage/updated" && (tu.id == "" || turnID != tu.id) {
		s.setUsage(p.Get("tokenUsage"))
		if tu.id == "" {
			tu.base = s.total
		}
		return nil
	}
	if turnID != "" && tu.id != "" && tu.id != turnID {
		return nil
	}
	switch method {
	case "warning":
		if msg := p.Get("message").Str; msg != "" {
			return []translate.Out{chunk(sid, "agent_message_chunk", msg)}
		}
		return nil
	case "item/agentMessage/delta":
		tu.streamed[p.Get("itemId").Str] = true
		return []translate.Out{chunk(sid, "agent_message_chunk", p.Get("delta").Str)}
	case "item/reasoning/summaryTextDelta", "item/reasoning/textDelta":
		tu.streamed[p.Get("itemId").Str] = true
		return []translate.Out{chunk(sid, "agent_thought_chunk", p.Get("delta").Str)}
	case "item/started":
		return t.itemStarted(s, tu, p.Get("item"))
	case "item/completed":
		return t.itemCompleted(s, tu, p.Get("item"))
	case "item/commandExecution/outputDelta":
		tl := tu.tools[p.Get("itemId").Str]
		if tl == nil {
			return nil
		}
		tl.output.WriteString(p.Get("delta").Str)
		return []translate.Out{update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": p.Get("itemId").Str,
			"content": textContent(tl.output.String())})}
	case "item/mcpToolCall/progress":
		if tu.tools[p.Get("itemId").Str] == nil {
			return nil
		}
		return []translate.Out{update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": p.Get("itemId").Str,
			"content": textContent(p.Get("message").Str)})}
	case "turn/plan/updated":
		var entries []map[string]any
		for _, st := range p.Get("plan").Array() {
			entries = append(entries, map[string]any{"content": st.Get("step").Str, "priority": "medium", "status": planStatus(st.Get("status").Str)})
		}
		if entries == nil {
			entries = []map[string]any{}
		}
		return []translate.Out{update(sid, map[string]any{"sessionUpdate": "plan", "entries": entries})}
	case "thread/tokenUsage/updated":
		u := p.Get("tokenUsage")
		s.setUsage(u)
		out := map[string]any{"sessionUpdate": "usage_update", "used": u.Get("last.totalTokens").Int(), "size": s.window}
		return []translate.Out{update(sid, out)}
	case "error":
		if p.Get("willRetry").Bool() {
			return []translate.Out{note(noteRetry, p.Get("error.message").Str)}
		}
		tu.errObj = json.RawMessage(p.Get("error").Raw)
		return nil
	case "turn/completed":
		status := p.Get("turn.status").Str
		if e := p.Get("turn.error"); e.IsObject() {
			tu.errObj = json.RawMessage(e.Raw)
		}
		return t.endTurn(s, status)
	}
	if quiet[method] {
		return nil
	}
	return []translate.Out{note(noteIgnored, method)}
}

// known are the notifications handled above, for the note of dropped ones.
var known = map[string]bool{
	"item/agentMessage/delta": true, "item/reasoning/summaryTextDelta": true, "item/reasoning/textDelta": true,
	"item/started": true, "item/completed": true, "item/commandExecution/outputDelta": true,
	"item/mcpToolCall/progress": true, "turn/plan/updated": true, "thread/tokenUsage/updated": true,
	"error": true, "turn/completed": true, "warning": true,
}

func (s *session) setUsage(u gjson.Result) {
	tot := u.Get("total")
	s.total = usage{tot.Get("inputTokens").Int(), tot.Get("cachedInputTokens").Int(), tot.Get("outputTokens").Int(),
		tot.Get("reasoningOutputTokens").Int(), tot.Get("totalTokens").Int()}
	if w := u.Get("modelContextWindow"); w.Type == gjson.Number {
		s.window = w.Int()
	}
}

// endTurn answers the session's prompt: status is the turn's (completed,
// interrupted, failed), "cancelled" when the bridge ends it itself.
func (t *translator) endTurn(s *session, status string) []translate.Out {
	tu := s.turn
	s.turn = nil
	if tu.id != "" {
		s.drop(tu.id)
	}
	outs := t.closeTools(s, tu)
	outs = append(outs, t.calls.Withdraw(func(a *approval) bool { return a.turn == tu }, nil)...)
	if tu.ref == 0 {
		return outs
	}
	u := usage{s.total.input - tu.base.input, s.total.cached - tu.base.cached, s.total.output - tu.base.output,
		s.total.reasoning - tu.base.reasoning, s.total.total - tu.base.total}
	result := map[string]any{}
	switch {
	case tu.cancelled || status == "interrupted" || status == "cancelled":
		result["stopReason"] = "cancelled"
	case status == "failed":
		return append(outs, fail(tu.ref, turnError(tu.errObj)))
	default:
		result["stopReason"] = "end_turn"
	}
	if u.total > 0 {
		result["usage"] = map[string]any{"inputTokens": u.input, "outputTokens": u.output, "cachedReadTokens": u.cached,
			"thoughtTokens": u.reasoning, "totalTokens": u.total}
	}
	return append(outs, reply(tu.ref, result))
}

// turnError is the prompt's error for a failed turn: Codex's words.
func turnError(raw json.RawMessage) json.RawMessage {
	e := gjson.ParseBytes(raw)
	msg := e.Get("message").Str
	if msg == "" {
		msg = "the turn failed and Codex gave no reason"
	}
	info := e.Get("codexErrorInfo")
	if info.Str == "unauthorized" || info.Get("unauthorized").Exists() {
		return translate.Errorf(translate.CodeAuthRequired, "Codex: %s: %s", msg, loginHint).With("codex", json.RawMessage(raw)).JSON()
	}
	err := translate.Errorf(translate.CodeInternalError, "Codex: %s", msg)
	if len(raw) > 0 {
		err = err.With("codex", json.RawMessage(raw))
	}
	return err.JSON()
}

// closeTools closes the turn's tool calls that are still running.
func (t *translator) closeTools(s *session, tu *turn) []translate.Out {
	var outs []translate.Out
	for _, id := range tu.order {
		if tl := tu.tools[id]; !tl.done {
			tl.done = true
			outs = append(outs, update(s.id, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "failed"}))
		}
	}
	return outs
}

func chunk(sid, kind, text string) translate.Out {
	return update(sid, map[string]any{"sessionUpdate": kind, "content": map[string]any{"type": "text", "text": text}})
}

func textContent(text string) []map[string]any {
	return []map[string]any{{"type": "content", "content": map[string]any{"type": "text", "text": text}}}
}

func planStatus(s string) string {
	switch s {
	case "inProgress":
		return "in_progress"
	case "completed":
		return "completed"
	}
	return "pending"
}

// isoTime formats Unix seconds as RFC 3339 in UTC.
func isoTime(sec int64) string {
	return time.Unix(sec, 0).UTC().Format(time.RFC3339)
}
