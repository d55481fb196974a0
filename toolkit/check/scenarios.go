package check

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// run is one scenario's connection with the steps scenarios share.
type run struct {
	*peer
	init gjson.Result // the initialize result
	sid  string
	// prior are the schema findings of the scenarios run before this one.
	prior []finding
	// authenticated is set once check has called authenticate.
	authenticated bool
	// proto is the ACP version the run speaks.
	proto *protocol
}

// finding is one message that does not match the schema.
type finding struct {
	scenario string
	n        int    // the message's index in that scenario's transcript
	line     string // FormatLine of the message
	probs    []string
}

// findings validates every message the agent wrote on this connection
// against the schema of the run's version.
func (r *run) findings(scenario string) []finding {
	s, err := r.proto.loadSchema()
	if err != nil {
		return nil
	}
	var out []finding
	for _, m := range r.messages() {
		if m.Out || !m.obj {
			continue // stdout-purity judges non-JSON lines
		}
		if p := r.proto.validate(r, s, m); len(p) > 0 {
			out = append(out, finding{scenario, m.N, FormatLine(m), p})
		}
	}
	return out
}

// clientCapabilities are what check advertises: a plain editor that can
// read files and nothing more, so that an agent calling anything else is
// seen to ignore the capabilities.
var clientCapabilities = map[string]any{
	"fs":       map[string]any{"readTextFile": true, "writeTextFile": false},
	"terminal": false,
}

func initParams(version int) map[string]any {
	return map[string]any{
		"protocolVersion":    version,
		"clientCapabilities": clientCapabilities,
		"clientInfo":         map[string]any{"name": "acp-bridge-check", "version": "1"},
	}
}

// initialize runs initialize; an error is the reason it did not work.
func (r *run) initialize() (Msg, error) {
	m, err := r.call("initialize", r.proto.initParams)
	if err != nil {
		return m, err
	}
	if m.IsError() {
		return m, fmt.Errorf("initialize answered an error: %s", m.Get("error").Raw)
	}
	r.init = m.Get("result")
	return m, nil
}

// newSession runs session/new in the options' cwd. An agent that answers
// auth_required (-32000) is authenticated first with its first agent-run
// auth method, as an editor does, and asked again.
func (r *run) newSession() (Msg, error) {
	m, err := r.sessionNew()
	if err != nil {
		return m, err
	}
	if m.IsError() {
		return m, fmt.Errorf("session/new answered an error: %s", m.Get("error").Raw)
	}
	sid := m.Get("result.sessionId")
	if sid.Type != gjson.String || sid.Str == "" {
		return m, fmt.Errorf("session/new answered no sessionId: %s", m.Get("result").Raw)
	}
	r.sid = sid.Str
	return m, nil
}

// sessionNew sends session/new, authenticating first when the agent asks
// for it; only a missing answer is an error.
func (r *run) sessionNew() (Msg, error) {
	m, err := r.call("session/new", map[string]any{"cwd": r.opts.Cwd, "mcpServers": []any{}})
	if err != nil {
		return m, err
	}
	if m.IsError() && m.Get("error.code").Int() == -32000 && r.authMethod() != "" && !r.authenticated {
		r.authenticated = true
		a, err := r.call("authenticate", map[string]any{"methodId": r.authMethod()})
		if err != nil {
			return a, err
		}
		if a.IsError() {
			return a, fmt.Errorf("session/new answered auth_required, and authenticate with %q failed: %s", r.authMethod(), a.Get("error").Raw)
		}
		return r.call("session/new", map[string]any{"cwd": r.opts.Cwd, "mcpServers": []any{}})
	}
	return m, nil
}

// authMethod is the first auth method the agent runs itself (no type, or
// type "agent"): the only kind check can use without a user.
func (r *run) authMethod() string {
	for _, m := range r.init.Get("authMethods").Array() {
		if t := m.Get("type").Str; t == "" || t == "agent" {
			return m.Get("id").Str
		}
	}
	return ""
}

// setup initializes and opens a session; a failure is the scenario's NOT RUN.
func (r *run) setup() (verdict, bool) {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err), false
	}
	if _, err := r.newSession(); err != nil {
		return notRun("session/new failed: %v", err), false
	}
	return verdict{}, true
}

func textPrompt(sid, text string) map[string]any {
	return map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}}
}

// isUpdate: a session/update for sid.
func isUpdate(m Msg, sid string) bool {
	return !m.Out && m.IsNotification() && m.method == "session/update" && m.Get("params.sessionId").Str == sid
}

// updatesBetween lists the indexes of sid's updates in (from, to).
func (r *run) updatesBetween(sid string, from, to int) []int {
	var out []int
	for _, m := range r.messages() {
		if m.N > from && (to < 0 || m.N < to) && isUpdate(m, sid) {
			out = append(out, m.N)
		}
	}
	return out
}

// sessionLevel are the update kinds that belong to the session rather
// than to a turn: the spec lets an agent send them at any time, after a
// turn's answer too. Every other kind (chunks, tool calls, plans, shapes
// no editor knows) is the turn's content, which must stop with its answer.
var sessionLevel = map[string]bool{
	"available_commands_update": true,
	"current_mode_update":       true,
	"config_option_update":      true,
	"session_info_update":       true,
	"usage_update":              true,
}

// turnContentBetween lists the indexes of sid's updates in (from, to)
// that carry turn content (not a session-level kind).
func (r *run) turnContentBetween(sid string, from, to int) []int {
	var out []int
	msgs := r.messages()
	for _, n := range r.updatesBetween(sid, from, to) {
		u := msgs[n].Get("params.update")
		kind := u.Get("sessionUpdate").Str
		if kind == "" {
			kind = u.Get("@type").Str // judged by prompt-stream and schema
		}
		if !sessionLevel[kind] {
			out = append(out, n)
		}
	}
	return out
}

// editorDrops says why an editor built on the official ACP SDK would drop
// m without a word, or "" when it takes m: a frame without
// "jsonrpc":"2.0" is no JSON-RPC message to it, and a session/update whose
// params do not match the schema never reaches its handler.
func editorDrops(m Msg) string {
	if v := m.Get("jsonrpc"); v.Str != "2.0" {
		return fmt.Sprintf(`"jsonrpc" is %s, not "2.0": the SDK does not take it for a JSON-RPC message`, orAbsent(v))
	}
	if m.method != "session/update" {
		return ""
	}
	s, err := LoadSchema()
	if err != nil {
		return ""
	}
	params := []byte(m.Get("params").Raw)
	if len(params) == 0 {
		params = []byte("null")
	}
	if probs := s.Validate(s.NotificationDef("session/update"), params); len(probs) > 0 {
		return "its params do not match SessionNotification (params." + probs[0] + "): the SDK's editor drops it"
	}
	return ""
}

// dropped returns the lines of ns an SDK editor drops, and why, as
// "#N: reason".
func (r *run) dropped(ns []int) (lines []int, why []string) {
	msgs := r.messages()
	for _, n := range ns {
		if d := editorDrops(msgs[n]); d != "" {
			lines = append(lines, n)
			why = append(why, fmt.Sprintf("#%d: %s", n, d))
		}
	}
	return lines, why
}

func waitErr(what string, err error) string {
	if errors.Is(err, errEOF) {
		return what + ": the agent closed the connection (exited?)"
	}
	return fmt.Sprintf("%s: %v", what, err)
}

var stopReasons = map[string]bool{"end_turn": true, "max_tokens": true, "max_turn_requests": true, "refusal": true, "cancelled": true}

// protocolV1 runs the scenarios below.
var protocolV1 = &protocol{
	name:         "v1",
	scenarios:    scenarios,
	unknown:      "scenario",
	version:      1,
	initParams:   initParams(1),
	capabilities: "agentCapabilities",
	versionRule:  "the agent must answer 1 when it supports it, and a client speaking only 1 has to disconnect",
	loadSchema:   LoadSchema,
	validate:     (*run).validate,
	turnEnded: func(r *run, m Msg, promptID string) bool {
		return m.IsResponse() && m.id == promptID
	},
	turnEnd:    "answer",
	stopReason: "result.stopReason",
}

var scenarios = []Scenario{
	{"initialize", Mandatory, "initialize and protocol version negotiation", scInitialize},
	{"reinitialize", Advisory, "a second initialize is answered", scReinitialize},
	{"session-new", Mandatory, "session/new answers a sessionId, no update before it", scSessionNew},
	{"prompt-stream", Mandatory, "a prompt streams updates before its answer, none after", scPromptStream},
	{"cancel", Mandatory, "session/cancel ends the turn with cancelled, no update after", scCancel},
	{"cancel-permission", Advisory, "a cancelled turn waits for its pending permission request", scCancelPermission},
	{"concurrent-prompt", Advisory, "a second prompt on a busy session is refused or queued: it neither runs alongside the first turn nor preempts it", scConcurrentPrompt},
	{"unknown-method", Mandatory, "an unknown method is answered -32601", scUnknownMethod},
	{"notification", Mandatory, "notifications are never answered", scNotification},
	{"malformed-json", Mandatory, "malformed JSON is answered -32700 and the agent keeps working", scMalformed},
	{"invalid-request", Mandatory, "an invalid request is answered -32600", scInvalidRequest},
	{"unknown-session", Mandatory, "a prompt for an unknown session id is an error", scUnknownSession},
	{"stdout-purity", Mandatory, "every line the agent writes is one JSON message", scStdoutPurity},
	{"set-mode", Capability, "session/set_mode answers an object", scSetMode},
	{"client-requests", Capability, "agent→client requests are well formed", scClientRequests},
	{"session-load", Capability, "session/load replays the conversation before its answer", scSessionLoad},
	{"session-resume", Capability, "session/resume answers without replaying, and the session serves prompts", scSessionResume},
	{"session-list", Capability, "session/list lists the open session with its cwd", scSessionList},
	{"session-close", Capability, "session/close frees the session: a prompt for it is then an error", scSessionClose},
	{"auth", Informational, "what authentication the agent asks for, and whether it works", scAuth},
	{"capabilities", Informational, "what the agent advertises", scCapabilities},
	// Last: it reports the schema findings of every scenario before it.
	{"schema", Mandatory, "every message the agent writes, in every scenario, matches the ACP v1 schema", scSchema},
}

// initializeChecked runs initialize asking for the run's version and
// checks the answer: that version, as an integer, and capabilities that
// are an object. ok false means v is the scenario's verdict.
func (r *run) initializeChecked() (m Msg, v verdict, ok bool) {
	want := r.proto.version
	m, err := r.call("initialize", r.proto.initParams)
	if err != nil {
		return m, fail(nil, "%s", waitErr("initialize", err)), false
	}
	if m.IsError() {
		return m, fail([]int{m.N}, "initialize asking for version %d answered an error", want), false
	}
	got := m.Get("result.protocolVersion")
	if got.Type != gjson.Number || strings.ContainsAny(got.Raw, ".eE") {
		return m, fail([]int{m.N}, "result.protocolVersion is %s, want the integer %d", orAbsent(got), want), false
	}
	if got.Int() != int64(want) {
		return m, fail([]int{m.N}, "result.protocolVersion is %d for a client that asked for %d; %s", got.Int(), want, r.proto.versionRule), false
	}
	if c := m.Get("result." + r.proto.capabilities); c.Exists() && !c.IsObject() {
		return m, fail([]int{m.N}, "result.%s is not an object", r.proto.capabilities), false
	}
	return m, verdict{}, true
}

func scInitialize(r *run) verdict {
	m, v, ok := r.initializeChecked()
	if !ok {
		return v
	}
	// Negotiation: asked for a version it cannot know, the agent answers
	// the latest version it supports, which is at most the one asked for.
	r.close()
	p2, err := dialPeer(r.ctx, r.opts)
	if err != nil {
		return notRun("cannot reach the agent a second time: %v", err)
	}
	defer p2.close()
	m2, err := p2.call("initialize", initParams(65535))
	if err != nil {
		return fail(nil, "%s", waitErr("initialize asking for protocol version 65535", err))
	}
	v2 := m2.Get("result.protocolVersion")
	if m2.IsError() || v2.Type != gjson.Number || v2.Int() < 1 || v2.Int() > 65535 {
		r.peer = p2
		return fail([]int{m2.N}, "asked for protocol version 65535, the agent answered %s; it must answer the latest version it supports", m2.Raw)
	}
	name := m.Get("result.agentInfo.name").Str
	return pass("protocolVersion 1; asked for 65535 the agent offers %d; agent %q", v2.Int(), name)
}

func scReinitialize(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	m, err := r.call("initialize", r.proto.initParams)
	if err != nil {
		return fail(nil, "%s", waitErr("second initialize", err))
	}
	if m.IsError() || !m.Get("result").IsObject() {
		return fail([]int{m.N}, "a second initialize was answered %s; editors re-initialize after a reconnect or a settings change", m.Get("error").Raw+m.Get("result").Raw)
	}
	return pass("answered again")
}

func scSessionNew(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	before := len(r.messages())
	m, err := r.newSession()
	if err != nil {
		var lines []int
		if m.Raw != nil {
			lines = []int{m.N}
		}
		return fail(lines, "%v", err)
	}
	for _, x := range r.messages()[before:m.N] {
		if !x.Out && x.method == "session/update" {
			return fail([]int{x.N, m.N}, "a session/update arrived before session/new's answer named the session; the editor cannot route it")
		}
	}
	return pass("session %q", r.sid)
}

func scPromptStream(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	id, err := r.request("session/prompt", textPrompt(r.sid, r.opts.Prompt))
	if err != nil {
		return notRun("sending the prompt: %v", err)
	}
	m, err := r.response(id, r.opts.Timeout)
	if err != nil {
		return fail(nil, "%s", waitErr("session/prompt "+fmt.Sprintf("%q", r.opts.Prompt), err))
	}
	if m.Get("error").Exists() && m.Get("result").Exists() {
		return fail([]int{m.N}, "the prompt's answer carries both result and error")
	}
	if m.IsError() {
		return fail([]int{m.N}, "the prompt was answered with an error")
	}
	stop := m.Get("result.stopReason").Str
	if !stopReasons[stop] {
		return fail([]int{m.N}, "stopReason is %s, want one of end_turn, max_tokens, max_turn_requests, refusal, cancelled", m.Get("result.stopReason").Raw)
	}
	if d := editorDrops(m); d != "" {
		return fail([]int{m.N}, "an SDK-based editor never sees the prompt's answer: %s", d)
	}
	ups := r.updatesBetween(r.sid, 0, m.N)
	if len(ups) == 0 {
		return fail([]int{m.N}, "no session/update before the prompt's answer; the editor shows nothing for the turn")
	}
	if bad, why := r.dropped(ups); len(bad) > 0 {
		return fail(bad, "%d of the turn's %d session/update(s) are dropped by an editor built on the official SDK, so it shows %s: %s",
			len(bad), len(ups), map[bool]string{true: "nothing for the turn", false: "part of the turn"}[len(bad) == len(ups)], strings.Join(firstN(why, 3), " | "))
	}
	r.settle()
	if late := r.turnContentBetween(r.sid, m.N, -1); len(late) > 0 {
		return fail(append([]int{m.N}, late...), "%d session/update(s) of turn content after the prompt's answer; the editor has closed the turn", len(late))
	}
	return pass("%d update(s), then %s", len(ups), stop)
}

// startLong opens a session, sends the long prompt and waits for its
// first update (or CancelAfter). ok is false when the session could not
// be opened or the turn has already ended: v is the scenario's verdict.
func (r *run) startLong() (id string, v verdict, ok bool) {
	if v, ok := r.setup(); !ok {
		return "", v, false
	}
	id, err := r.request("session/prompt", textPrompt(r.sid, r.opts.LongPrompt))
	if err != nil {
		return "", notRun("sending the prompt: %v", err), false
	}
	m, err := r.await(r.opts.CancelAfter, func(m Msg) bool {
		return isUpdate(m, r.sid) || (m.IsResponse() && m.id == id)
	})
	if err != nil && !errors.Is(err, errTimeout) {
		return "", notRun("%s", waitErr("the long prompt", err)), false
	}
	if err == nil && m.IsResponse() {
		return "", notRun("the turn for %q ended before it could be cancelled; give a prompt that keeps the agent busy (--long-prompt)", r.opts.LongPrompt), false
	}
	return id, verdict{}, true
}

func scCancel(r *run) verdict {
	id, v, ok := r.startLong()
	if !ok {
		return v
	}
	r.holdPermissions = true
	cn, err := r.notify("session/cancel", map[string]any{"sessionId": r.sid})
	if err != nil {
		return notRun("sending session/cancel: %v", err)
	}
	cancelN := cn.N
	m, err := r.awaitCancelled(r.opts.Timeout, func(m Msg) bool { return m.IsResponse() && m.id == id })
	if err != nil {
		return fail([]int{cancelN}, "%s", waitErr(fmt.Sprintf("no answer to the cancelled prompt within %s", r.opts.Timeout), err))
	}
	if m.IsError() {
		return fail([]int{cancelN, m.N}, "the cancelled prompt was answered with an error; it must be answered stopReason \"cancelled\"")
	}
	if stop := m.Get("result.stopReason"); stop.Str != "cancelled" {
		return fail([]int{cancelN, m.N}, "the cancelled prompt ended with stopReason %s, want \"cancelled\"", stop.Raw)
	}
	took := m.At - cn.At
	r.settle()
	// Session-level updates (available commands, mode) may come at any
	// time; only the cancelled turn's own content must stop.
	if late := r.turnContentBetween(r.sid, m.N, -1); len(late) > 0 {
		return fail(append([]int{m.N}, late...), "%d session/update(s) of turn content after the cancelled turn's answer", len(late))
	}
	return pass("cancelled %s after session/cancel", took.Round(time.Millisecond))
}

func scCancelPermission(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	r.holdPermissions = true
	id, err := r.request("session/prompt", textPrompt(r.sid, r.opts.PermissionPrompt))
	if err != nil {
		return notRun("sending the prompt: %v", err)
	}
	m, err := r.await(r.opts.Timeout, func(m Msg) bool {
		return m.method == "session/request_permission" || (m.IsResponse() && m.id == id)
	})
	if err != nil {
		return notRun("%s", waitErr("waiting for a permission request", err))
	}
	if m.IsResponse() {
		return skip("the agent asked no permission for %q", r.opts.PermissionPrompt)
	}
	permN := m.N
	if _, err := r.notify("session/cancel", map[string]any{"sessionId": r.sid}); err != nil {
		return notRun("sending session/cancel: %v", err)
	}
	// Before the client answers the permission request, the turn must not
	// end: the agent has a request outstanding in it. A conformant agent
	// stays silent, so this costs the whole window; it is generous so that
	// a slow machine cannot hide an early answer.
	// Withdrawing the request with $/cancel_request first is the spec's
	// own cascade (ACP spec, $/cancel_request): the client answers it -32800 and
	// the turn may end.
	window := max(r.opts.Quiet, time.Second)
	withdrawn := -1
	if x, err := r.await(window, func(x Msg) bool {
		if !x.Out && x.method == "$/cancel_request" && x.Get("params.requestId").Raw == m.id && withdrawn < 0 {
			withdrawn = x.N
			r.held = slices.DeleteFunc(r.held, func(h Msg) bool { return h.id == m.id })
			r.reply(m.id, nil, -32800, "Request cancelled")
		}
		return x.IsResponse() && x.id == id
	}); err == nil {
		if withdrawn >= 0 {
			return pass("the agent withdrew its permission request with $/cancel_request before ending the turn")
		}
		return fail([]int{permN, x.N}, "the turn ended while its session/request_permission (id %s) was still unanswered; the agent should wait for the client's \"cancelled\" outcome, or withdraw the request with $/cancel_request first", m.id)
	}
	if _, err := r.awaitCancelled(r.opts.Timeout, func(m Msg) bool { return m.IsResponse() && m.id == id }); err != nil {
		return fail([]int{permN}, "%s", waitErr("no answer to the cancelled prompt after the permission request was answered \"cancelled\"", err))
	}
	return pass("the turn ended after the permission request was answered")
}

// scConcurrentPrompt sends a second prompt while the long one runs. ACP
// v1 leaves such a prompt undefined (one turn per session at a time), so
// an agent may refuse it or queue it: hold it until the first turn has
// ended, and answer it "cancelled" with that turn when the client cancels
// the session. It must not run it alongside the first turn, nor end the
// first turn for it: "cancelled" is the stop reason of a turn the client
// cancelled (session/cancel), and the client cancelled nothing.
//
// v1 updates do not say which prompt they belong to, so the second prompt
// is the file prompt: its work names hello.txt (a tool call, an
// fs/read_text_file), which the long prompt's does not. Seen before the
// first turn's answer, that work ran interleaved with the first turn; a
// second prompt whose work cannot be told apart leaves the verdict
// inconclusive (SKIP), never "queued".
func scConcurrentPrompt(r *run) verdict {
	idA, v, ok := r.startLong()
	if !ok {
		return v
	}
	b, err := r.request("session/prompt", textPrompt(r.sid, r.opts.FilePrompt))
	if err != nil {
		return notRun("sending the second prompt: %v", err)
	}
	bMsg := r.sent(b)
	cancelN := -1 // check's session/cancel, once sent
	defer func() {
		_, _ = r.notify("session/cancel", map[string]any{"sessionId": r.sid})
		r.drain(r.opts.Quiet)
	}()
	isAnswer := func(m Msg) bool { return m.IsResponse() && (m.id == idA || m.id == b) }
	// An agent that refuses the second prompt does so at once; give it a
	// moment, then end the first turn with session/cancel.
	m, err := r.await(max(r.opts.Quiet, time.Second), isAnswer)
	if errors.Is(err, errTimeout) {
		cn, cerr := r.notify("session/cancel", map[string]any{"sessionId": r.sid})
		if cerr != nil {
			return notRun("sending session/cancel: %v", cerr)
		}
		cancelN = cn.N
		r.holdPermissions = true
		r.answerHeld()
		m, err = r.await(r.opts.Timeout, isAnswer)
	}
	if err != nil {
		return fail(nil, "%s", waitErr("neither prompt was answered", err))
	}
	var mb Msg // the second prompt's answer, once in
	if m.id == b {
		if m.IsError() {
			return pass("the second prompt was refused: %s", m.Get("error.message").Str)
		}
		if cancelN < 0 || m.Get("result.stopReason").Str != "cancelled" {
			return fail([]int{bMsg.N, m.N}, "the second prompt on the session was answered %s while the first was still running; one session runs one turn at a time", m.Get("result").Raw)
		}
		// Queued, and cancelled with the session: the first turn must
		// still end.
		mb = m
		if m, err = r.response(idA, r.opts.Timeout); err != nil {
			return fail([]int{bMsg.N, cancelN, mb.N}, "%s", waitErr("the first prompt was not answered after session/cancel", err))
		}
	}
	aN := m.N
	if cancelN < 0 && m.Get("result.stopReason").Str == "cancelled" {
		return fail([]int{bMsg.N, aN}, "the first prompt ended \"cancelled\" %s after the second prompt was sent, and the client sent no session/cancel: the agent preempted the running turn for the second prompt. \"cancelled\" is the stop reason of a turn the client cancelled; refuse the second prompt, or let it wait for the first turn to end",
			(m.At - bMsg.At).Round(time.Millisecond))
	}
	if mb.Raw == nil {
		if mb, err = r.response(b, r.opts.Timeout); err != nil {
			return fail([]int{bMsg.N, aN}, "%s; every request gets exactly one answer", waitErr("the second prompt was never answered after the first turn ended", err))
		}
		if mb.IsError() {
			return pass("the second prompt was refused: %s", mb.Get("error.message").Str)
		}
	}
	// Work of the second prompt before the first turn's answer: they ran
	// interleaved, whatever came after.
	if early := r.mentioning("hello.txt", bMsg.N, aN); len(early) > 0 {
		return fail([]int{bMsg.N, early[0], aN, mb.N}, "the second prompt's work (#%d names hello.txt) began before the first turn's answer: the agent ran the two turns interleaved; one session runs one turn at a time", early[0])
	}
	if mb.Get("result.stopReason").Str == "cancelled" {
		if cancelN < 0 {
			return fail([]int{bMsg.N, aN, mb.N}, "the second prompt ended \"cancelled\" although the client sent no session/cancel")
		}
		return pass("the second prompt was queued: cancelled with the first turn, without doing any work")
	}
	if after := r.turnContentBetween(r.sid, aN, mb.N); len(after) == 0 {
		lines := []int{bMsg.N}
		if during := r.turnContentBetween(r.sid, bMsg.N, aN); len(during) > 0 {
			lines = append(lines, during[len(during)-1])
		}
		return fail(append(lines, aN, mb.N), "the second prompt was answered %s with no update after the first turn's answer: its work ran while the first turn was still running; one session runs one turn at a time",
			mb.Get("result.stopReason").Raw)
	}
	if late := r.mentioning("hello.txt", aN, mb.N); len(late) > 0 {
		return pass("the second prompt was queued: its work began after the first turn ended")
	}
	return skip("inconclusive: the second prompt ran on after the first turn's answer, but nothing it did names hello.txt, so whether it began before that answer cannot be told; give a --file-prompt the agent answers by reading hello.txt")
}

// sent returns the client's request id as recorded.
func (r *run) sent(id string) Msg {
	for _, m := range r.messages() {
		if m.Out && m.IsRequest() && m.id == id {
			return m
		}
	}
	return Msg{N: -1}
}

// mentioning lists the indexes of the agent's messages in (from, to)
// that belong to the session, its updates and its requests to the
// client, and name s.
func (r *run) mentioning(s string, from, to int) []int {
	var out []int
	for _, m := range r.messages() {
		if m.N > from && (to < 0 || m.N < to) && (isUpdate(m, r.sid) || !m.Out && m.IsRequest()) && strings.Contains(string(m.Raw), s) {
			out = append(out, m.N)
		}
	}
	return out
}

func scUnknownMethod(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	for _, method := range []string{"acp-check/no_such_method", "_acp_check/no_such_method"} {
		m, err := r.call(method, map[string]any{})
		if err != nil {
			return fail(nil, "%s", waitErr(method, err))
		}
		if c := m.Get("error.code"); !m.IsError() || c.Int() != -32601 {
			return fail([]int{m.N}, "%s was answered %s, want error -32601 (Method not found)", method, m.Get("error").Raw+m.Get("result").Raw)
		}
	}
	return pass("-32601 for an unknown method and an unknown extension method")
}

func scNotification(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	_, _ = r.newSession() // optional: an idle session to cancel
	// Whatever the setup drew from the agent is in before the window
	// opens: an unsolicited answer the agent sent after its initialize
	// answer is another scenario's finding (schema), not an answer to
	// these notifications.
	r.settle()
	from := len(r.messages())
	_, _ = r.notify("acp-check/notice", map[string]any{})
	_, _ = r.notify("_acp_check/notice", map[string]any{})
	if r.sid != "" {
		_, _ = r.notify("session/cancel", map[string]any{"sessionId": r.sid})
	}
	r.settle()
	for _, m := range r.messages()[from:] {
		if m.Out || !m.obj || m.method != "" {
			continue
		}
		// Anything without a method is an answer; one with no id, or an
		// id of no client request, can only answer a notification.
		if m.id == "" {
			return fail([]int{m.N}, "an answer without an id (%s): a notification was answered; notifications get no answer, not even an error", firstKey(m, "error", "result"))
		}
		if _, ours := r.methodOf(m.id); !ours {
			return fail([]int{m.N}, "a response that answers none of the client's requests: a notification was answered")
		}
	}
	return pass("no answer to three notifications")
}

func scMalformed(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	g, err := r.write([]byte(`{"jsonrpc":"2.0","id":99,"method":"session/new","params":{"cwd":`))
	if err != nil {
		return notRun("sending malformed JSON: %v", err)
	}
	m, err := r.sessionNew()
	if err != nil {
		return fail([]int{g.N}, "%s", waitErr("after a malformed line, session/new", err))
	}
	r.drain(r.opts.Quiet)
	var parse *Msg
	for _, x := range r.messages()[g.N:] {
		if !x.Out && x.IsError() && x.Get("error.code").Int() == -32700 {
			parse = &x
			break
		}
	}
	if parse == nil {
		return fail([]int{g.N, m.N}, "malformed JSON was not answered with error -32700 (Parse error)")
	}
	if parse.id != "null" {
		return fail([]int{g.N, parse.N}, "the -32700 answer has id %s, want null", parse.id)
	}
	if m.IsError() {
		return fail([]int{g.N, m.N}, "after the malformed line session/new failed: the agent did not keep working")
	}
	return pass("-32700 with id null, then session/new still worked")
}

func scInvalidRequest(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	g, err := r.write([]byte(`{"jsonrpc":"2.0","id":77,"method":42,"params":{}}`))
	if err != nil {
		return notRun("sending an invalid request: %v", err)
	}
	m, err := r.await(r.opts.Timeout, func(m Msg) bool { return m.IsResponse() && (m.id == "77" || m.id == "null" && m.IsError()) })
	if err != nil {
		return fail([]int{g.N}, "%s", waitErr("a request whose method is a number was not answered", err))
	}
	if c := m.Get("error.code").Int(); !m.IsError() || c != -32600 {
		return fail([]int{g.N, m.N}, "a request whose method is a number was answered %s, want error -32600 (Invalid Request)", m.Get("error").Raw+m.Get("result").Raw)
	}
	return pass("-32600")
}

func scUnknownSession(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	m, err := r.call("session/prompt", textPrompt("acp-check-no-such-session", r.opts.Prompt))
	if err != nil {
		return fail(nil, "%s", waitErr("a prompt for an unknown session", err))
	}
	if !m.IsError() {
		return fail([]int{m.N}, "a prompt for a session that was never created was served; it must be an error")
	}
	return pass("error %d", m.Get("error.code").Int())
}

// basicSession is the session schema and stdout-purity watch: initialize,
// session/new, one prompt to the end of its turn, settle.
func (r *run) basicSession() (verdict, bool) {
	if _, err := r.call("initialize", r.proto.initParams); err != nil {
		return notRun("initialize: %v", err), false
	}
	if _, err := r.newSession(); err == nil {
		if id, err := r.request("session/prompt", textPrompt(r.sid, r.opts.Prompt)); err == nil {
			_, _ = r.await(r.opts.Timeout, func(m Msg) bool { return r.proto.turnEnded(r, m, id) })
		}
	}
	r.settle()
	return verdict{}, true
}

func scStdoutPurity(r *run) verdict {
	if v, ok := r.basicSession(); !ok {
		return v
	}
	var bad []int
	for _, m := range r.messages() {
		if !m.Out && !m.obj {
			bad = append(bad, m.N)
		}
	}
	if len(bad) > 0 {
		return fail(bad, "%d line(s) on the agent's stdout are not JSON-RPC messages; stdout must carry only ACP (log to stderr)", len(bad))
	}
	return pass("%d messages, all JSON objects", len(r.messages()))
}

func scSchema(r *run) verdict {
	if v, ok := r.basicSession(); !ok {
		return v
	}
	if _, err := r.proto.loadSchema(); err != nil {
		return notRun("%v", err)
	}
	// This session's findings and those of the scenarios before it.
	all := append(append([]finding(nil), r.prior...), r.findings("schema")...)
	if len(all) == 0 {
		return pass("%d messages of this session and every message of the scenarios before match", len(r.messages()))
	}
	var probs, extra []string
	for _, f := range all {
		if len(probs) < 5 {
			probs = append(probs, fmt.Sprintf("%s #%d: %s", f.scenario, f.n, strings.Join(f.probs, "; ")))
		}
		if len(extra) < 10 {
			extra = append(extra, "("+f.scenario+") "+f.line)
		}
	}
	if len(all) > 5 {
		probs = append(probs, fmt.Sprintf("… and %d more", len(all)-5))
	}
	v := fail(nil, "%d message(s) do not match the ACP %s schema: %s", len(all), r.proto.name, strings.Join(probs, " | "))
	v.extra = extra
	return v
}

var envelopeKeys = map[string]bool{"jsonrpc": true, "id": true, "method": true, "params": true, "result": true, "error": true}

// validate checks one message from the agent: the JSON-RPC envelope, then
// its params, result or error against the schema.
func (r *run) validate(s *Schema, m Msg) []string {
	probs := unexpectedMembers(m)
	if v := m.Get("jsonrpc"); v.Str != "2.0" {
		probs = append(probs, fmt.Sprintf(`jsonrpc: want "2.0", got %s`, orAbsent(v)))
	}
	if id := m.Get("id"); id.Exists() && id.Type != gjson.String && id.Type != gjson.Null && (id.Type != gjson.Number || strings.ContainsAny(id.Raw, ".eE")) {
		probs = append(probs, "id: want a string, an integer or null, got "+id.Raw)
	}
	params := []byte(m.Get("params").Raw)
	if len(params) == 0 {
		params = []byte("null")
	}
	switch {
	case m.IsResponse():
		hasR, hasE := m.Get("result").Exists(), m.Get("error").Exists()
		if hasR == hasE {
			probs = append(probs, "a response must carry exactly one of result and error")
		}
		answered, method := r.answered(m)
		probs = append(probs, answered...)
		if hasE {
			probs = append(probs, prefix("error.", s.Validate("Error", []byte(m.Get("error").Raw)))...)
		} else if def := s.ResultDef(method); hasR && def != "" {
			probs = append(probs, prefix("result.", s.Validate(def, []byte(m.Get("result").Raw)))...)
		}
	case m.IsRequest():
		if def := s.RequestDef(m.method); def != "" {
			probs = append(probs, prefix("params.", s.Validate(def, params))...)
		} else if !strings.HasPrefix(m.method, "_") {
			probs = append(probs, fmt.Sprintf("method %q is not an agent→client method of ACP v1", m.method))
		}
	case m.IsNotification():
		if m.method == "$/cancel_request" && !r.agentSent(m.Get("params.requestId").Raw, m.N) {
			probs = append(probs, fmt.Sprintf("params.requestId: %s is not the id of a request the agent sent (ids are per direction: a $/cancel_request names a request its sender sent)", m.Get("params.requestId").Raw))
		}
		if def := s.NotificationDef(m.method); def != "" {
			probs = append(probs, prefix("params.", s.Validate(def, params))...)
		} else if !strings.HasPrefix(m.method, "_") {
			probs = append(probs, fmt.Sprintf("method %q is not an agent→client notification of ACP v1", m.method))
		}
	default:
		probs = append(probs, "neither a request, a response nor a notification")
	}
	return probs
}

// unexpectedMembers lists m's top-level members that JSON-RPC does not
// have.
func unexpectedMembers(m Msg) []string {
	var probs []string
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(m.Raw, &obj)
	for k := range obj {
		if !envelopeKeys[k] {
			probs = append(probs, fmt.Sprintf("unexpected top-level member %q", k))
		}
	}
	return probs
}

// answered checks the id of m, a response, against the client's requests,
// and returns the method of the request it answers ("" for none).
func (r *run) answered(m Msg) (probs []string, method string) {
	method, ours := r.methodOf(m.id)
	switch {
	case m.id == "null" && !m.IsError():
		probs = append(probs, "id: null is only for an error answering a request whose id could not be read")
	case !ours && m.id != "null":
		probs = append(probs, fmt.Sprintf("id: %s answers no request of the client (was a notification answered?)", m.id))
	}
	return probs, method
}

// agentSent reports whether the agent sent a request with raw id before
// transcript index before.
func (r *run) agentSent(id string, before int) bool {
	for _, m := range r.messages()[:before] {
		if !m.Out && m.IsRequest() && m.id == id {
			return true
		}
	}
	return false
}

// firstKey names the first of keys that m has.
func firstKey(m Msg, keys ...string) string {
	for _, k := range keys {
		if m.Get(k).Exists() {
			return "an " + k + " object"
		}
	}
	return "no result, no error"
}

func firstN(xs []string, n int) []string {
	if len(xs) > n {
		return append(xs[:n:n], fmt.Sprintf("… and %d more", len(xs)-n))
	}
	return xs
}

func orAbsent(v gjson.Result) string {
	if !v.Exists() {
		return "nothing"
	}
	return v.Raw
}

func prefix(p string, probs []string) []string {
	for i, x := range probs {
		probs[i] = p + x
	}
	return probs
}

func scSetMode(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	nm, err := r.newSession()
	if err != nil {
		return notRun("session/new failed: %v", err)
	}
	modes := nm.Get("result.modes.availableModes").Array()
	if len(modes) == 0 {
		return skip("the session advertises no modes")
	}
	// The first mode other than the current one: the last ones are often
	// modes an agent may refuse (bypassPermissions needs a launch flag).
	current := nm.Get("result.modes.currentModeId").Str
	mode := modes[0].Get("id").Str
	for _, m := range modes {
		if id := m.Get("id").Str; id != current {
			mode = id
			break
		}
	}
	m, err := r.call("session/set_mode", map[string]any{"sessionId": r.sid, "modeId": mode})
	if err != nil {
		return fail(nil, "%s", waitErr("session/set_mode", err))
	}
	if m.IsError() {
		return fail([]int{m.N}, "session/set_mode to the advertised mode %q failed", mode)
	}
	if !m.Get("result").IsObject() {
		return fail([]int{m.N}, "session/set_mode answered result %s, want an object ({} at least)", m.Get("result").Raw)
	}
	return pass("mode %q set", mode)
}

func scClientRequests(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	from := len(r.messages())
	for _, text := range []string{r.opts.FilePrompt, r.opts.PermissionPrompt} {
		id, err := r.request("session/prompt", textPrompt(r.sid, text))
		if err != nil {
			return notRun("sending the prompt: %v", err)
		}
		if _, err := r.response(id, r.opts.Timeout); err != nil {
			return notRun("%s", waitErr(fmt.Sprintf("the prompt %q", text), err))
		}
	}
	r.settle()
	offered := map[string]bool{"fs/read_text_file": true, "session/request_permission": true}
	var bad []int
	var probs []string
	n := 0
	for _, m := range r.messages()[from:] {
		if m.Out || !m.IsRequest() || m.method == "acp-check/barrier" {
			continue
		}
		n++
		var p []string
		if !offered[m.method] && !strings.HasPrefix(m.method, "_") {
			p = append(p, fmt.Sprintf("%s was called although the client did not advertise it", m.method))
		}
		if sid := m.Get("params.sessionId"); sid.Str != r.sid {
			p = append(p, fmt.Sprintf("sessionId is %s, not this session's %q", orAbsent(sid), r.sid))
		}
		if path := m.Get("params.path"); path.Exists() && !filepath.IsAbs(path.Str) {
			p = append(p, fmt.Sprintf("path %s is not absolute", path.Raw))
		}
		if len(p) > 0 {
			bad = append(bad, m.N)
			probs = append(probs, fmt.Sprintf("#%d %s: %s", m.N, m.method, strings.Join(p, "; ")))
		}
	}
	if len(bad) > 0 {
		return fail(bad, "%s", strings.Join(probs, " | "))
	}
	if n == 0 {
		return skip("the agent sent no request to the client for %q or %q", r.opts.FilePrompt, r.opts.PermissionPrompt)
	}
	return pass("%d request(s) to the client, all well formed", n)
}

// promptOnce sends the prompt and waits for its answer and a quiet period.
func (r *run) promptOnce() (Msg, error) {
	m, err := r.call("session/prompt", textPrompt(r.sid, r.opts.Prompt))
	if err == nil {
		r.settle()
	}
	return m, err
}

// sessionParams are the params of session/load and session/resume.
func (r *run) sessionParams() map[string]any {
	return map[string]any{"sessionId": r.sid, "cwd": r.opts.Cwd, "mcpServers": []any{}}
}

// reopen opens a session, plays one prompt in it and calls method
// (session/load, session/resume) on it, which the agent advertises with
// capability in agentCapabilities, as advertised reads it. It returns the
// transcript index of the call's first message and its answer; ok false
// means v is the scenario's verdict.
func (r *run) reopen(method, capability string, advertised func(gjson.Result) bool) (from int, m Msg, v verdict, ok bool) {
	if v, ok := r.setup(); !ok {
		return 0, m, v, false
	}
	if !advertised(r.init.Get("agentCapabilities." + capability)) {
		return 0, m, skip("the agent does not advertise %s", capability), false
	}
	if _, err := r.promptOnce(); err != nil {
		return 0, m, notRun("%s", waitErr("the prompt before "+method, err)), false
	}
	from = len(r.messages())
	m, err := r.call(method, r.sessionParams())
	if err != nil {
		return from, m, fail(nil, "%s", waitErr(method, err)), false
	}
	if m.IsError() {
		return from, m, fail([]int{m.N}, "%s of the session just used failed although %s is advertised", method, capability), false
	}
	return from, m, verdict{}, true
}

func scSessionLoad(r *run) verdict {
	from, m, v, ok := r.reopen("session/load", "loadSession", gjson.Result.Bool)
	if !ok {
		return v
	}
	if res := m.Get("result"); res.Exists() && res.Type != gjson.Null && !res.IsObject() {
		return fail([]int{m.N}, "session/load answered result %s, want an object", res.Raw)
	}
	replayed := r.updatesBetween(r.sid, from-1, m.N)
	if len(replayed) == 0 {
		return fail([]int{m.N}, "session/load replayed no update before its answer: the editor shows an empty conversation (the agent must replay the whole conversation, then answer)")
	}
	return pass("%d update(s) replayed before the answer", len(replayed))
}

func scSessionResume(r *run) verdict {
	from, m, v, ok := r.reopen("session/resume", "sessionCapabilities.resume", gjson.Result.Exists)
	if !ok {
		return v
	}
	if replayed := r.turnContentBetween(r.sid, from-1, m.N); len(replayed) > 0 {
		return fail(append(replayed, m.N), "session/resume replayed %d update(s) of the conversation; unlike session/load it must not (the editor would show it twice)", len(replayed))
	}
	p, err := r.call("session/prompt", textPrompt(r.sid, r.opts.Prompt))
	if err != nil {
		return fail(nil, "%s", waitErr("a prompt on the resumed session", err))
	}
	if p.IsError() {
		return fail([]int{m.N, p.N}, "a prompt on the resumed session failed")
	}
	return pass("resumed without replay; the session serves prompts")
}

func scSessionList(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	if !r.init.Get("agentCapabilities.sessionCapabilities.list").Exists() {
		return skip("the agent does not advertise sessionCapabilities.list")
	}
	params := map[string]any{}
	var lines []int
	for page := 0; page < 20; page++ {
		m, err := r.call("session/list", params)
		if err != nil {
			return fail(lines, "%s", waitErr("session/list", err))
		}
		lines = append(lines, m.N)
		if m.IsError() {
			return fail(lines, "session/list failed although sessionCapabilities.list is advertised")
		}
		ss := m.Get("result.sessions")
		if !ss.IsArray() {
			return fail(lines, "session/list answered sessions %s, want an array", orAbsent(ss))
		}
		for _, s := range ss.Array() {
			if s.Get("sessionId").Str != r.sid {
				continue
			}
			if cwd := s.Get("cwd").Str; cwd != r.opts.Cwd {
				return fail(lines, "session/list gives the session cwd %s, want %q", orAbsent(s.Get("cwd")), r.opts.Cwd)
			}
			return pass("the session is listed with its cwd")
		}
		next := m.Get("result.nextCursor")
		if next.Type != gjson.String {
			break
		}
		params = map[string]any{"cursor": next.Str}
	}
	return fail(lines, "session/list does not list the session %q just created", r.sid)
}

func scSessionClose(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	if !r.init.Get("agentCapabilities.sessionCapabilities.close").Exists() {
		return skip("the agent does not advertise sessionCapabilities.close")
	}
	m, err := r.call("session/close", map[string]any{"sessionId": r.sid})
	if err != nil {
		return fail(nil, "%s", waitErr("session/close", err))
	}
	if m.IsError() {
		return fail([]int{m.N}, "session/close of an open session failed although sessionCapabilities.close is advertised")
	}
	p, err := r.call("session/prompt", textPrompt(r.sid, r.opts.Prompt))
	if err != nil {
		return fail([]int{m.N}, "%s", waitErr("a prompt for the closed session", err))
	}
	if !p.IsError() {
		return fail([]int{m.N, p.N}, "a prompt for the closed session was served; session/close frees the session")
	}
	return pass("closed; a prompt for it is refused (error %d)", p.Get("error.code").Int())
}

func scAuth(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	var methods []string
	for _, m := range r.init.Get("authMethods").Array() {
		t := m.Get("type").Str
		if t == "" {
			t = "agent"
		}
		methods = append(methods, fmt.Sprintf("%s (%s)", m.Get("id").Str, t))
	}
	m, err := r.call("session/new", map[string]any{"cwd": r.opts.Cwd, "mcpServers": []any{}})
	if err != nil {
		return fail(nil, "%s", waitErr("session/new", err))
	}
	required := m.IsError() && m.Get("error.code").Int() == -32000
	switch {
	case !required && len(methods) == 0:
		return pass("no authentication asked for")
	case !required:
		return pass("auth methods %s advertised; session/new works without authenticate", strings.Join(methods, ", "))
	case len(methods) == 0:
		return fail([]int{m.N}, "session/new answered auth_required but authMethods is empty: an editor has no way to authenticate")
	}
	if r.authMethod() == "" {
		return pass("auth methods %s; session/new answered auth_required, and check can run none of them itself", strings.Join(methods, ", "))
	}
	if _, err := r.newSession(); err != nil {
		return fail(nil, "session/new answered auth_required; %v", err)
	}
	return pass("auth methods %s; session/new answered auth_required, and worked after authenticate with %q", strings.Join(methods, ", "), r.authMethod())
}

func scCapabilities(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	var caps []string
	flatten("agentCapabilities", r.init.Get("agentCapabilities"), &caps)
	for i, c := range caps {
		caps[i] = strings.TrimPrefix(c, "agentCapabilities.")
	}
	if len(caps) == 0 {
		return pass("nothing beyond the baseline (prompts of text and resource links)")
	}
	return pass("%s", strings.Join(caps, ", "))
}
