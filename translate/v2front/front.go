// Package v2front puts an ACP v2 editor in front of the bridge's ACP v1
// engine. A Front is a pure state machine like the dialects' translators:
// it is fed each message the editor sent (v2) and each message the engine
// wrote for the editor (v1), and returns the messages to write on either
// side. It does no I/O, starts no goroutines and reads no clocks, so every
// translation is pinned by a golden transcript.
//
// What it carries across (the "v2 editors" table of docs/protocol-versions.md
// says the same for users):
//
//   - The v2 session/prompt answer only acknowledges the prompt: the Front
//     answers it at once with a fresh user messageId, sends a running
//     state_update and the user_message that echoes the prompt under that
//     id (a v1 agent's own live echo, a user_message_chunk while a prompt
//     runs, is dropped and counted), and turns the v1 prompt answer into the closing idle
//     state_update carrying the stop reason (an error answer becomes the
//     stop reason "error" with the error object).
//   - v1 chunks become v2 chunks with stable message ids (one id per run of
//     chunks of one kind); tool_call and tool_call_update become
//     tool_call_update upserts; plan becomes plan_update with one plan id
//     per session; session modes become a select config option.
//   - Capabilities are mapped to v2's shape: one info and one capabilities
//     field, object markers instead of booleans. The editor is announced to
//     the engine without fs and terminal capabilities, which v2 lacks: the
//     engine then serves fs requests from disk itself (confined to the
//     session's directories) and the Front refuses terminal requests. An
//     editor that announces v1's under capabilities._meta["acp-bridge"]
//     (translate.MetaV1ClientCapabilities: another acp-bridge, in front of
//     a v1 editor) is announced with them, and gets the calls they cover as
//     extension methods (translate.V1ClientMethodPrefix).
//   - session/resume with replayFrom becomes session/load, whose replay is
//     translated like a turn; both end with an idle snapshot before the
//     answer, as v2 requires.
//
// Request ids are rewritten on the way to the engine, so that a prompt the
// Front has answered can still be pending in the engine without blocking the
// editor's reuse of its id; the editor's raw ids are restored byte for byte.
package v2front

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// ProtocolVersion is the version a Front speaks toward the editor.
const ProtocolVersion = 2

// Dir says where an Out goes.
type Dir int

const (
	// ToEditor is a v2 message for the editor.
	ToEditor Dir = iota + 1
	// ToEngine is a v1 message for the engine, as if the editor had sent it.
	ToEngine
	// Note is a repair the Front made: Name names it, Detail says more;
	// nothing is sent.
	Note
)

// Repair names the Front reports in Note outputs.
const (
	// RepairDroppedModeUpdate: a v1 current_mode_update for a session whose
	// modes the Front never saw was dropped (v2 has no session modes).
	RepairDroppedModeUpdate = "v2-dropped-mode-update"
	// RepairDroppedReplay: session/resume without replayFrom reached an
	// agent that can only load, so the load's replay was dropped.
	RepairDroppedReplay = "v2-dropped-replay"
	// RepairRefusedClientMethod: the agent called a client method v2 does
	// not have (terminal/*) and the editor did not announce; the Front
	// answered it with an error.
	RepairRefusedClientMethod = "v2-refused-client-method"
	// RepairDroppedSSE: the agent's SSE MCP transport capability has no v2
	// equivalent and was left out of the capabilities.
	RepairDroppedSSE = "v2-dropped-sse-capability"
	// RepairDroppedPromptEcho: a v1 agent's user_message_chunk while a
	// prompt ran was dropped: the Front echoed the prompt itself, under the
	// messageId its acknowledgement named, and the agent's echo would show
	// it twice.
	RepairDroppedPromptEcho = "v2-dropped-prompt-echo"
)

// Out is one output of the Front.
type Out struct {
	To    Dir
	Frame []byte
	// Session is the ACP session the message concerns, when known.
	Session string
	// Name and Detail describe a Note.
	Name, Detail string
}

// modeConfigID is the id of the select config option the Front makes of a
// v1 agent's session modes.
const modeConfigID = "mode"

// idPrefix starts every engine-hop id the Front mints. The engine-hop ids
// are the Front's own: the editor never sees them.
const idPrefix = "acp-bridge/v2:"

// Front translates one editor connection. It is not safe for concurrent use.
type Front struct {
	next     uint64
	requests map[string]*request // by engine-hop id
	byEditor map[string]string   // editor's raw id → engine-hop id, while pending
	calls    map[string]*call    // engine's calls to the editor, by raw id
	sessions map[string]*session // sessions opened on this connection
	agent    gjson.Result        // the v1 initialize answer's agentCapabilities
	relay    clientMethods       // v1 client methods the editor serves (initializeToV1)
	out      []Out
}

type request struct {
	editorID json.RawMessage
	method   string // the v2 method the editor called
	sent     string // the v1 method sent to the engine
	session  string
	// dropReplay: the v1 method is a session/load whose replay the editor
	// did not ask for.
	dropReplay bool
	// modeValue is the mode a session/set_config_option on the mode option
	// selects.
	modeValue string
}

type call struct {
	method  string
	session string
}

type session struct {
	// The message being streamed: its v1 kind and the id the Front gave it.
	msgKind, msgID string
	// running counts the prompts accepted and not yet answered.
	running int
	// modes is the v1 SessionModeState, when the agent has modes.
	modes json.RawMessage
	// configOptions are the agent's own v1 config options.
	configOptions json.RawMessage
	// opening is set until the resume that opens the session succeeds;
	// dropping while the replay of a load the editor did not ask for runs.
	opening, dropping bool
}

// New returns a Front for one editor connection.
func New() *Front {
	return &Front{
		requests: map[string]*request{},
		byEditor: map[string]string{},
		calls:    map[string]*call{},
		sessions: map[string]*session{},
	}
}

func (f *Front) emit(to Dir, frame []byte, sid string) {
	f.out = append(f.out, Out{To: to, Frame: frame, Session: sid})
}

func (f *Front) note(name, sid, detail string) {
	f.out = append(f.out, Out{To: Note, Session: sid, Name: name, Detail: detail})
}

func (f *Front) notify(sid string, update any) {
	params, _ := json.Marshal(map[string]any{"sessionId": sid, "update": update})
	f.emit(ToEditor, translate.NotificationFrame("session/update", params), sid)
}

func (f *Front) mint() string {
	f.next++
	return idPrefix + strconv.FormatUint(f.next, 10)
}

func (f *Front) messageID() string {
	f.next++
	return "acp-bridge-msg-" + strconv.FormatUint(f.next, 10)
}

// FromEditor handles one message from the v2 editor. The returned slice is
// the caller's until the next call.
func (f *Front) FromEditor(frame []byte) []Out {
	f.out = f.out[:0]
	env, perr := translate.ParseEnvelope(frame)
	if perr != nil || env.Version != "2.0" {
		// The engine answers malformed messages itself, under the
		// editor's own id, which comes back unknown to the Front and
		// passes unchanged.
		f.emit(ToEngine, frame, "")
		return f.out
	}
	switch {
	case env.IsResponse():
		f.editorResponse(&env)
	case env.IsNotification():
		f.editorNotification(&env)
	default:
		f.editorRequest(&env)
	}
	return f.out
}

func (f *Front) editorResponse(env *translate.Envelope) {
	key := string(env.ID)
	c := f.calls[key]
	delete(f.calls, key)
	f.emit(ToEngine, env.Frame, "")
	if c != nil && c.method == "session/request_permission" {
		if s := f.sessions[c.session]; s != nil && s.running > 0 {
			f.notify(c.session, map[string]any{"sessionUpdate": "state_update", "state": "running"})
		}
	}
}

func (f *Front) editorNotification(env *translate.Envelope) {
	if env.Method == "$/cancel_request" {
		// The editor names its own id; the engine knows the Front's. A
		// request the Front has answered (an acknowledged prompt: its
		// turn ends with session/cancel) or never saw is not in flight,
		// and cancelling it does nothing.
		editorID := gjson.GetBytes(env.Params, "requestId").Raw
		if mint, ok := f.byEditor[editorID]; ok {
			params := withMember(env.Params, "requestId", quoteJSON(mint))
			f.emit(ToEngine, translate.NotificationFrame(env.Method, params), "")
		}
		return
	}
	f.emit(ToEngine, env.Frame, env.SessionID)
}

func (f *Front) editorRequest(env *translate.Envelope) {
	sid := gjson.GetBytes(env.Params, "sessionId").Str
	r := &request{editorID: json.RawMessage(bytes.Clone(env.ID)), method: env.Method, sent: env.Method, session: sid}
	params := env.Params
	switch env.Method {
	case "initialize":
		params = f.initializeToV1(params)
	case "session/new":
		params = withDefault(params, "mcpServers", json.RawMessage("[]"))
	case "session/resume":
		params = f.resumeToV1(r, params)
		if f.sessions[sid] == nil {
			f.sessions[sid] = &session{opening: true}
		}
		f.sessions[sid].dropping = r.dropReplay
	case "session/prompt":
		s := f.sessions[sid]
		if s == nil {
			f.emit(ToEditor, translate.ErrorFrame(r.editorID, sessionNotFound(sid,
				"unknown sessionId %q: no session with that id was opened on this connection; open it with session/new or session/resume")), sid)
			return
		}
		// v2: the answer acknowledges the prompt; the turn's end comes
		// as an idle state_update (see engineResponse).
		msgID := f.messageID()
		ack, _ := json.Marshal(map[string]string{"messageId": msgID})
		f.emit(ToEditor, translate.ResultFrame(r.editorID, ack), sid)
		if s.running++; s.running == 1 {
			f.notify(sid, map[string]any{"sessionUpdate": "state_update", "state": "running"})
		}
		f.echo(sid, msgID, params)
		s.msgKind, s.msgID = "", ""
		params = withPromptMessageID(params, msgID)
	case "session/set_config_option":
		params = f.setConfigToV1(r, params)
	case "auth/login":
		r.sent = "authenticate"
	}
	mint := f.mint()
	f.requests[mint] = r
	if env.Method != "session/prompt" { // answered already
		f.byEditor[string(r.editorID)] = mint
	}
	f.emit(ToEngine, translate.RequestFrame(quoteJSON(mint), r.sent, params), sid)
}

// withPromptMessageID names the user message's messageId in the v1
// prompt's _meta["acp-bridge"].messageId, the editor's _meta kept: the
// engine records the prompt with it, and a replay of the prompt carries
// the messageId the editor was given for it (a v1 prompt has no member for
// it; _meta is ACP's place for what a peer may not assume anything of).
func withPromptMessageID(params json.RawMessage, msgID string) json.RawMessage {
	meta := json.RawMessage("{}")
	if m := gjson.GetBytes(params, "_meta"); m.IsObject() {
		meta = json.RawMessage(m.Raw)
	}
	ours := json.RawMessage("{}")
	if o := gjson.GetBytes(meta, "acp-bridge"); o.IsObject() {
		ours = json.RawMessage(o.Raw)
	}
	meta = withMember(meta, "acp-bridge", withMember(ours, "messageId", quoteJSON(msgID)))
	return withMember(params, "_meta", meta)
}

// echo sends the user message a prompt inserted, under the messageId its
// acknowledgement named: v2 agents must echo it during the live session,
// and a v1 agent does not (a v1 editor shows the prompt it sent).
func (f *Front) echo(sid, msgID string, params json.RawMessage) {
	update := map[string]any{"sessionUpdate": "user_message", "messageId": msgID}
	if prompt := gjson.GetBytes(params, "prompt"); prompt.IsArray() {
		update["content"] = json.RawMessage(prompt.Raw)
	}
	f.notify(sid, update)
}

// resumeToV1 picks the v1 method for a v2 session/resume: session/load when
// the editor asks for a replay (v1's resume never replays), session/resume
// when it does not and the agent can, else session/load with its replay
// dropped.
func (f *Front) resumeToV1(r *request, params json.RawMessage) json.RawMessage {
	replay := gjson.GetBytes(params, "replayFrom")
	params = withoutMember(params, "replayFrom")
	canResume := f.agent.Get("sessionCapabilities.resume").IsObject()
	canLoad := f.agent.Get("loadSession").Bool()
	switch {
	case replay.Exists() && replay.Type != gjson.Null:
		r.sent = "session/load"
	case canResume || !canLoad:
		return params // v1 session/resume: the agent or the engine answers it
	default:
		r.sent = "session/load"
		r.dropReplay = true
	}
	return withDefault(params, "mcpServers", json.RawMessage("[]"))
}

// setConfigToV1 turns v2's typed session/set_config_option into v1's, and a
// choice of the mode option the Front made into session/set_mode.
func (f *Front) setConfigToV1(r *request, params json.RawMessage) json.RawMessage {
	p := gjson.ParseBytes(params)
	if s := f.sessions[r.session]; s != nil && s.modes != nil && p.Get("configId").Str == modeConfigID && !hasOption(s.configOptions, modeConfigID) {
		r.sent = "session/set_mode"
		r.modeValue = p.Get("value").Str
		out, _ := json.Marshal(map[string]any{"sessionId": r.session, "modeId": r.modeValue})
		return out
	}
	if p.Get("type").Str == "id" {
		return withoutMember(params, "type") // v1's select value has no type
	}
	return params
}

// FromEngine handles one v1 message the engine wrote for the editor. The
// returned slice is the caller's until the next call.
func (f *Front) FromEngine(frame []byte) []Out {
	f.out = f.out[:0]
	env, perr := translate.ParseEnvelope(frame)
	if perr != nil {
		f.emit(ToEditor, frame, "")
		return f.out
	}
	switch {
	case env.IsResponse():
		f.engineResponse(&env)
	case env.IsNotification():
		f.engineNotification(&env)
	default:
		f.engineRequest(&env)
	}
	return f.out
}

func (f *Front) engineResponse(env *translate.Envelope) {
	var mint string
	if err := json.Unmarshal(env.ID, &mint); err != nil || !strings.HasPrefix(mint, idPrefix) {
		f.emit(ToEditor, env.Frame, "") // an answer under the editor's own id
		return
	}
	r := f.requests[mint]
	if r == nil {
		return // answered already (cannot happen: the engine answers once)
	}
	delete(f.requests, mint)
	if f.byEditor[string(r.editorID)] == mint {
		delete(f.byEditor, string(r.editorID))
	}
	if env.Error != nil {
		f.failed(r, env.Error)
		return
	}
	result := env.Result
	switch r.sent {
	case "initialize":
		result = f.initializeToV2(result)
	case "session/new":
		if sid := gjson.GetBytes(result, "sessionId").Str; sid != "" {
			s := &session{}
			f.sessions[sid] = s
			result = s.openedToV2(result)
		}
	case "session/load", "session/resume":
		s := f.sessions[r.session]
		if s == nil {
			s = &session{}
			f.sessions[r.session] = s
		}
		s.opening, s.dropping = false, false
		result = withoutMember(s.openedToV2(result), "sessionId")
		// v2: every successful resume sends a state snapshot before its
		// answer.
		f.idle(r.session, s)
	case "session/prompt":
		f.turnEnded(r.session, gjson.GetBytes(result, "stopReason").Str, nil, promptMeta(result))
		return
	case "session/set_mode":
		// v2's answer is the session's config options, v1's is empty.
		s := f.sessions[r.session]
		if s == nil {
			s = &session{} // closed meanwhile: no options to report
		}
		if s.modes != nil {
			s.modes = withMember(s.modes, "currentModeId", quoteJSON(r.modeValue))
		}
		result = withMember(withoutMember(result, "configOptions"), "configOptions", mustJSON(s.configOptionsV2()))
	case "session/set_config_option":
		if s := f.sessions[r.session]; s != nil {
			if opts := gjson.GetBytes(result, "configOptions"); opts.IsArray() {
				s.configOptions = json.RawMessage(opts.Raw)
			}
			result = withMember(result, "configOptions", mustJSON(s.configOptionsV2()))
		}
	case "session/close", "session/delete":
		delete(f.sessions, r.session)
	}
	f.emit(ToEditor, translate.ResultFrame(r.editorID, result), r.session)
}

// failed answers the editor's request with the engine's error, given v2's
// typed data where v2 defines one. A failed prompt was acknowledged
// already: its error becomes the turn's "error" stop reason.
func (f *Front) failed(r *request, errObj json.RawMessage) {
	errObj = typedError(r, errObj)
	switch r.sent {
	case "session/prompt":
		f.turnEnded(r.session, "error", errObj, nil)
		return
	case "session/load", "session/resume":
		if s := f.sessions[r.session]; s != nil && s.opening {
			delete(f.sessions, r.session) // never opened
		}
	}
	f.emit(ToEditor, translate.ErrorFrame(r.editorID, errObj), r.session)
}

// typedError gives an unknown session's error v2's SessionNotFoundErrorData
// (code -32002, data.sessionId), keeping the rest of data.
func typedError(r *request, errObj json.RawMessage) json.RawMessage {
	e := gjson.ParseBytes(errObj)
	code, msg := e.Get("code").Int(), e.Get("message").Str
	if r.session == "" {
		return errObj
	}
	unknown := code == translate.CodeResourceNotFound ||
		(code == translate.CodeInvalidParams && strings.Contains(msg, "unknown sessionId"))
	if !unknown {
		return errObj
	}
	data := e.Get("data")
	obj := json.RawMessage("{}")
	if data.IsObject() {
		obj = json.RawMessage(data.Raw)
	}
	if !gjson.GetBytes(obj, "sessionId").Exists() {
		obj = withMember(obj, "sessionId", quoteJSON(r.session))
	}
	errObj = withMember(errObj, "code", json.RawMessage(strconv.Itoa(translate.CodeResourceNotFound)))
	return withMember(errObj, "data", obj)
}

// turnEnded ends a prompt turn: the idle state_update once no prompt of the
// session is still running, with the prompt answer's _meta.
func (f *Front) turnEnded(sid, stopReason string, errObj, meta json.RawMessage) {
	s := f.sessions[sid]
	if s == nil {
		return
	}
	if s.running > 0 {
		s.running--
	}
	s.msgKind, s.msgID = "", ""
	if s.running > 0 {
		// Another prompt of the session still runs, so the session is
		// not idle; a failure must still reach the editor.
		if errObj != nil {
			f.notify(sid, map[string]any{"sessionUpdate": "notice", "severity": "error",
				"title": "A prompt failed", "description": gjson.GetBytes(errObj, "message").Str,
				"_meta": map[string]any{"acp-bridge": map[string]any{"error": errObj}}})
		}
		return
	}
	update := map[string]any{"sessionUpdate": "state_update", "state": "idle", "stopReason": stopReason}
	if errObj != nil {
		update["error"] = errObj
	}
	if meta != nil {
		update["_meta"] = meta
	}
	f.notify(sid, update)
}

// idle sends a session's current state: idle unless a prompt runs.
func (f *Front) idle(sid string, s *session) {
	if s.running > 0 {
		f.notify(sid, map[string]any{"sessionUpdate": "state_update", "state": "running"})
		return
	}
	f.notify(sid, map[string]any{"sessionUpdate": "state_update", "state": "idle"})
}

func (f *Front) engineNotification(env *translate.Envelope) {
	if env.Method != "session/update" {
		f.emit(ToEditor, env.Frame, env.SessionID)
		return
	}
	sid := gjson.GetBytes(env.Params, "sessionId").Str
	s := f.sessions[sid]
	if s == nil {
		// A session opened by a request still pending (a load's replay
		// comes before its answer) or by the engine itself.
		s = &session{}
		f.sessions[sid] = s
	}
	if s.dropping {
		f.note(RepairDroppedReplay, sid, gjson.GetBytes(env.Params, "update.sessionUpdate").Str)
		return
	}
	update, ok := f.updateToV2(sid, s, gjson.GetBytes(env.Params, "update"))
	if !ok {
		return
	}
	f.emit(ToEditor, translate.NotificationFrame("session/update", withMember(env.Params, "update", update)), sid)
}

func (f *Front) engineRequest(env *translate.Envelope) {
	sid := gjson.GetBytes(env.Params, "sessionId").Str
	switch {
	case env.Method == "session/request_permission":
		f.calls[string(env.ID)] = &call{method: env.Method, session: sid}
		if s := f.sessions[sid]; s != nil && s.running > 0 {
			f.notify(sid, map[string]any{"sessionUpdate": "state_update", "state": "requires_action"})
		}
		f.emit(ToEditor, translate.RequestFrame(env.ID, env.Method, permissionToV2(env.Params)), sid)
	case (strings.HasPrefix(env.Method, "terminal/") || strings.HasPrefix(env.Method, "fs/")) && !f.relay.serves(env.Method):
		// v2 has no client terminals and no client file system. The
		// engine serves fs itself (the editor was announced without
		// it); whatever still comes here is refused, never forwarded
		// as a method the editor does not have. An editor that
		// announced v1's under _meta (another acp-bridge, relaying for
		// a v1 editor) gets those it announced, below.
		e := translate.Errorf(translate.CodeMethodNotFound,
			"%s is not available: the editor speaks ACP v2, which has no client terminals or file system; the agent should run commands and edit files itself", env.Method).
			With("method", env.Method).With("editorProtocol", ProtocolVersion)
		f.note(RepairRefusedClientMethod, sid, env.Method)
		f.emit(ToEngine, translate.ErrorFrame(env.ID, e.JSON()), sid)
	case strings.HasPrefix(env.Method, "terminal/") || strings.HasPrefix(env.Method, "fs/"):
		// One the editor announced under _meta: v2 has no such method,
		// so it goes as the extension method that names it.
		f.calls[string(env.ID)] = &call{method: env.Method, session: sid}
		f.emit(ToEditor, translate.RequestFrame(env.ID, translate.V1ClientMethodPrefix+env.Method, env.Params), sid)
	default:
		f.calls[string(env.ID)] = &call{method: env.Method, session: sid}
		f.emit(ToEditor, env.Frame, sid)
	}
}

// promptMeta is the _meta of the idle state_update that ends a turn: the
// prompt answer's own, and its other members (v1's unstable usage, say),
// which v2's answer has no place for, under _meta["acp-bridge"].promptResponse.
func promptMeta(result json.RawMessage) json.RawMessage {
	m := members(result)
	meta := m["_meta"]
	delete(m, "_meta")
	delete(m, "stopReason")
	if len(m) == 0 {
		return meta
	}
	mm := members(meta)
	if mm == nil {
		mm = map[string]json.RawMessage{}
	}
	own := members(mm["acp-bridge"])
	if own == nil {
		own = map[string]json.RawMessage{}
	}
	own["promptResponse"] = mustJSON(m)
	mm["acp-bridge"] = mustJSON(own)
	return mustJSON(mm)
}

// sessionNotFound is v2's error for an unknown session.
func sessionNotFound(sid, format string) json.RawMessage {
	return translate.Errorf(translate.CodeResourceNotFound, format, sid).With("sessionId", sid).JSON()
}

// --- JSON helpers --------------------------------------------------------------

// members decodes a JSON object into its raw members; nil when raw is not
// an object.
func members(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil
	}
	return m
}

// withMember returns obj with key set to value, every other member kept.
func withMember(obj json.RawMessage, key string, value json.RawMessage) json.RawMessage {
	m := members(obj)
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	m[key] = value
	return mustJSON(m)
}

// withDefault sets key only when obj lacks it (or has it null).
func withDefault(obj json.RawMessage, key string, value json.RawMessage) json.RawMessage {
	if r := gjson.GetBytes(obj, key); r.Exists() && r.Type != gjson.Null {
		return obj
	}
	return withMember(obj, key, value)
}

func withoutMember(obj json.RawMessage, key string) json.RawMessage {
	m := members(obj)
	if m == nil {
		return obj
	}
	if _, ok := m[key]; !ok {
		return obj
	}
	delete(m, key)
	return mustJSON(m)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("v2front: %v", err)) // only raw members and plain values are marshalled
	}
	return b
}

func quoteJSON(s string) json.RawMessage { return mustJSON(s) }
