package acpv0

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// FromAgent implements translate.Translator. Every legacy request is answered
// in the same call, so the agent never stalls
// (docs/agent-protocols.md#acp-v0-behaviour). A returned error comes with the
// answer the agent needs (-32601, -32602…) in the outputs; the engine writes
// the outputs and logs the error.
func (t *translator) FromAgent(frame []byte) ([]translate.Out, error) {
	env, perr := translate.ParseEnvelope(frame)
	if perr != nil {
		// Answer only what claims to be a request: an id-bearing frame
		// without "method" may be a broken response, and an error "answer"
		// would name one of the agent's own request ids.
		if perr.Code == translate.CodeInvalidRequest && env.ID != nil && gjson.GetBytes(frame, "method").Exists() {
			return answerAgentError(env.ID, perr.JSON()), fmt.Errorf("acp-v0: invalid agent request: %w", perr)
		}
		return nil, fmt.Errorf("acp-v0: unusable agent frame: %w", perr)
	}
	if env.IsResponse() {
		return t.agentResponse(env)
	}
	handle, ok := agentMethods[env.Method]
	if !ok {
		err := translate.Errorf(translate.CodeMethodNotFound, "acp-v0 does not implement the legacy client method %q", env.Method)
		return answerAgentError(env.ID, err.JSON()), fmt.Errorf("acp-v0: %w", err)
	}
	if t.session == "" || t.closed {
		err := translate.Errorf(translate.CodeInternalError, "no ACP session is open on this connection")
		return answerAgentError(env.ID, err.JSON()), fmt.Errorf("acp-v0: agent called %s: %w", env.Method, err)
	}
	outs, err := handle(t, env.ID, env.Params)
	switch {
	case err == nil:
		return outs, nil
	case outs != nil:
		// Handled (the agent has its answer) but worth a log line.
		return outs, fmt.Errorf("acp-v0: agent called %s: %w", env.Method, err)
	}
	// Malformed params: the agent gets the error, the editor nothing, and
	// the turn goes on.
	return answerAgentError(env.ID, err.JSON()), fmt.Errorf("acp-v0: agent called %s: %w", env.Method, err)
}

// agentResponse handles the agent's answer to one of the translator's
// requests.
func (t *translator) agentResponse(env translate.Envelope) ([]translate.Out, error) {
	id, err := strconv.ParseUint(string(env.ID), 10, 64)
	req := t.requests[id]
	if err != nil || req == nil {
		return nil, fmt.Errorf("acp-v0: the agent answered id %s, which acp-v0 has no request for", env.ID)
	}
	delete(t.requests, id)
	switch req.kind {
	case reqInitialize:
		return t.initialized(req, env.Result, env.Error), nil
	case reqAuthenticate:
		switch {
		case req.abandoned:
			return nil, nil
		case env.Error != nil:
			return []translate.Out{fail(req.ref, passError(env.Error))}, nil
		}
		return []translate.Out{reply(req.ref, struct{}{})}, nil
	case reqPrompt:
		return t.turnEnded(req, id, env.Error), nil
	case reqCancel:
		// Swallowed, result or error: an idle agent answers "Not currently
		// generating" (docs/agent-protocols.md#acp-v0-captured-session), and
		// the turn's own answer is what ends it.
		if t.cancelInFlight != nil && *t.cancelInFlight == id {
			t.cancelInFlight = nil
		}
		return nil, nil
	}
	return nil, fmt.Errorf("acp-v0: request %d has unknown kind %d", id, req.kind)
}

// agentHandler handles one legacy request of the agent with a session open.
// id is the raw id (borrowed; nil for a notification), params the raw params
// (borrowed). An error without outputs means malformed params: the caller
// answers the agent with it. An error with outputs is only reported: the
// outputs already answer the agent.
type agentHandler func(t *translator, id, params json.RawMessage) ([]translate.Out, *translate.Error)

var agentMethods = map[string]agentHandler{
	mStreamChunk:    (*translator).streamChunk,
	mPushToolCall:   (*translator).pushToolCall,
	mConfirmTool:    (*translator).confirmToolCall,
	mUpdateToolCall: (*translator).updateToolCall,
	mUpdatePlan:     (*translator).updatePlan,
	mReadTextFile:   (*translator).readTextFile,
	mWriteTextFile:  (*translator).writeTextFile,
}

func badParams(method string, err error) *translate.Error {
	return translate.Errorf(translate.CodeInvalidParams, "%s params: %s", method, describeJSONError(err))
}

// describeJSONError words a decoding error for a peer: which field has the
// wrong JSON type, without Go type names.
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("%s has the wrong type (got %s)", te.Field, te.Value)
	case errors.As(err, &te):
		return fmt.Sprintf("wrong type (got %s)", te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF) || err.Error() == "unexpected end of JSON input":
		return "missing"
	}
	return err.Error()
}

// update builds a session/update notification for this session.
func (t *translator) update(u any) translate.Out {
	return translate.Out{Kind: translate.Notify, Method: "session/update", Body: marshal(struct {
		SessionID string `json:"sessionId"`
		Update    any    `json:"update"`
	}{t.session, u})}
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (t *translator) streamChunk(id, params json.RawMessage) ([]translate.Out, *translate.Error) {
	var p struct {
		Chunk *struct {
			Text    *string `json:"text"`
			Thought *string `json:"thought"`
		} `json:"chunk"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, badParams(mStreamChunk, err)
	}
	var kind, text string
	switch {
	case p.Chunk == nil:
		return nil, translate.Errorf(translate.CodeInvalidParams, "%s needs a chunk", mStreamChunk)
	case p.Chunk.Text != nil:
		kind, text = "agent_message_chunk", *p.Chunk.Text
	case p.Chunk.Thought != nil:
		kind, text = "agent_thought_chunk", *p.Chunk.Thought
	default:
		return nil, translate.Errorf(translate.CodeInvalidParams, "%s chunk has neither text nor thought", mStreamChunk)
	}
	outs := []translate.Out{t.update(struct {
		SessionUpdate string      `json:"sessionUpdate"`
		Content       textContent `json:"content"`
	}{kind, textContent{"text", text}})}
	return append(outs, answerAgent(id, nil)...), nil
}

// toolCall is an ACP tool_call, tool_call_update, or the toolCall of a
// permission request (schema: ToolCall, ToolCallUpdate).
type toolCall struct {
	SessionUpdate string          `json:"sessionUpdate,omitempty"`
	ToolCallID    string          `json:"toolCallId"`
	Title         *string         `json:"title,omitempty"`
	Kind          string          `json:"kind,omitempty"`
	Status        string          `json:"status,omitempty"`
	Content       json.RawMessage `json:"content,omitempty"`
	Locations     []location      `json:"locations,omitempty"`
	RawInput      json.RawMessage `json:"rawInput,omitempty"`
}

func toolCallID(n uint64) string { return "legacy-" + strconv.FormatUint(n, 10) }

// allocTool returns the next legacy tool id, from 1: Gemini tests the id for
// truthiness and silently loses the failure update of id 0
// (docs/agent-protocols.md#acp-v0-behaviour).
func (t *translator) allocTool() uint64 {
	t.nextToolID++
	t.tools[t.nextToolID] = true
	return t.nextToolID
}

// toolStatus is a tool_call_update that changes only the status.
func (t *translator) toolStatus(n uint64, status string) translate.Out {
	return t.update(toolCall{SessionUpdate: "tool_call_update", ToolCallID: toolCallID(n), Status: status})
}

// legacyTool holds the fields pushToolCall and requestToolCallConfirmation
// share.
type legacyTool struct {
	Label        *string          `json:"label"`
	Icon         string           `json:"icon"`
	Content      json.RawMessage  `json:"content"`
	Locations    []legacyLocation `json:"locations"`
	Confirmation json.RawMessage  `json:"confirmation"`
}

// toolCall converts the shared fields; the id is allocated by the caller.
func (t *translator) toolCall(method string, params json.RawMessage) (legacyTool, toolCall, *translate.Error) {
	var p legacyTool
	if err := json.Unmarshal(params, &p); err != nil {
		return p, toolCall{}, badParams(method, err)
	}
	if p.Label == nil {
		return p, toolCall{}, translate.Errorf(translate.CodeInvalidParams, "%s needs a label", method)
	}
	content, _, err := t.toolContent(p.Content)
	if err != nil {
		return p, toolCall{}, err
	}
	locs, err := t.locations(p.Locations)
	if err != nil {
		return p, toolCall{}, err
	}
	title := *p.Label
	return p, toolCall{
		SessionUpdate: "tool_call",
		Title:         &title,
		Kind:          toolKind(p.Icon, ""),
		Content:       content,
		Locations:     locs,
	}, nil
}

func (t *translator) pushToolCall(id, params json.RawMessage) ([]translate.Out, *translate.Error) {
	_, tc, err := t.toolCall(mPushToolCall, params)
	if err != nil {
		return nil, err
	}
	n := t.allocTool()
	tc.ToolCallID = toolCallID(n)
	// The legacy protocol has no pending state for announced tools.
	tc.Status = "in_progress"
	outs := []translate.Out{t.update(tc)}
	return append(outs, answerAgent(id, struct {
		ID uint64 `json:"id"`
	}{n})...), nil
}

// confirmation is a legacy ToolCallConfirmation (tagged by type).
type confirmation struct {
	Type            string  `json:"type"`
	Description     *string `json:"description"`
	Command         string  `json:"command"`
	RootCommand     string  `json:"rootCommand"`
	ServerName      string  `json:"serverName"`
	ToolName        string  `json:"toolName"`
	ToolDisplayName string  `json:"toolDisplayName"`
}

type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// permissionOptions builds the ACP options for a confirmation; each optionId
// is the legacy outcome it stands for (docs/agent-protocols.md#acp-v0-mapping).
func permissionOptions(c confirmation) []permissionOption {
	allow := permissionOption{"allow", "Allow", "allow_once"}
	reject := permissionOption{"reject", "Reject", "reject_once"}
	if c.Type == "mcp" {
		tool := "Always allow this tool"
		if name := firstNonEmpty(c.ToolDisplayName, c.ToolName); name != "" {
			tool = fmt.Sprintf("Always allow tool %q", name)
			if c.ServerName != "" {
				tool += fmt.Sprintf(" from server %q", c.ServerName)
			}
		}
		server := "Always allow every tool of this server"
		if c.ServerName != "" {
			server = fmt.Sprintf("Always allow every tool of server %q", c.ServerName)
		}
		return []permissionOption{
			allow,
			{"alwaysAllowTool", tool, "allow_always"},
			{"alwaysAllowMcpServer", server, "allow_always"},
			reject,
		}
	}
	always := "Always allow"
	if c.Type == "execute" && c.RootCommand != "" {
		always = fmt.Sprintf("Always allow %q", c.RootCommand)
	}
	return []permissionOption{allow, {"alwaysAllow", always, "allow_always"}, reject}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func (t *translator) confirmToolCall(id, params json.RawMessage) ([]translate.Out, *translate.Error) {
	p, tc, err := t.toolCall(mConfirmTool, params)
	if err != nil {
		return nil, err
	}
	var c confirmation
	if len(p.Confirmation) == 0 || string(p.Confirmation) == "null" {
		return nil, translate.Errorf(translate.CodeInvalidParams, "%s needs a confirmation", mConfirmTool)
	}
	if e := json.Unmarshal(p.Confirmation, &c); e != nil {
		return nil, translate.Errorf(translate.CodeInvalidParams, "%s confirmation: %s", mConfirmTool, describeJSONError(e))
	}
	if c.Type == "" {
		return nil, translate.Errorf(translate.CodeInvalidParams, "%s confirmation has no type", mConfirmTool)
	}
	tc.Kind = toolKind(p.Icon, c.Type)
	if c.Type == "execute" && c.Command != "" && !strings.Contains(*tc.Title, c.Command) {
		// The editor must show what will run (docs/agent-protocols.md#acp-v0-mapping).
		title := c.Command
		if *tc.Title != "" {
			title = *tc.Title + ": " + c.Command
		}
		tc.Title = &title
	}
	if tc.Content == nil && c.Description != nil && *c.Description != "" {
		// Without content, the description is what the user approves
		// (an "other" confirmation has nothing else).
		tc.Content = marshal([]struct {
			Type    string      `json:"type"`
			Content textContent `json:"content"`
		}{{"content", textContent{"text", *c.Description}}})
	}
	// The confirmation, as the agent sent it, is the tool's input.
	var raw bytes.Buffer
	if json.Compact(&raw, p.Confirmation) == nil {
		tc.RawInput = raw.Bytes()
	}
	n := t.allocTool()
	tc.ToolCallID = toolCallID(n)

	if t.turn == nil || t.turn.cancelRequested {
		// Asked after the turn was cancelled (or forgotten): refuse at once
		// rather than prompt the user for a turn that is ending.
		tc.Status = "failed"
		outs := []translate.Out{t.update(tc)}
		return append(outs, answerAgent(id, confirmationResult{n, "cancel"})...), nil
	}
	tc.Status = "pending"
	options := permissionOptions(c)
	offered := make([]string, len(options))
	for i, o := range options {
		offered[i] = o.OptionID
	}
	request := tc
	request.SessionUpdate = ""
	outs := []translate.Out{t.update(tc)}
	outs = append(outs, t.callEditor(&editorCall{
		kind:    callPermission,
		agentID: cloneID(id),
		toolID:  n,
		offered: offered,
	}, "session/request_permission", struct {
		SessionID string             `json:"sessionId"`
		ToolCall  toolCall           `json:"toolCall"`
		Options   []permissionOption `json:"options"`
	}{t.session, request, options}))
	return outs, nil
}

// legacyStatuses maps legacy ToolCallStatus to ACP
// (docs/agent-protocols.md#acp-v0-mapping).
var legacyStatuses = map[string]string{
	"running":  "in_progress",
	"finished": "completed",
	"error":    "failed",
}

func (t *translator) updateToolCall(id, params json.RawMessage) ([]translate.Out, *translate.Error) {
	var p struct {
		ToolCallID *uint64         `json:"toolCallId"`
		Status     *string         `json:"status"`
		Content    json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, badParams(mUpdateToolCall, err)
	}
	if p.ToolCallID == nil || p.Status == nil {
		return nil, translate.Errorf(translate.CodeInvalidParams, "%s needs toolCallId and status", mUpdateToolCall)
	}
	status, ok := legacyStatuses[*p.Status]
	if !ok {
		return nil, translate.Errorf(translate.CodeInvalidParams, "%s: unknown status %q", mUpdateToolCall, *p.Status)
	}
	content, absent, err := t.toolContent(p.Content)
	if err != nil {
		return nil, err
	}
	if !t.tools[*p.ToolCallID] {
		// The editor never saw this tool call; an update for it would be
		// rejected or misattributed. The agent still gets its answer.
		return append([]translate.Out{}, answerAgent(id, nil)...), translate.Errorf(translate.CodeInvalidParams, "%s for tool call %d, which was never allocated; not forwarded", mUpdateToolCall, *p.ToolCallID)
	}
	u := toolCall{SessionUpdate: "tool_call_update", ToolCallID: toolCallID(*p.ToolCallID), Status: status, Content: content}
	if absent && p.Content != nil {
		// content: null replaces what was shown with nothing.
		u.Content = json.RawMessage("[]")
	}
	outs := []translate.Out{t.update(u)}
	return append(outs, answerAgent(id, nil)...), nil
}

func (t *translator) updatePlan(id, params json.RawMessage) ([]translate.Out, *translate.Error) {
	var p struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, badParams(mUpdatePlan, err)
	}
	if p.Entries == nil {
		return nil, translate.Errorf(translate.CodeInvalidParams, "%s needs entries", mUpdatePlan)
	}
	// PlanEntry has the same shape on both sides (schema: PlanEntry).
	outs := []translate.Out{t.update(struct {
		SessionUpdate string            `json:"sessionUpdate"`
		Entries       []json.RawMessage `json:"entries"`
	}{"plan", p.Entries})}
	return append(outs, answerAgent(id, nil)...), nil
}

func (t *translator) readTextFile(id, params json.RawMessage) ([]translate.Out, *translate.Error) {
	var p struct {
		Path  *string `json:"path"`
		Line  *uint32 `json:"line"`
		Limit *uint32 `json:"limit"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, badParams(mReadTextFile, err)
	}
	if p.Path == nil {
		return nil, translate.Errorf(translate.CodeInvalidParams, "%s needs a path", mReadTextFile)
	}
	// The engine serves the call from disk when the editor lacks the fs
	// capability; either way the result comes back as a Response.
	return []translate.Out{t.callEditor(&editorCall{kind: callRead, agentID: cloneID(id)}, "fs/read_text_file", struct {
		SessionID string  `json:"sessionId"`
		Path      string  `json:"path"`
		Line      *uint32 `json:"line,omitempty"`
		Limit     *uint32 `json:"limit,omitempty"`
	}{t.session, t.absPath(*p.Path), p.Line, p.Limit})}, nil
}

func (t *translator) writeTextFile(id, params json.RawMessage) ([]translate.Out, *translate.Error) {
	var p struct {
		Path    *string `json:"path"`
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, badParams(mWriteTextFile, err)
	}
	if p.Path == nil || p.Content == nil {
		return nil, translate.Errorf(translate.CodeInvalidParams, "%s needs path and content", mWriteTextFile)
	}
	return []translate.Out{t.callEditor(&editorCall{kind: callWrite, agentID: cloneID(id)}, "fs/write_text_file", struct {
		SessionID string `json:"sessionId"`
		Path      string `json:"path"`
		Content   string `json:"content"`
	}{t.session, t.absPath(*p.Path), *p.Content})}, nil
}

// cloneID copies a borrowed raw id for keeping.
func cloneID(id json.RawMessage) json.RawMessage {
	if id == nil {
		return nil
	}
	return append(json.RawMessage(nil), id...)
}
