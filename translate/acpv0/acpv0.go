// Package acpv0 translates ACP v1 (the editor side) to the original Zed ACP
// 0.0.x (the agent side): the protocol Gemini CLI 0.1.13–0.1.20 speaks with
// --experimental-acp (docs/agent-protocols.md#acp-v0). Every legacy
// message is a request with an id, answered with null for void methods; there
// are no sessions, so the engine opens one agent process per ACP session
// (Dialect.PerSession) and each translator serves exactly one.
//
// Choices this package makes where the legacy protocol leaves room (the
// golden transcripts in testdata pin each of them):
//
//   - Agent-hop ids count from 0 per direction
//     (docs/agent-protocols.md#acp-v0-framing); the translator's Calls to the
//     editor use Refs from 1.
//   - Tool calls: the translator allocates the legacy numeric id N from 1
//     (Gemini drops the failure update of id 0,
//     docs/agent-protocols.md#acp-v0-behaviour) and names the ACP tool call
//     "legacy-N".
//   - Prompt blocks: text → {"text"}; resource_link with a file:// URI →
//     {"path": local path}; resource_link with any other URI → {"text": URI};
//     an embedded text resource → {"text": "<context ref=\"URI\">\nTEXT\n</context>"}
//     (the wrapping claude-code-acp uses, so the model knows the source);
//     image, audio, blob resources and unknown block types → -32602, sending
//     nothing to the agent.
//   - A second session/prompt while one runs → -32600. Sending it would make
//     the legacy agent silently abort the running turn
//     (docs/agent-protocols.md#acp-v0-captured-session), losing that turn's answer.
//   - Permission answers: an error response, an unknown optionId or an
//     unknown outcome becomes the legacy outcome "reject" (never an allow);
//     ACP "cancelled" becomes "cancel".
//   - updateToolCall for a tool id this translator never allocated is not
//     forwarded (the editor has no such tool call): the agent gets null and
//     the engine logs the returned error.
//   - session/cancel always sends cancelSendMessage unless one is already in
//     flight, even when no prompt is known to run: a turn the engine abandoned
//     may still be running in the agent, and the "Not currently generating"
//     error of an idle agent is swallowed.
//   - session/close while a prompt runs cancels it and answers the prompt
//     {"stopReason":"cancelled"} at once, since the engine closes the link
//     right after.
//   - Agent frames that are notifications (no id; not legal in 0.0.x) are
//     handled like requests but not answered.
package acpv0

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/acp-bridge/acp-bridge/translate"
)

// DefaultProtocolVersion is what the legacy initialize carries unless the
// options say otherwise: the version every Gemini CLI 0.1.13–0.1.20 release
// advertises (docs/agent-protocols.md#acp-v0).
const DefaultProtocolVersion = "0.0.9"

// Dialect is the acp-v0 dialect. Its options block:
//
//	protocol_version = "0.0.9"   # sent in the legacy initialize; any 0.0.x answer is accepted
var Dialect = translate.Dialect{
	Name:       "acp-v0",
	Summary:    "original Zed ACP 0.0.x (Gemini CLI 0.1.13–0.1.20 --experimental-acp), one agent process per session",
	PerSession: true,
	Configure:  configure,
}

type options struct {
	ProtocolVersion hcl.Expression `hcl:"protocol_version,optional"`
}

func configure(body hcl.Body) (func() translate.Translator, hcl.Diagnostics) {
	version := DefaultProtocolVersion
	if body != nil {
		var o options
		diags := hcldecode.DecodeBody(body, nil, &o)
		if diags.HasErrors() {
			return nil, diags
		}
		v, moreDiags := o.ProtocolVersion.Value(nil)
		diags = append(diags, moreDiags...)
		if diags.HasErrors() {
			return nil, diags
		}
		if !v.IsNull() {
			if !v.IsKnown() || v.Type() != cty.String || !isLegacyVersion(v.AsString()) {
				return nil, append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid protocol_version",
					Detail:   `protocol_version must be a legacy ACP version string "0.0.x", such as "0.0.9".`,
					Subject:  o.ProtocolVersion.Range().Ptr(),
				})
			}
			version = v.AsString()
		}
	}
	return func() translate.Translator { return newTranslator(version) }, nil
}

// isLegacyVersion reports whether v is a semver "0.0.x" (with an optional
// pre-release or build suffix): legacy clients required an exact 0.0.x match
// (docs/agent-protocols.md#acp-v0-framing), and a bridge can speak to any of them.
func isLegacyVersion(v string) bool {
	rest, ok := strings.CutPrefix(v, "0.0.")
	if !ok {
		return false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && rest[0] == '0') {
		return false
	}
	return n == len(rest) || rest[n] == '-' || rest[n] == '+'
}

// Legacy method names (docs/agent-protocols.md#acp-v0-methods).
const (
	// editor → agent
	mInitialize        = "initialize"
	mAuthenticate      = "authenticate"
	mSendUserMessage   = "sendUserMessage"
	mCancelSendMessage = "cancelSendMessage"
	// agent → editor
	mStreamChunk    = "streamAssistantMessageChunk"
	mPushToolCall   = "pushToolCall"
	mConfirmTool    = "requestToolCallConfirmation"
	mUpdateToolCall = "updateToolCall"
	mUpdatePlan     = "updatePlan"
	mReadTextFile   = "readTextFile"
	mWriteTextFile  = "writeTextFile"
)

// legacyLoginID is the one auth method advertised when the legacy agent is
// not authenticated; authenticate with it runs the agent's own login.
const legacyLoginID = "legacy-login"

type initState int

const (
	initNone    initState = iota // no initialize yet
	initPending                  // legacy initialize sent, not answered
	initDone
	initFailed
)

// agentRequestKind says what a request the translator sent the agent was.
type agentRequestKind int

const (
	reqInitialize agentRequestKind = iota + 1
	reqAuthenticate
	reqPrompt
	reqCancel
)

// agentRequest is one outstanding request to the agent.
type agentRequest struct {
	kind agentRequestKind
	ref  translate.Ref // the editor request it serves (initialize, authenticate, prompt)
	// abandoned means the editor side no longer waits: the answer is
	// swallowed (an initialize answer still updates the state).
	abandoned bool
}

type callKind int

const (
	callPermission callKind = iota + 1
	callRead
	callWrite
)

// editorCall is one outstanding Call to the editor, made for one request of
// the agent.
type editorCall struct {
	kind    callKind
	agentID json.RawMessage // raw id of the agent's request to answer; nil for an (illegal) notification
	toolID  uint64          // permission: the legacy tool id
	offered []string        // permission: the optionIds offered
}

// turn is the running prompt.
type turn struct {
	ref             translate.Ref
	agentID         uint64
	cancelRequested bool
}

type queuedSession struct {
	ref     translate.Ref
	session string
	cwd     string
}

// translator is one agent connection. The zero value is not usable; see
// newTranslator.
type translator struct {
	protocolVersion string

	nextAgentID uint64
	requests    map[uint64]*agentRequest

	// calls are the Calls to the editor still waiting for its answer. Like
	// every output of this translator they name no session: the link
	// serves one.
	calls translate.Calls[*editorCall]

	init         initState
	initErr      json.RawMessage
	agentVersion string
	queued       []queuedSession

	session string // "" until session/new succeeded
	cwd     string
	closed  bool

	turn *turn
	// cancelInFlight is the agent id of the outstanding cancelSendMessage,
	// if any (ids are increasing, so it tells which turn it was sent in).
	cancelInFlight *uint64

	nextToolID uint64
	tools      map[uint64]bool
}

func newTranslator(protocolVersion string) *translator {
	return &translator{
		protocolVersion: protocolVersion,
		requests:        make(map[uint64]*agentRequest),
		calls:           translate.Calls[*editorCall]{Dialect: "acp-v0"},
		tools:           make(map[uint64]bool),
	}
}

// sendAgent returns the frame of a new legacy request and records it.
// params nil omits the key, as legacy peers do for parameterless methods.
func (t *translator) sendAgent(kind agentRequestKind, ref translate.Ref, method string, params json.RawMessage) (uint64, translate.Out) {
	id := t.nextAgentID
	t.nextAgentID++
	t.requests[id] = &agentRequest{kind: kind, ref: ref}
	return id, translate.Out{Kind: translate.Frame, Body: translate.RequestFrame(translate.IntID(id), method, params)}
}

// callEditor returns a new Call to the editor and records it.
func (t *translator) callEditor(c *editorCall, method string, params any) translate.Out {
	return t.calls.Call("", method, marshal(params), c)
}

func reply(ref translate.Ref, result any) translate.Out {
	return translate.Out{Kind: translate.Reply, Ref: ref, Body: marshal(result)}
}

func fail(ref translate.Ref, errObj json.RawMessage) translate.Out {
	return translate.Out{Kind: translate.Fail, Ref: ref, Body: errObj}
}

func failf(ref translate.Ref, code int, format string, args ...any) translate.Out {
	return fail(ref, translate.Errorf(code, format, args...).JSON())
}

// answerAgent answers a request of the agent; a nil id (a notification,
// which 0.0.x never sends) gets no answer.
func answerAgent(id json.RawMessage, result any) []translate.Out {
	if id == nil {
		return nil
	}
	return []translate.Out{{Kind: translate.Frame, Body: translate.ResultFrame(id, marshal(result))}}
}

func answerAgentError(id json.RawMessage, errObj json.RawMessage) []translate.Out {
	if id == nil {
		return nil
	}
	return []translate.Out{{Kind: translate.Frame, Body: translate.ErrorFrame(id, errObj)}}
}

// marshal encodes v without HTML escaping (prompts and tool output carry <,
// > and & verbatim) and without the trailing newline. The types passed in
// always encode; an error would be a bug, answered as JSON null.
func marshal(v any) json.RawMessage {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage("null")
	}
	return json.RawMessage(strings.TrimSuffix(b.String(), "\n"))
}

// passError passes an agent's error object on to the editor, or a -32603
// saying it was malformed (see translate.ErrorObject).
func passError(raw json.RawMessage) json.RawMessage { return translate.ErrorObject(raw) }

// notImplemented is the -32601 reason for ACP methods the legacy protocol
// cannot serve.
func notImplemented(method string) string {
	if strings.HasPrefix(method, "_") {
		return fmt.Sprintf("extension method %s is not supported: the agent speaks the legacy Zed ACP 0.0.x protocol (dialect acp-v0), which has no extensions", method)
	}
	return fmt.Sprintf("%s is not available: the agent speaks the legacy Zed ACP 0.0.x protocol (dialect acp-v0), which has no equivalent", method)
}
