package check

import (
	"fmt"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate/acpschema"
)

// ACP v2 (Options.Protocol 2). The scenarios speak v2 to the agent: the
// prompt's answer only acknowledges it (with the inserted user message's
// messageId) and the turn ends with an idle state_update, which should
// name the stop reason (and must, "cancelled", after session/cancel). Every message the agent writes is validated against the v2
// schema. The v1 scenarios whose subject v2 removed (client fs and
// terminal, session modes) are reported SKIP as not applicable.

// initParamsV2 are the initialize params of a v2 client that offers no
// optional capability: v2 has no client fs or terminal.
func initParamsV2(version int) map[string]any {
	return map[string]any{
		"protocolVersion": version,
		"info":            map[string]any{"name": "acp-bridge-check", "version": "1"},
		"capabilities":    map[string]any{},
	}
}

var v2Scenarios = []Scenario{
	{"initialize", Mandatory, "initialize asking for version 2 is answered 2", scV2Initialize},
	{"reinitialize", Advisory, "a second initialize is answered", scReinitialize},
	{"session-new", Mandatory, "session/new answers a sessionId, no update before it", scSessionNew},
	{"prompt-stream", Mandatory, "a prompt is acknowledged with a messageId, streams, and ends with an idle state_update", scV2PromptStream},
	{"prompt-echo", Mandatory, "the prompt is echoed as a user message under the messageId its acknowledgement named", scV2PromptEcho},
	{"stop-reason", Advisory, "the idle state_update that ends a turn names its stop reason", scV2StopReason},
	{"cancel", Mandatory, "session/cancel ends the turn: an idle state_update with stop reason cancelled", scV2Cancel},
	{"cancel-permission", Advisory, "a turn cancelled while its permission request is pending ends idle with cancelled once the request is answered", scV2CancelPermission},
	{"concurrent-prompt", Advisory, "a second prompt on a busy session is refused or waits; it does not stream alongside", scV2ConcurrentPrompt},
	{"unknown-method", Mandatory, "an unknown method is answered -32601", scUnknownMethod},
	{"notification", Mandatory, "notifications are never answered", scNotification},
	{"malformed-json", Mandatory, "malformed JSON is answered -32700 and the agent keeps working", scMalformed},
	{"invalid-request", Mandatory, "an invalid request is answered -32600", scInvalidRequest},
	{"unknown-session", Mandatory, "a prompt for an unknown session is an error whose data, if any, is SessionNotFoundErrorData", scV2UnknownSession},
	{"stdout-purity", Mandatory, "every line the agent writes is one JSON message", scStdoutPurity},
	{"set-mode", Capability, "session/set_mode answers an object", nil},
	{"client-requests", Capability, "agent→client requests are well formed", nil},
	// Last: it reports the schema findings of every scenario before it.
	{"schema", Mandatory, "every message the agent writes, in every scenario, matches the ACP v2 schema", scSchema},
}

// protocolV2 runs the v2 scenarios.
var protocolV2 = &protocol{
	name:          "v2",
	scenarios:     v2Scenarios,
	unknown:       "ACP v2 scenario",
	notApplicable: v2NotApplicable,
	version:       2,
	initParams:    initParamsV2(2),
	capabilities:  "capabilities",
	versionRule:   "a v2 agent answers 2",
	loadSchema:    acpschema.LoadSchemaV2,
	validate:      (*run).validateV2,
	turnEnded: func(r *run, m Msg, promptID string) bool {
		return isState(m, r.sid, "idle") || m.IsError() && m.id == promptID
	},
	turnEnd:    "idle state_update",
	stopReason: "params.update.stopReason",
}

// v2NotApplicable are the v1 scenarios whose subject v2 removed, with why;
// a v2 run reports them SKIP without dialling the agent.
var v2NotApplicable = map[string]string{
	"set-mode":        "v2 removed session modes (session/set_mode); modes are config options",
	"client-requests": "v2 removed the client's fs/* and terminal/* methods",
}

// V2Scenarios lists the scenarios of a version 2 run, in order.
func V2Scenarios() []Scenario {
	out := make([]Scenario, len(v2Scenarios))
	copy(out, v2Scenarios)
	return out
}

// validateV2 checks one message from the agent: what the v2 schema says of
// it, and what only the transcript knows (which request a response
// answers).
func (r *run) validateV2(s *Schema, m Msg) []string {
	probs := unexpectedMembers(m)
	answered := ""
	if m.IsResponse() {
		p, method := r.answered(m)
		probs = append(probs, p...)
		if !strings.HasPrefix(method, "acp-check/") {
			answered = method
		}
	}
	return append(probs, s.ValidateToClient(m.Raw, answered)...)
}

func scV2Initialize(r *run) verdict {
	m, v, ok := r.initializeChecked()
	if !ok {
		return v
	}
	return pass("protocolVersion 2; agent %q", m.Get("result.info.name").Str)
}

// isState reports a state_update of session sid, in state state ("" for
// any).
func isState(m Msg, sid, state string) bool {
	if !isUpdate(m, sid) || m.Get("params.update.sessionUpdate").Str != "state_update" {
		return false
	}
	return state == "" || m.Get("params.update.state").Str == state
}

// promptV2 sends a prompt and waits for its acknowledgement: a result
// carrying the messageId of the inserted user message. An error answer is
// returned as is, with no error.
func (r *run) promptV2(text string) (Msg, error) {
	m, err := r.call("session/prompt", textPrompt(r.sid, text))
	if err != nil {
		return m, err
	}
	if m.Get("error").Exists() && m.Get("result").Exists() {
		return m, fmt.Errorf("the prompt's answer carries both result and error")
	}
	if !m.IsError() {
		if id := m.Get("result.messageId"); id.Type != gjson.String || id.Str == "" {
			return m, fmt.Errorf("the prompt's acknowledgement has result.messageId %s, want the inserted user message's id (a non-empty string)", orAbsent(id))
		}
	}
	return m, nil
}

// openTurnV2 opens a session and sends a prompt of text, called what in
// reasons. ok false means the session could not be opened or the prompt
// was not acknowledged: v is the scenario's NOT RUN.
func (r *run) openTurnV2(what, text string) (ack Msg, v verdict, ok bool) {
	if v, ok := r.setup(); !ok {
		return ack, v, false
	}
	ack, err := r.promptV2(text)
	if err != nil || ack.IsError() {
		return ack, notRun("%s was not acknowledged: %v %s", what, err, ack.Get("error").Raw), false
	}
	return ack, verdict{}, true
}

// awaitIdle waits for the session's idle state_update.
func (r *run) awaitIdle(d time.Duration) (Msg, error) {
	return r.await(d, func(m Msg) bool { return isState(m, r.sid, "idle") })
}

// stopReasonOf is the idle state_update's stop reason, or a failure naming
// the field.
func stopReasonOf(idle Msg) (string, error) {
	s := idle.Get("params.update.stopReason")
	if s.Type != gjson.String || s.Str == "" {
		return "", fmt.Errorf("params.update.stopReason of the idle state_update is %s; the turn's end should say why it ended", orAbsent(s))
	}
	return s.Str, nil
}

func scV2PromptStream(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	ack, err := r.promptV2(r.opts.Prompt)
	if err != nil {
		if ack.Raw == nil {
			return fail(nil, "%s", waitErr(fmt.Sprintf("session/prompt %q", r.opts.Prompt), err))
		}
		return fail([]int{ack.N}, "%v", err)
	}
	if ack.IsError() {
		return fail([]int{ack.N}, "the prompt was answered with an error")
	}
	idle, err := r.awaitIdle(r.opts.Timeout)
	if err != nil {
		return fail([]int{ack.N}, "%s", waitErr("the turn never ended: no idle state_update after the acknowledgement", err))
	}
	var content int
	for _, n := range r.updatesBetween(r.sid, 0, idle.N) {
		if k := r.messages()[n].Get("params.update.sessionUpdate").Str; k == "agent_message_chunk" || k == "agent_message" {
			content++
		}
	}
	if content == 0 {
		return fail([]int{ack.N, idle.N}, "no agent_message or agent_message_chunk before the idle state_update; the editor shows nothing for the turn")
	}
	r.settle()
	return pass("acknowledged %s, %d message update(s), then idle", ack.Get("result.messageId").Raw, content)
}

// scV2PromptEcho: the messageId of a prompt's acknowledgement names the
// user message the prompt inserted, and the user-message update that
// carries that id must be sent during the live session (before or after
// the acknowledgement; PromptResponse.messageId). Without it an editor
// that draws the conversation from updates never shows what the user
// said. The echo must say what the user said: its text holds the prompt.
func scV2PromptEcho(r *run) verdict {
	ack, v, ok := r.openTurnV2("the prompt", r.opts.Prompt)
	if !ok {
		return v
	}
	id := ack.Get("result.messageId").Str
	idle, err := r.awaitIdle(r.opts.Timeout)
	if err != nil {
		return notRun("%s", waitErr("the turn never ended: no idle state_update", err))
	}
	r.settle() // an echo written with the turn's end is in the transcript too
	var lines []int
	var kinds []string
	var text strings.Builder
	for _, m := range r.messages() {
		if !isUpdate(m, r.sid) || m.Get("params.update.messageId").Str != id {
			continue
		}
		u := m.Get("params.update")
		switch kind := u.Get("sessionUpdate").Str; kind {
		case "user_message":
			// A whole-message upsert: its content replaces what came
			// before; an omitted content leaves it.
			if c := u.Get("content"); c.Exists() {
				text.Reset()
				for _, b := range c.Array() {
					text.WriteString(b.Get("text").Str)
				}
			}
		case "user_message_chunk":
			text.WriteString(u.Get("content.text").Str)
		default:
			continue
		}
		lines = append(lines, m.N)
		kinds = append(kinds, u.Get("sessionUpdate").Str)
	}
	if len(lines) == 0 {
		return fail([]int{ack.N, idle.N}, "no user_message or user_message_chunk with messageId %q, the id the prompt's acknowledgement named: a v2 agent must echo the user's message during the live session, or the editor never shows it", id)
	}
	if !strings.Contains(text.String(), r.opts.Prompt) {
		return fail(lines, "the echo under messageId %q reads %q, which does not hold the prompt sent (%q)", id, text.String(), r.opts.Prompt)
	}
	return pass("echoed under %q as %s", id, strings.Join(kinds, ", "))
}

// scV2StopReason: the agent SHOULD include a stop reason on the idle
// update that ends foreground work (StateUpdate); without it the editor
// cannot tell a finished turn from a refusal or an error.
func scV2StopReason(r *run) verdict {
	if _, v, ok := r.openTurnV2("the prompt", r.opts.Prompt); !ok {
		return v
	}
	idle, err := r.awaitIdle(r.opts.Timeout)
	if err != nil {
		return notRun("%s", waitErr("no idle state_update", err))
	}
	stop, err := stopReasonOf(idle)
	if err != nil {
		return fail([]int{idle.N}, "%v", err)
	}
	return pass("idle with %s", stop)
}

func scV2Cancel(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	ack, err := r.promptV2(r.opts.LongPrompt)
	if err != nil {
		return notRun("the long prompt: %v", err)
	}
	if ack.IsError() {
		return notRun("the long prompt was refused: %s", ack.Get("error").Raw)
	}
	m, err := r.await(r.opts.CancelAfter, func(m Msg) bool {
		return isUpdate(m, r.sid) && !isState(m, r.sid, "running")
	})
	if err == nil && isState(m, r.sid, "idle") {
		return notRun("the turn for %q ended before it could be cancelled; give a prompt that keeps the agent busy (--long-prompt)", r.opts.LongPrompt)
	}
	r.holdPermissions = true
	cn, err := r.notify("session/cancel", map[string]any{"sessionId": r.sid})
	if err != nil {
		return notRun("sending session/cancel: %v", err)
	}
	idle, err := r.awaitCancelled(r.opts.Timeout, func(m Msg) bool { return isState(m, r.sid, "idle") })
	if err != nil {
		return fail([]int{cn.N}, "%s", waitErr(fmt.Sprintf("no idle state_update within %s of session/cancel", r.opts.Timeout), err))
	}
	// The cancelled reason is a MUST where other stop reasons are SHOULDs.
	if stop := idle.Get("params.update.stopReason"); stop.Str != "cancelled" {
		return fail([]int{cn.N, idle.N}, "params.update.stopReason of the idle state_update after session/cancel is %s, want \"cancelled\"", orAbsent(stop))
	}
	return pass("idle with cancelled %s after session/cancel", (idle.At - cn.At).Round(time.Millisecond))
}

func scV2CancelPermission(r *run) verdict {
	r.holdPermissions = true
	if _, v, ok := r.openTurnV2("the prompt", r.opts.PermissionPrompt); !ok {
		return v
	}
	m, err := r.await(r.opts.Timeout, func(m Msg) bool {
		return m.method == "session/request_permission" || isState(m, r.sid, "idle")
	})
	if err != nil {
		return notRun("%s", waitErr("waiting for a permission request", err))
	}
	if !m.IsRequest() {
		return skip("the agent asked no permission for %q (--permission-prompt)", r.opts.PermissionPrompt)
	}
	cn, err := r.notify("session/cancel", map[string]any{"sessionId": r.sid})
	if err != nil {
		return notRun("sending session/cancel: %v", err)
	}
	idle, err := r.awaitCancelled(r.opts.Timeout, func(m Msg) bool { return isState(m, r.sid, "idle") })
	if err != nil {
		return fail([]int{m.N, cn.N}, "%s", waitErr("no idle state_update after session/cancel and the permission request answered \"cancelled\"", err))
	}
	if stop := idle.Get("params.update.stopReason"); stop.Str != "cancelled" {
		return fail([]int{m.N, cn.N, idle.N}, "params.update.stopReason of the idle state_update after session/cancel is %s, want \"cancelled\"", orAbsent(stop))
	}
	return pass("idle with cancelled after the permission request was answered")
}

func scV2ConcurrentPrompt(r *run) verdict {
	ackA, v, ok := r.openTurnV2("the long prompt", r.opts.LongPrompt)
	if !ok {
		return v
	}
	if first, err := r.await(r.opts.CancelAfter, func(m Msg) bool { return isUpdate(m, r.sid) && !isState(m, r.sid, "running") }); err == nil && isState(first, r.sid, "idle") {
		return notRun("the turn for %q ended before a second prompt could be sent (--long-prompt)", r.opts.LongPrompt)
	}
	ackB, err := r.promptV2(r.opts.Prompt)
	defer func() {
		_, _ = r.notify("session/cancel", map[string]any{"sessionId": r.sid})
		r.drain(r.opts.Quiet)
	}()
	if err != nil {
		if ackB.Raw == nil {
			return fail(nil, "%s", waitErr("the second prompt", err))
		}
		return fail([]int{ackB.N}, "%v", err)
	}
	if ackB.IsError() {
		return pass("the second prompt was refused: %s", ackB.Get("error.message").Str)
	}
	// Acknowledged: it must wait for the first turn. Streaming to two agent
	// messages in turn (A, B, A) is two turns running alongside.
	order, lines, ok := r.watchReplies(ackA.N + 1)
	// Ending the first turn "cancelled" for it is preemption: the client
	// cancelled nothing (its session/cancel comes after this, deferred).
	for _, m := range r.messages() {
		if m.N > ackB.N && isState(m, r.sid, "idle") && m.Get("params.update.stopReason").Str == "cancelled" {
			return fail([]int{ackB.N, m.N}, "the session went idle \"cancelled\" %s after the second prompt was acknowledged, and the client sent no session/cancel: the agent preempted the running turn for the second prompt. \"cancelled\" is the stop reason of a turn the client cancelled; refuse the second prompt, or let it wait for the first turn to end",
				(m.At - ackB.At).Round(time.Millisecond))
		}
	}
	if !ok {
		return fail(lines, "agent messages %s streamed in turn: the second prompt ran alongside the first", strings.Join(order, ", "))
	}
	return pass("the second prompt was acknowledged and did not stream alongside the first")
}

// watchReplies follows the agent messages sid streams after transcript
// index from, in the order they stream, and reports false with the order
// up to the first message that streams again after another one did.
//
// How long it watches is measured by the agent's own progress, not only
// by the clock, so that a loaded machine cannot hide an overlap: it
// watches for twice the quiet period, and further while the first turn is
// still streaming (up to five messages' worth); once a second reply has
// begun it watches until the session goes idle and then a quiet period
// more, so the first turn has the chance to stream again after it. The
// whole is bounded by the timeout.
func (r *run) watchReplies(from int) (order []string, lines []int, ok bool) {
	start := time.Now()
	deadline := start.Add(r.opts.Timeout)
	seen := map[string]bool{}
	var last, idleAt time.Time
	chunks, newest := 0, -1
	// observe takes one message in; false means a reply streamed again.
	observe := func(m Msg) bool {
		if m.N <= newest {
			return true // read from the transcript already
		}
		newest = m.N
		if !isUpdate(m, r.sid) {
			return true
		}
		if isState(m, r.sid, "idle") {
			idleAt = time.Now()
			return true
		}
		k := m.Get("params.update.sessionUpdate").Str
		if k != "agent_message_chunk" && k != "agent_message" {
			return true
		}
		chunks++
		last = time.Now()
		id := m.Get("params.update.messageId").Str
		if len(order) > 0 && order[len(order)-1] == id {
			return true
		}
		order = append(order, id)
		lines = append(lines, m.N)
		if seen[id] {
			return false
		}
		seen[id] = true
		idleAt = time.Time{}
		return true
	}
	// What came while the second prompt was being acknowledged.
	for _, m := range r.messages()[from:] {
		if !observe(m) {
			return order, lines, false
		}
	}
	for {
		until := start.Add(r.opts.Quiet * 2)
		switch {
		case len(order) >= 2 && !idleAt.IsZero():
			until = idleAt.Add(r.opts.Quiet)
		case len(order) >= 2:
			until = deadline
		case chunks > 0 && chunks < 5 && last.Add(r.opts.Quiet).After(until):
			until = last.Add(r.opts.Quiet)
		}
		if until.After(deadline) {
			until = deadline
		}
		m, err := r.next(until)
		if err != nil {
			return order, lines, true
		}
		if !observe(m) {
			return order, lines, false
		}
	}
}

func scV2UnknownSession(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	const sid = "acp-check-no-such-session"
	m, err := r.call("session/prompt", textPrompt(sid, r.opts.Prompt))
	if err != nil {
		return fail(nil, "%s", waitErr("a prompt for an unknown session", err))
	}
	if !m.IsError() {
		return fail([]int{m.N}, "a prompt for a session that was never created was served; it must be an error")
	}
	code := m.Get("error.code").Int()
	data := m.Get("error.data")
	if code != -32002 || !data.Exists() || data.Type == gjson.Null {
		return pass("error %d (no typed data to check)", code)
	}
	s, err := acpschema.LoadSchemaV2()
	if err != nil {
		return notRun("%v", err)
	}
	if probs := s.Validate("SessionNotFoundErrorData", []byte(data.Raw)); len(probs) > 0 {
		return fail([]int{m.N}, "error.data of -32002 is not SessionNotFoundErrorData: %s", strings.Join(prefix("error.data.", probs), "; "))
	}
	if got := data.Get("sessionId").Str; got != sid {
		return fail([]int{m.N}, "error.data.sessionId is %q, not the unknown session %q the prompt named", got, sid)
	}
	return pass("error -32002 with data.sessionId %q", sid)
}
