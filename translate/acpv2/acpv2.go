// Package acpv2 translates ACP v1 (the editor side, and the engine) to ACP v2
// (the agent side), the version in Preview since 2026-11-20. It follows the
// v2 JSON Schema of the official SDK 2.4.0 where the published docs differ:
// that SDK validates every message and closes the connection on a mismatch.
//
// What changes between the versions, and what this translator does with it
// (the golden transcripts in testdata pin each choice):
//
//   - A v2 session/prompt answer ({messageId}) only acknowledges the prompt;
//     the turn ends with an idle state_update carrying the stop reason. The
//     acknowledgement is held, and the closing state_update becomes the v1
//     prompt answer. An idle update without a stop reason ends the turn as
//     end_turn; an "error" stop reason fails the prompt with the agent's
//     error; a stop reason v1 lacks (an extension "_x", or one from a later
//     version) becomes end_turn, the agent's value kept in
//     _meta["acp-bridge"].stopReason. running and requires_action updates
//     have no v1 form and are not sent.
//   - Updates are upserts keyed by id. Chunks pass on as v1 chunks. A
//     whole-message upsert (agent_message, agent_thought, user_message) is
//     compared with what the editor already has for that messageId: only
//     the new suffix is sent; a rewrite of what the editor has cannot be
//     expressed in v1 and is dropped, with a note.
//   - tool_call_update upserts become a v1 tool_call the first time an id is
//     seen, a tool_call_update after; tool_call_content_chunk appends to the
//     tool's content, sent whole as v1 replaces content. null clears a field:
//     to "" (title), "other" (kind), "pending" (status), [] (content,
//     locations). plan_update with items becomes a v1 plan.
//   - Enum values are open in v2: a tool status v1 lacks becomes failed
//     (cancelled) or in_progress (paused), an unknown kind other; unknown
//     ones are left out, with a note.
//   - Updates the v1 schema has no place for (terminal output, background
//     work, unknown kinds, content blocks of a type v1 lacks) are dropped
//     and counted (note "v2-unrepresentable"). The live echo of the user's own prompt is not
//     sent: a v1 editor shows the prompt it sent.
//   - Capabilities: the v1 initialize becomes v2's (info, capabilities;
//     client fs and terminal have no v2 form), and the v2 answer is mapped
//     back to v1's shape: the session baseline becomes loadSession and the
//     list, resume and close markers, object markers become booleans.
//   - session/load becomes session/resume with replayFrom start (v2 has no
//     session/load); its replayed history reaches the editor as v1 updates.
//     session/set_mode has no v2 form and is answered -32601; authenticate
//     becomes auth/login. Extension methods pass through both ways.
//   - Errors keep their code; the typed data of v2 (unsupported protocol
//     version, session not found) gives the v1 message its words, and data
//     keeps the agent's.
//
// Agent-hop ids count from 1. A Passthrough translator relays v2 frames
// untouched for a v2 editor (see NewPassthrough).
package acpv2

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/hashicorp/hcl/v2"

	"github.com/acp-bridge/acp-bridge/translate"
)

// ProtocolVersion is the ACP version this dialect speaks to its agent.
const ProtocolVersion = 2

// Dialect is the acp-v2 dialect: a v1 editor (the engine) in front of an ACP
// v2 agent. The acp dialect selects it by itself when the agent answers
// version 2 (see Negotiator); naming it forces v2.
var Dialect = translate.Dialect{
	Name:    "acp-v2",
	Summary: "ACP v2 agent (Preview), translated to v1 for the editor: prompt turns end at the idle state_update, upserts become chunks and tool calls, capabilities mapped",
	Relay:   true,
	Configure: func(options hcl.Body) (func() translate.Translator, hcl.Diagnostics) {
		if options != nil {
			var none struct{}
			if diags := hcldecode.DecodeBody(options, nil, &none); diags.HasErrors() {
				return nil, diags
			}
		}
		return func() translate.Translator { return New() }, nil
	},
}

// Note names: what the translator changed or dropped, counted by the engine.
const (
	// NoteUnrepresentable: an update or field v1 has no place for was
	// dropped (terminal output, background work, a message rewrite).
	NoteUnrepresentable = "v2-unrepresentable"
	// NoteFallback: an open v2 enum value v1 lacks was replaced by its
	// fallback.
	NoteFallback = "v2-enum-fallback"
)

type reqKind int

const (
	reqPass reqKind = iota // the answer passes through
	reqInitialize
	reqNew
	reqLoad // v1 session/load, sent as session/resume with replay
	reqResume
	reqPrompt
	reqList
	reqConfig // session/set_config_option
)

// pending is one request sent to the agent for an editor request.
type pending struct {
	kind    reqKind
	ref     translate.Ref
	session string
	// abandoned means the engine answered the request itself: the
	// agent's late answer is swallowed.
	abandoned bool
}

// Translator translates one agent link. The zero value is not usable; see New.
type Translator struct {
	nextID   uint64
	requests map[uint64]*pending
	byRef    map[translate.Ref]uint64

	nextCall translate.Ref
	calls    map[translate.Ref]json.RawMessage // Call ref → the agent's raw id
	callRefs map[string]translate.Ref          // the agent's id key → Call ref

	sessions map[string]*session
}

// session is what the translator keeps of one ACP session.
type session struct {
	turn *turn
	// replaying is set while a session/load's replay runs: the user's
	// messages are history then, and are sent.
	replaying bool
	messages  map[string]*message
	tools     map[string]*tool
	// msgOrder and toolOrder hold the ids in the order they were first
	// seen, so that only the latest keep of each are remembered.
	msgOrder, toolOrder []string
}

// keep bounds what a session remembers of its messages and tool calls: a
// long session does not hold its whole transcript. An upsert for a message
// older than that is taken for a new message, and a tool call's update for
// a new tool call.
const keep = 256

// remember records id as seen and returns the id to forget, if any.
func remember(order *[]string, id string) (forget string) {
	*order = append(*order, id)
	if len(*order) <= keep {
		return ""
	}
	forget = (*order)[0]
	*order = (*order)[1:]
	return forget
}

// turn is the running prompt of a session.
type turn struct {
	ref   translate.Ref
	id    uint64 // agent-hop id of the session/prompt
	acked bool   // the agent acknowledged the prompt
	meta  json.RawMessage
}

// message is what the editor has been sent of one message: its kind and
// its content, consecutive text merged (editors join text chunks).
type message struct {
	kind   string // v1 chunk kind: agent_message_chunk, agent_thought_chunk, user_message_chunk
	blocks []block
}

type block struct {
	text   []byte
	isText bool
	raw    json.RawMessage // a non-text block, compacted
}

// tool is what the editor has been sent of one tool call.
type tool struct {
	content []json.RawMessage // v1 content items, replaced whole on the wire
}

// New returns a translator for one link to a v2 agent.
func New() *Translator {
	return &Translator{
		requests: make(map[uint64]*pending),
		byRef:    make(map[translate.Ref]uint64),
		calls:    make(map[translate.Ref]json.RawMessage),
		callRefs: make(map[string]translate.Ref),
		sessions: make(map[string]*session),
	}
}

// Adopt starts the translator on a link whose initialize was already sent
// (by Negotiator, as request id lastID) and answered with result, a v2
// initialize answer: it returns the v1 answer for ref. Later agent-hop ids
// follow lastID.
func (t *Translator) Adopt(ref translate.Ref, lastID uint64, result json.RawMessage) []translate.Out {
	t.nextID = lastID
	return t.initialized(ref, result)
}

func (t *Translator) session(id string) *session {
	s := t.sessions[id]
	if s == nil {
		s = &session{messages: make(map[string]*message), tools: make(map[string]*tool)}
		t.sessions[id] = s
	}
	return s
}

// send returns the frame of a new agent request and records it.
func (t *Translator) send(p *pending, method string, params json.RawMessage) (uint64, translate.Out) {
	t.nextID++
	t.requests[t.nextID] = p
	t.byRef[p.ref] = t.nextID
	return t.nextID, translate.Out{Kind: translate.Frame, Body: translate.RequestFrame(translate.IntID(t.nextID), method, params)}
}

func reply(ref translate.Ref, body json.RawMessage) translate.Out {
	return translate.Out{Kind: translate.Reply, Ref: ref, Body: body}
}

func fail(ref translate.Ref, e *translate.Error) translate.Out {
	return translate.Out{Kind: translate.Fail, Ref: ref, Body: e.JSON()}
}

func note(name, format string, args ...any) translate.Out {
	return translate.Out{Kind: translate.Note, Method: name, Body: fmt.Appendf(nil, format, args...)}
}

// update builds a v1 session/update notification.
func update(sessionID string, u json.RawMessage) translate.Out {
	return translate.Out{Kind: translate.Notify, Method: "session/update", Session: sessionID,
		Body: marshal(struct {
			SessionID string          `json:"sessionId"`
			Update    json.RawMessage `json:"update"`
		}{sessionID, u})}
}

// object is a decoded JSON object whose members stay raw.
type object map[string]json.RawMessage

// decode returns raw as an object; nil when it is not one.
func decode(raw json.RawMessage) object {
	var o object
	if json.Unmarshal(raw, &o) != nil || o == nil {
		return nil
	}
	return o
}

// isNull reports whether a member is present and null.
func isNull(raw json.RawMessage, present bool) bool {
	return present && string(bytes.TrimSpace(raw)) == "null"
}

// str returns a member as a Go string ("" when it is not a string).
func (o object) str(key string) string {
	var s string
	if raw, ok := o[key]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// marshal encodes v without HTML escaping and without the trailing
// newline. Objects of raw members always encode; an error would be a bug,
// answered as null.
func marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage("null")
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func quoted(s string) json.RawMessage { return marshal(s) }

// compact returns raw on one line, for comparing blocks.
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// key canonicalises a raw id for map lookups (1 and "1" differ).
func key(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return "s:" + s
	}
	return "r:" + strings.TrimSpace(string(raw))
}

func clone(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// AgentProtocol reports the ACP version the agent hop speaks: always 2.
func (t *Translator) AgentProtocol() int { return ProtocolVersion }
