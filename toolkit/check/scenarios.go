package check

import (
	"errors"
	"fmt"

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

// protocolV1 runs the scenarios listed below (each group in its own
// scenarios_*.go).
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
