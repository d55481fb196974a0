package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
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
	// v2 speaks ACP v2 (v2check.go).
	v2 bool
}

// finding is one message that does not match the schema.
type finding struct {
	scenario string
	n        int    // the message's index in that scenario's transcript
	line     string // FormatLine of the message
	probs    []string
}

// findings validates every message the agent wrote on this connection.
func (r *run) findings(scenario string) []finding {
	s, err := LoadSchema()
	if err != nil {
		return nil
	}
	var out []finding
	for _, m := range r.messages() {
		if m.Out || !m.obj {
			continue // stdout-purity judges non-JSON lines
		}
		if p := r.validate(s, m); len(p) > 0 {
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
	params := initParams(1)
	if r.v2 {
		params = initParamsV2(2)
	}
	m, err := r.call("initialize", params)
	if err != nil {
		return m, err
	}
	if m.IsError() {
		return m, fmt.Errorf("initialize answered an error: %s", m.Get("error").Raw)
	}
	r.init = m.Get("result")
	return m, nil
}

// newSession runs session/new in the options' cwd.
func (r *run) newSession() (Msg, error) {
	m, err := r.call("session/new", map[string]any{"cwd": r.opts.Cwd, "mcpServers": []any{}})
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

func waitErr(what string, err error) string {
	if errors.Is(err, errEOF) {
		return what + ": the agent closed the connection (exited?)"
	}
	return fmt.Sprintf("%s: %v", what, err)
}

var stopReasons = map[string]bool{"end_turn": true, "max_tokens": true, "max_turn_requests": true, "refusal": true, "cancelled": true}

var scenarios = []Scenario{
	{"initialize", Mandatory, "initialize and protocol version negotiation", scInitialize},
	{"reinitialize", Advisory, "a second initialize is answered", scReinitialize},
	{"session-new", Mandatory, "session/new answers a sessionId, no update before it", scSessionNew},
	{"prompt-stream", Mandatory, "a prompt streams updates before its answer, none after", scPromptStream},
	{"cancel", Mandatory, "session/cancel ends the turn with cancelled, no update after", scCancel},
	{"cancel-permission", Advisory, "a cancelled turn waits for its pending permission request", scCancelPermission},
	{"concurrent-prompt", Advisory, "a second prompt on a busy session does not run alongside", scConcurrentPrompt},
	{"unknown-method", Mandatory, "an unknown method is answered -32601", scUnknownMethod},
	{"notification", Mandatory, "notifications are never answered", scNotification},
	{"malformed-json", Mandatory, "malformed JSON is answered -32700 and the agent keeps working", scMalformed},
	{"invalid-request", Mandatory, "an invalid request is answered -32600", scInvalidRequest},
	{"unknown-session", Mandatory, "a prompt for an unknown session id is an error", scUnknownSession},
	{"stdout-purity", Mandatory, "every line the agent writes is one JSON message", scStdoutPurity},
	{"set-mode", Capability, "session/set_mode answers an object", scSetMode},
	{"client-requests", Capability, "agent→client requests are well formed", scClientRequests},
	// Last: it reports the schema findings of every scenario before it.
	{"schema", Mandatory, "every message the agent writes, in every scenario, matches the ACP v1 schema", scSchema},
}

func scInitialize(r *run) verdict {
	m, err := r.call("initialize", initParams(1))
	if err != nil {
		return fail(nil, "%s", waitErr("initialize", err))
	}
	if m.IsError() {
		return fail([]int{m.N}, "initialize answered an error")
	}
	v := m.Get("result.protocolVersion")
	if v.Type != gjson.Number || strings.ContainsAny(v.Raw, ".eE") {
		return fail([]int{m.N}, "protocolVersion is %s, want the integer 1", v.Raw)
	}
	if v.Int() != 1 {
		return fail([]int{m.N}, "protocolVersion is %d for a client that asked for 1; the agent must answer 1 when it supports it, and a client speaking only 1 has to disconnect", v.Int())
	}
	if c := m.Get("result.agentCapabilities"); c.Exists() && !c.IsObject() {
		return fail([]int{m.N}, "agentCapabilities is not an object")
	}
	// Negotiation: asked for a version it cannot know, the agent answers
	// the latest version it supports, which is at most the one asked for.
	r.close()
	p2, err := dialPeer(context.Background(), r.opts)
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
	m, err := r.call("initialize", initParams(1))
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
	ups := r.updatesBetween(r.sid, 0, m.N)
	if len(ups) == 0 {
		return fail([]int{m.N}, "no session/update before the prompt's answer; the editor shows nothing for the turn")
	}
	r.settle()
	if late := r.updatesBetween(r.sid, m.N, -1); len(late) > 0 {
		return fail(append([]int{m.N}, late...), "%d session/update(s) after the prompt's answer; the editor has closed the turn", len(late))
	}
	return pass("%d update(s), then %s", len(ups), stop)
}

// startLong sends the long prompt and waits for its first update (or
// CancelAfter). ok is false when the turn has already ended.
func (r *run) startLong() (id string, v verdict, ok bool) {
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
	if v, ok := r.setup(); !ok {
		return v
	}
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
	r.answerHeld() // the client answers pending permission requests "cancelled"
	m, err := r.await(r.opts.Timeout, func(m Msg) bool {
		if m.method == "session/request_permission" {
			r.answerHeld()
		}
		return m.IsResponse() && m.id == id
	})
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
	if late := r.updatesBetween(r.sid, m.N, -1); len(late) > 0 {
		return fail(append([]int{m.N}, late...), "%d session/update(s) after the cancelled turn's answer", len(late))
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
	window := max(r.opts.Quiet, time.Second)
	if x, err := r.await(window, func(x Msg) bool { return x.IsResponse() && x.id == id }); err == nil {
		return fail([]int{permN, x.N}, "the turn ended while its session/request_permission (id %s) was still unanswered; the agent should wait for the client's \"cancelled\" outcome", m.id)
	}
	r.answerHeld()
	if _, err := r.await(r.opts.Timeout, func(m Msg) bool {
		if m.method == "session/request_permission" {
			r.answerHeld()
		}
		return m.IsResponse() && m.id == id
	}); err != nil {
		return fail([]int{permN}, "%s", waitErr("no answer to the cancelled prompt after the permission request was answered \"cancelled\"", err))
	}
	return pass("the turn ended after the permission request was answered")
}

func scConcurrentPrompt(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	idA, v, ok := r.startLong()
	if !ok {
		return v
	}
	idB, err := r.request("session/prompt", textPrompt(r.sid, r.opts.Prompt))
	if err != nil {
		return notRun("sending the second prompt: %v", err)
	}
	m, err := r.await(r.opts.Timeout, func(m Msg) bool {
		return m.IsResponse() && (m.id == idA || m.id == idB)
	})
	defer func() {
		_, _ = r.notify("session/cancel", map[string]any{"sessionId": r.sid})
		r.drain(r.opts.Quiet)
	}()
	if err != nil {
		return notRun("%s", waitErr("neither prompt was answered", err))
	}
	switch {
	case m.id == idA:
		return pass("the first turn ended before the second was answered (%s)", m.Get("result.stopReason").Str+m.Get("error.message").Str)
	case m.IsError():
		return pass("the second prompt was refused: %s", m.Get("error.message").Str)
	}
	return fail([]int{m.N}, "the second prompt on the session was served while the first was still running; one session runs one turn at a time")
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
	from := len(r.messages())
	_, _ = r.notify("acp-check/notice", map[string]any{})
	_, _ = r.notify("_acp_check/notice", map[string]any{})
	if r.sid != "" {
		_, _ = r.notify("session/cancel", map[string]any{"sessionId": r.sid})
	}
	r.settle()
	for _, m := range r.messages()[from:] {
		if m.Out || !m.IsResponse() {
			continue
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
	m, err := r.call("session/new", map[string]any{"cwd": r.opts.Cwd, "mcpServers": []any{}})
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
// session/new, one prompt, settle.
func (r *run) basicSession() (verdict, bool) {
	if _, err := r.call("initialize", initParams(1)); err != nil {
		return notRun("initialize: %v", err), false
	}
	if _, err := r.newSession(); err == nil {
		if id, err := r.request("session/prompt", textPrompt(r.sid, r.opts.Prompt)); err == nil {
			_, _ = r.response(id, r.opts.Timeout)
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
	if _, err := LoadSchema(); err != nil {
		return notRun("%v", err)
	}
	own := r.findings("schema")
	all := append(append([]finding(nil), r.prior...), own...)
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
	v := fail(nil, "%d message(s) do not match the ACP v1 schema: %s", len(all), strings.Join(probs, " | "))
	v.extra = extra
	return v
}

var envelopeKeys = map[string]bool{"jsonrpc": true, "id": true, "method": true, "params": true, "result": true, "error": true}

// validate checks one message from the agent: the JSON-RPC envelope, then
// its params, result or error against the schema.
func (r *run) validate(s *Schema, m Msg) []string {
	var probs []string
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(m.Raw, &obj)
	for k := range obj {
		if !envelopeKeys[k] {
			probs = append(probs, fmt.Sprintf("unexpected top-level member %q", k))
		}
	}
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
		method, ours := r.methodOf(m.id)
		switch {
		case m.id == "null" && !hasE:
			probs = append(probs, "id: null is only for an error answering a request whose id could not be read")
		case !ours && m.id != "null":
			probs = append(probs, fmt.Sprintf("id: %s answers no request of the client", m.id))
		}
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
			probs = append(probs, fmt.Sprintf("params.requestId: %s is not the id of a request the agent sent (ids are per direction, acp-spec.md §13.2)", m.Get("params.requestId").Raw))
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
