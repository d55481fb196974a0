package claude

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
)

// loginMethodID is the one auth method: logging in happens in the CLI, out
// of band (docs/agent-protocols.md#claude-stream-json-mapping).
const loginMethodID = "claude-login"

// FromEditor implements translate.Translator.
func (t *translator) FromEditor(m translate.Msg) ([]translate.Out, error) {
	switch m.Kind {
	case translate.Request:
		return t.editorRequest(m), nil
	case translate.Notification:
		if m.Method == "session/cancel" {
			var p struct {
				SessionID string `json:"sessionId"`
			}
			if json.Unmarshal(m.Body, &p) == nil && p.SessionID != "" && p.SessionID == t.session {
				return t.cancelTurn(), nil
			}
		}
		// Unknown notifications, and cancels for other sessions, are
		// ignored (receivers may ignore notifications they do not know).
		return nil, nil
	case translate.Response:
		return t.editorResponse(m)
	case translate.CancelRequest:
		// The CLI cancels only the whole turn.
		if t.turn != nil && t.turn.ref == m.Ref {
			return t.cancelTurn(), nil
		}
		if i := slices.IndexFunc(t.queue, func(q *turn) bool { return q.ref == m.Ref }); i >= 0 {
			q := t.queue[i]
			t.queue = slices.Delete(t.queue, i, i+1)
			t.dropped[q.uuid] = true
			return []translate.Out{reply(q.ref, stopReason{StopReason: "cancelled"})}, nil
		}
		return nil, nil
	case translate.Abandon:
		return t.abandon(m.Ref), nil
	case translate.LinkUp, translate.Tick:
		return nil, nil
	case translate.LinkDown:
		// The engine has answered what was pending and withdrawn the
		// editor's calls; this translator's process is gone.
		t.turn = nil
		t.staleTurns = 0
		t.queue = nil
		t.perms.Clear()
		clear(t.ctl)
		t.closed = true
		return nil, nil
	}
	return nil, fmt.Errorf("claude: unexpected editor input kind %d", m.Kind)
}

func (t *translator) editorRequest(m translate.Msg) []translate.Out {
	switch m.Method {
	case "initialize":
		return []translate.Out{reply(m.Ref, initializeResult())}
	case "authenticate":
		return t.authenticate(m)
	case "session/new", "session/load", "session/resume":
		return t.openSession(m)
	case "session/prompt":
		return t.prompt(m)
	case "session/set_mode":
		return t.setMode(m)
	case "session/set_config_option":
		return t.setConfigOption(m)
	case "session/set_model":
		return t.setModel(m)
	case "session/close":
		return t.closeSession(m)
	}
	return []translate.Out{failf(m.Ref, translate.CodeMethodNotFound,
		"%s is not available: Claude Code's stream-json protocol (dialect claude-stream-json) has no equivalent", m.Method)}
}

type authMethod struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

// initializeResult is the bridge's own initialize answer (no CLI is needed for
// it): what the reference adapter advertises that this dialect can deliver
// (docs/agent-protocols.md#claude-stream-json-mapping). The engine puts the
// bridge's agentInfo in front and keeps this one under _meta.
func initializeResult() any {
	type promptCapabilities struct {
		Image           bool `json:"image"`
		Audio           bool `json:"audio"`
		EmbeddedContext bool `json:"embeddedContext"`
	}
	type mcpCapabilities struct {
		HTTP bool `json:"http"`
		SSE  bool `json:"sse"`
	}
	type sessionCapabilities struct {
		// Presence objects (ACP spec, Initialization: capabilities): {}
		// means supported.
		Resume struct{} `json:"resume"`
		Close  struct{} `json:"close"`
	}
	type agentCapabilities struct {
		// _meta.claudeCode.promptQueueing says, as claude-agent-acp says
		// it, that a prompt sent while a turn runs is queued (see prompt).
		Meta json.RawMessage `json:"_meta"`
		// --resume restores a session (history replay waits for the
		// bridge's transcripts; see the package comment).
		LoadSession         bool                `json:"loadSession"`
		PromptCapabilities  promptCapabilities  `json:"promptCapabilities"`
		MCPCapabilities     mcpCapabilities     `json:"mcpCapabilities"`
		SessionCapabilities sessionCapabilities `json:"sessionCapabilities"`
	}
	type implementation struct {
		Name  string `json:"name"`
		Title string `json:"title"`
	}
	return struct {
		ProtocolVersion   int               `json:"protocolVersion"`
		AgentCapabilities agentCapabilities `json:"agentCapabilities"`
		AgentInfo         implementation    `json:"agentInfo"`
		AuthMethods       []authMethod      `json:"authMethods"`
	}{
		ProtocolVersion: 1,
		AgentCapabilities: agentCapabilities{
			Meta:               json.RawMessage(`{"claudeCode":{"promptQueueing":true}}`),
			LoadSession:        true,
			PromptCapabilities: promptCapabilities{Image: true, EmbeddedContext: true},
			MCPCapabilities:    mcpCapabilities{HTTP: true, SSE: true},
		},
		AgentInfo: implementation{Name: "claude-code", Title: "Claude Code"},
		AuthMethods: []authMethod{{
			ID:          loginMethodID,
			Name:        "Log in with Claude Code",
			Description: "Run `claude /login` in the terminal",
		}},
	}
}

// authenticate cannot log in itself: Claude Code's login is interactive and
// happens in the CLI. The answer says what to do.
func (t *translator) authenticate(m translate.Msg) []translate.Out {
	var p struct {
		MethodID string `json:"methodId"`
	}
	_ = json.Unmarshal(m.Body, &p)
	if p.MethodID != loginMethodID {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown auth method %q: the only one is %q", p.MethodID, loginMethodID)}
	}
	// Not -32000: that would send the editor back to this same method.
	return []translate.Out{failf(m.Ref, translate.CodeInternalError,
		"acp-bridge cannot log in to Claude Code for you: run `claude /login` in a terminal, then start a new session")}
}

// openSession binds the translator to its session and sends the CLI the
// control initialize; the request is answered when the CLI acknowledges it.
// The CLI itself was started by the engine with the command line BuildSpawn
// made from the same request.
func (t *translator) openSession(m translate.Msg) []translate.Out {
	var p sessionParams
	if err := json.Unmarshal(m.Body, &p); err != nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "%s params are not an object of the expected shape: %v", m.Method, err)}
	}
	if p.Cwd == nil || !filepath.IsAbs(*p.Cwd) {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "%s needs an absolute cwd", m.Method)}
	}
	session := m.Session
	if session == "" {
		session = p.SessionID
	}
	switch {
	case session == "":
		return []translate.Out{failf(m.Ref, translate.CodeInternalError, "%s reached the claude translator without a session id from the engine", m.Method)}
	case m.Method != "session/new" && session == t.session && t.open == openDone && !t.closed:
		// The session is open here already: its CLI goes on as it is.
		return t.answerOpen(m.Ref, m.Method)
	case m.Method != "session/new" && session == t.session && t.open == openPending:
		// Answered with the request that is starting it. (Failing it
		// would make the engine close the session's link.)
		t.reopens = append(t.reopens, reopen{m.Ref, m.Method})
		return nil
	case t.open != openNone:
		return []translate.Out{failf(m.Ref, translate.CodeInternalError, "a Claude Code process holds one session; this one already serves %s (the engine must start a process per session)", t.session)}
	}
	t.session = session
	t.cwd = filepath.Clean(*p.Cwd)
	t.open = openPending
	t.openRef = m.Ref
	t.openKind = m.Method
	return []translate.Out{t.controlRequest(&ctlRequest{kind: ctlInitialize}, struct {
		Subtype string          `json:"subtype"`
		Hooks   json.RawMessage `json:"hooks"`
	}{"initialize", json.RawMessage("null")})}
}

// opened answers the request that opened the session once the CLI answered
// the control initialize (response is its result, or errText its error).
func (t *translator) opened(response json.RawMessage, errText string) []translate.Out {
	if t.open != openPending {
		return nil
	}
	ref := t.openRef
	t.openRef = 0
	if errText != "" {
		t.open = openFailed
		t.openErr = translate.Errorf(translate.CodeInternalError, "Claude Code refused to start the session: %s", errText).JSON()
		var outs []translate.Out
		if ref != 0 {
			outs = append(outs, fail(ref, t.openErr))
		}
		for _, r := range t.reopens {
			outs = append(outs, fail(r.ref, t.openErr))
		}
		t.reopens = nil
		return outs
	}
	t.open = openDone
	var r struct {
		Commands []json.RawMessage `json:"commands"`
		Models   []modelInfo       `json:"models"`
	}
	_ = json.Unmarshal(response, &r)
	var models []modelInfo
	for _, mi := range r.Models {
		if mi.Value != "" {
			if mi.Name == "" {
				mi.Name = mi.Value
			}
			models = append(models, mi)
		}
	}
	if len(models) > 0 {
		t.models = models
		if t.opts.Model == "" {
			// No model configured: the CLI's first model is the current
			// one, as claude-agent-acp shows it.
			t.model = models[0].Value
		}
		t.ensureModel()
	}
	var outs []translate.Out
	if ref != 0 {
		outs = t.answerOpen(ref, t.openKind)
	}
	for _, r := range t.reopens {
		outs = append(outs, t.answerOpen(r.ref, r.method)...)
	}
	t.reopens = nil
	if cmds := availableCommands(r.Commands); len(cmds) > 0 {
		outs = append(outs, t.update(struct {
			SessionUpdate     string             `json:"sessionUpdate"`
			AvailableCommands []availableCommand `json:"availableCommands"`
		}{"available_commands_update", cmds}))
	}
	return outs
}

// answerOpen answers the request that opened (or reopened) the session.
func (t *translator) answerOpen(ref translate.Ref, method string) []translate.Out {
	result := t.sessionState()
	switch method {
	case "session/new":
		return []translate.Out{reply(ref, struct {
			SessionID string `json:"sessionId"`
			sessionState
		}{t.session, result})}
	case "session/load":
		// The history lives in the CLI's own files, which a pure
		// translator cannot read; the session still continues.
		return []translate.Out{
			{Kind: translate.Note, Method: noteNoReplay, Session: t.session,
				Body: json.RawMessage("session " + t.session + " was resumed without replaying its history to the editor")},
			reply(ref, result),
		}
	}
	return []translate.Out{reply(ref, result)}
}

type availableCommand struct {
	Name        string        `json:"name"`
	Description string        `json:"description"`
	Input       *commandInput `json:"input,omitempty"`
}

type commandInput struct {
	Hint string `json:"hint"`
}

// unsupportedCommands are the CLI's slash commands that do nothing useful
// without its terminal UI; claude-agent-acp does not offer them either.
var unsupportedCommands = []string{"cost", "keybindings-help", "login", "logout", "output-style:new", "release-notes", "todos"}

// availableCommands converts the CLI's slash commands ({name, description,
// argumentHint}, the hint a string or, from Claude Code 2.1, a list of
// words) to ACP's (schema: AvailableCommand), as claude-agent-acp does: MCP
// prompts, "server:prompt (MCP)" to the CLI, are offered as
// "mcp:server:prompt", and the unsupported commands are left out.
func availableCommands(raw []json.RawMessage) []availableCommand {
	var out []availableCommand
	for _, c := range raw {
		var cmd struct {
			Name         string          `json:"name"`
			Description  string          `json:"description"`
			ArgumentHint json.RawMessage `json:"argumentHint"`
		}
		if json.Unmarshal(c, &cmd) != nil || cmd.Name == "" || slices.Contains(unsupportedCommands, cmd.Name) {
			continue
		}
		if name, ok := strings.CutSuffix(cmd.Name, " (MCP)"); ok {
			cmd.Name = "mcp:" + name
		}
		ac := availableCommand{Name: cmd.Name, Description: cmd.Description}
		var hint string
		var words []string
		switch {
		case json.Unmarshal(cmd.ArgumentHint, &hint) == nil:
		case json.Unmarshal(cmd.ArgumentHint, &words) == nil:
			hint = strings.Join(words, " ")
		}
		if hint != "" {
			ac.Input = &commandInput{hint}
		}
		out = append(out, ac)
	}
	return out
}

// sessionState is the modes, models and config options of a session/new,
// load or resume answer. models is the unstable SessionModelState that
// claude-agent-acp sends and editors that predate config options read.
type sessionState struct {
	Modes         modeState      `json:"modes"`
	Models        modelState     `json:"models"`
	ConfigOptions []configOption `json:"configOptions"`
}

type modelState struct {
	CurrentModelID  string     `json:"currentModelId"`
	AvailableModels []acpModel `json:"availableModels"`
}

type acpModel struct {
	ModelID     string `json:"modelId"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

type modeState struct {
	CurrentModeID  string        `json:"currentModeId"`
	AvailableModes []sessionMode `json:"availableModes"`
}

type sessionMode struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

type configOption struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	Category     string         `json:"category"`
	Type         string         `json:"type"`
	CurrentValue string         `json:"currentValue"`
	Options      []configChoice `json:"options"`
}

type configChoice struct {
	Value       string `json:"value"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

func (t *translator) sessionState() sessionState {
	return sessionState{Modes: t.modeState(), Models: t.modelState(), ConfigOptions: t.configOptions()}
}

func (t *translator) modelState() modelState {
	s := modelState{CurrentModelID: t.model}
	for _, mi := range t.models {
		s.AvailableModels = append(s.AvailableModels, acpModel{mi.Value, mi.Name, mi.Description})
	}
	return s
}

func (t *translator) modeState() modeState {
	s := modeState{CurrentModeID: t.mode}
	for _, m := range modes {
		s.AvailableModes = append(s.AvailableModes, sessionMode{m.id, m.name, m.description})
	}
	return s
}

// configOptions are the session's options: the permission mode, kept in
// sync with modes as ACP spec, Session Config Options asks, and the model.
func (t *translator) configOptions() []configOption {
	mode := configOption{ID: "mode", Name: "Mode", Description: "Session permission mode", Category: "mode", Type: "select", CurrentValue: t.mode}
	for _, m := range modes {
		mode.Options = append(mode.Options, configChoice{m.id, m.name, m.description})
	}
	model := configOption{ID: "model", Name: "Model", Description: "AI model to use", Category: "model", Type: "select", CurrentValue: t.model}
	for _, mi := range t.models {
		model.Options = append(model.Options, configChoice(mi))
	}
	return []configOption{mode, model}
}

// checkSession returns a Fail when sessionID is not this translator's open
// session.
func (t *translator) checkSession(ref translate.Ref, sessionID string) []translate.Out {
	if sessionID == "" || sessionID != t.session || t.closed {
		return []translate.Out{failf(ref, translate.CodeInvalidParams, "unknown session %q", sessionID)}
	}
	if t.open == openFailed {
		return []translate.Out{fail(ref, t.openErr)}
	}
	return nil
}

func (t *translator) prompt(m translate.Msg) []translate.Out {
	var p struct {
		SessionID string            `json:"sessionId"`
		Prompt    []json.RawMessage `json:"prompt"`
	}
	if err := json.Unmarshal(m.Body, &p); err != nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/prompt params are not of the expected shape: %v", err)}
	}
	if outs := t.checkSession(m.Ref, p.SessionID); outs != nil {
		return outs
	}
	blocks, err := promptBlocks(p.Prompt)
	if err != nil {
		return []translate.Out{fail(m.Ref, err.JSON())}
	}
	if len(blocks) == 0 {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/prompt needs at least one content block")}
	}
	t.prompts++
	tr := &turn{ref: m.Ref, local: localCommand(blocks), uuid: SessionUUID(fmt.Sprintf("%s/prompt/%d", t.session, t.prompts))}
	switch {
	case t.turn != nil && !t.turn.abandoned:
		// Queued, as claude-agent-acp queues it: the CLI takes the
		// message when it can, and its echo says when (see echo).
		t.queue = append(t.queue, tr)
	case t.turn != nil:
		// The engine answered the running turn itself (abandoned); the
		// CLI ends it, interrupted, before it takes this message.
		t.staleTurns++
		t.turn = tr
	default:
		t.turn = tr
	}
	type message struct {
		Role    string           `json:"role"`
		Content []anthropicBlock `json:"content"`
	}
	// session_id "default" is what the SDKs send
	// (docs/agent-protocols.md#claude-stream-json-messages);
	// the CLI keeps the session it was started with.
	return []translate.Out{frame(struct {
		Type            string          `json:"type"`
		Message         message         `json:"message"`
		ParentToolUseID json.RawMessage `json:"parent_tool_use_id"`
		SessionID       string          `json:"session_id"`
		UUID            string          `json:"uuid"`
	}{"user", message{"user", blocks}, json.RawMessage("null"), "default", tr.uuid})}
}

// dropQueued answers the queued prompts that were cancelled (all of them
// when all is true) "cancelled", as claude-agent-acp answers them on
// session/cancel, and remembers them so that a turn the CLI starts for one
// of them is stopped.
func (t *translator) dropQueued(all bool) []translate.Out {
	var outs []translate.Out
	t.queue = slices.DeleteFunc(t.queue, func(q *turn) bool {
		if !all && !q.cancelled {
			return false
		}
		t.dropped[q.uuid] = true
		if !q.abandoned {
			outs = append(outs, reply(q.ref, stopReason{StopReason: "cancelled"}))
		}
		return true
	})
	return outs
}

// cancelTurn interrupts the running turn: a control interrupt to the CLI
// (once per turn), and every pending permission withdrawn from the editor
// and denied toward the CLI, so that neither waits for the other
// (agentclientprotocol/claude-agent-acp #830, #851: permission deadlocks
// with several requests pending). The turn's result answers the prompt "cancelled".
func (t *translator) cancelTurn() []translate.Out {
	if t.turn == nil || t.closed {
		return nil
	}
	// The queued prompts are answered "cancelled" after the running one
	// (see result), so that the editor never sees a later prompt end
	// first.
	for _, q := range t.queue {
		q.cancelled = true
	}
	var outs []translate.Out
	if !t.turn.cancelled {
		t.turn.cancelled = true
		outs = append(outs, t.controlRequest(&ctlRequest{kind: ctlInterrupt}, struct {
			Subtype string `json:"subtype"`
		}{"interrupt"}))
	}
	return append(outs, t.withdrawPermissions("The user cancelled the turn", true)...)
}

// withdrawPermissions withdraws every outstanding permission request, in
// Ref order: $/cancel_request to the editor and a deny to the CLI.
func (t *translator) withdrawPermissions(why string, interrupt bool) []translate.Out {
	return t.perms.Withdraw(nil, func(p *permission) []translate.Out {
		return []translate.Out{controlSuccess(p.requestID, deny(why, interrupt))}
	})
}

// abandon forgets an editor request the engine answered itself.
func (t *translator) abandon(ref translate.Ref) []translate.Out {
	if t.turn != nil && t.turn.ref == ref {
		// The engine answered the prompt (cancel grace or shutdown): stop
		// the CLI's turn too, and take the result, when it comes, as the
		// end of a turn nobody waits for.
		outs := t.cancelTurn()
		t.turn.abandoned = true
		return outs
	}
	if i := slices.IndexFunc(t.queue, func(q *turn) bool { return q.ref == ref }); i >= 0 {
		t.dropped[t.queue[i].uuid] = true
		t.queue = slices.Delete(t.queue, i, i+1)
	}
	if t.openRef == ref {
		t.openRef = 0
	}
	t.reopens = slices.DeleteFunc(t.reopens, func(r reopen) bool { return r.ref == ref })
	for _, c := range t.ctl {
		if c.ref == ref {
			c.ref = 0
		}
	}
	return nil
}

func (t *translator) closeSession(m translate.Msg) []translate.Out {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(m.Body, &p)
	if p.SessionID == "" || p.SessionID != t.session || t.closed {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown session %q", p.SessionID)}
	}
	var outs []translate.Out
	if t.turn != nil {
		// Closing implies cancelling (ACP spec, session/close); the engine
		// closes the link right after, so the result would never come.
		outs = t.cancelTurn()
		if !t.turn.abandoned {
			outs = append(outs, reply(t.turn.ref, stopReason{StopReason: "cancelled"}))
		}
		outs = append(outs, t.dropQueued(true)...)
		t.turn = nil
	}
	if t.openRef != 0 {
		outs = append(outs, failf(t.openRef, translate.CodeInternalError, "the session was closed before Claude Code started"))
		t.openRef = 0
	}
	for _, r := range t.reopens {
		outs = append(outs, failf(r.ref, translate.CodeInternalError, "the session was closed before Claude Code started"))
	}
	t.reopens = nil
	ids := make([]string, 0, len(t.ctl))
	for id := range t.ctl {
		ids = append(ids, id)
	}
	// req_N in the order they were sent.
	slices.SortFunc(ids, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b)) })
	for _, id := range ids {
		if c := t.ctl[id]; c.ref != 0 {
			outs = append(outs, failf(c.ref, translate.CodeInternalError, "the session was closed before Claude Code answered"))
		}
	}
	clear(t.ctl)
	t.closed = true
	return append(outs, reply(m.Ref, struct{}{}))
}

func (t *translator) setMode(m translate.Msg) []translate.Out {
	var p struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
	}
	_ = json.Unmarshal(m.Body, &p)
	if outs := t.checkSession(m.Ref, p.SessionID); outs != nil {
		return outs
	}
	if !isMode(p.ModeID) {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown mode %q: Claude Code's modes are %s", p.ModeID, modeList())}
	}
	return []translate.Out{t.setPermissionMode(m.Ref, m.Method, p.ModeID)}
}

func (t *translator) setPermissionMode(ref translate.Ref, method, mode string) translate.Out {
	return t.controlRequest(&ctlRequest{kind: ctlSetMode, ref: ref, method: method, value: mode}, struct {
		Subtype string `json:"subtype"`
		Mode    string `json:"mode"`
	}{"set_permission_mode", mode})
}

func (t *translator) setConfigOption(m translate.Msg) []translate.Out {
	var p struct {
		SessionID string          `json:"sessionId"`
		ConfigID  string          `json:"configId"`
		Value     json.RawMessage `json:"value"`
	}
	_ = json.Unmarshal(m.Body, &p)
	if outs := t.checkSession(m.Ref, p.SessionID); outs != nil {
		return outs
	}
	var value string
	if json.Unmarshal(p.Value, &value) != nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "option %q takes a value id string, not %s", p.ConfigID, p.Value)}
	}
	switch p.ConfigID {
	case "mode":
		if !isMode(value) {
			return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown mode %q: Claude Code's modes are %s", value, modeList())}
		}
		return []translate.Out{t.setPermissionMode(m.Ref, m.Method, value)}
	case "model":
		return t.requestModel(m, value)
	}
	return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown config option %q: the options are mode and model", p.ConfigID)}
}

// setModel serves the unstable session/set_model (since removed from the
// schema in favour of a model config option) that
// 2025-era editors still send: the same as the model config option.
func (t *translator) setModel(m translate.Msg) []translate.Out {
	var p struct {
		SessionID string `json:"sessionId"`
		ModelID   string `json:"modelId"`
	}
	_ = json.Unmarshal(m.Body, &p)
	if outs := t.checkSession(m.Ref, p.SessionID); outs != nil {
		return outs
	}
	return t.requestModel(m, p.ModelID)
}

func (t *translator) requestModel(m translate.Msg, model string) []translate.Out {
	if !slices.ContainsFunc(t.models, func(mi modelInfo) bool { return mi.Value == model }) {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown model %q: choose one of the model option's values", model)}
	}
	// "default" resets the CLI to its own choice: set_model without a
	// model, as the SDKs send it.
	req := struct {
		Subtype string `json:"subtype"`
		Model   string `json:"model,omitempty"`
	}{Subtype: "set_model"}
	if model != "default" {
		req.Model = model
	}
	return []translate.Out{t.controlRequest(&ctlRequest{kind: ctlSetModel, ref: m.Ref, method: m.Method, value: model}, req)}
}

// controlAnswered handles the CLI's answer to one of the translator's
// control requests.
func (t *translator) controlAnswered(c *ctlRequest, response json.RawMessage, errText string) []translate.Out {
	switch c.kind {
	case ctlInitialize:
		return t.opened(response, errText)
	case ctlInterrupt:
		// The turn's result ends it; an error (nothing running) changes
		// nothing.
		return nil
	case ctlSetMode, ctlSetModel:
		what := "permission mode"
		if c.kind == ctlSetModel {
			what = "model"
		}
		if errText != "" {
			if c.ref == 0 {
				return nil
			}
			return []translate.Out{failf(c.ref, translate.CodeInternalError, "Claude Code did not switch the %s to %q: %s", what, c.value, errText)}
		}
		var outs []translate.Out
		if c.kind == ctlSetMode {
			t.mode = c.value
		} else {
			t.model = c.value
		}
		// Keep the other view in sync, before the answer as
		// claude-agent-acp does: modes and config options both show the
		// mode (ACP spec, Session Config Options).
		if c.kind == ctlSetMode && c.method != "session/set_mode" {
			outs = append(outs, t.modeUpdate())
		}
		if c.method != "session/set_config_option" {
			outs = append(outs, t.configUpdate())
		}
		if c.ref != 0 {
			switch c.method {
			case "session/set_config_option":
				outs = append(outs, reply(c.ref, struct {
					ConfigOptions []configOption `json:"configOptions"`
				}{t.configOptions()}))
			default:
				outs = append(outs, reply(c.ref, struct{}{}))
			}
		}
		return outs
	}
	return nil
}

func (t *translator) modeUpdate() translate.Out {
	return t.update(struct {
		SessionUpdate string `json:"sessionUpdate"`
		CurrentModeID string `json:"currentModeId"`
	}{"current_mode_update", t.mode})
}

func (t *translator) configUpdate() translate.Out {
	return t.update(struct {
		SessionUpdate string         `json:"sessionUpdate"`
		ConfigOptions []configOption `json:"configOptions"`
	}{"config_option_update", t.configOptions()})
}

type stopReason struct {
	StopReason string          `json:"stopReason"`
	Usage      *usage          `json:"usage,omitempty"`
	Meta       json.RawMessage `json:"_meta,omitempty"`
}

// deny is a can_use_tool answer refusing the tool.
func deny(message string, interrupt bool) any {
	return struct {
		Behavior  string `json:"behavior"`
		Message   string `json:"message"`
		Interrupt bool   `json:"interrupt,omitempty"`
	}{"deny", message, interrupt}
}

// Permission option ids, as the reference adapter names them
// (docs/agent-protocols.md#claude-stream-json-mapping).
const (
	optAllowAlways = "allow_always"
	optAllow       = "allow"
	optReject      = "reject"
)

type permissionOption struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	OptionID string `json:"optionId"`
}

var permissionOptions = []permissionOption{
	{"allow_always", "Always Allow", optAllowAlways},
	{"allow_once", "Allow", optAllow},
	{"reject_once", "Reject", optReject},
}

// exitPlanOptions are asked instead when the CLI wants to leave plan mode
// (ExitPlanMode): the option ids are the mode to switch to, as the
// reference adapter offers them; "plan" keeps planning.
var exitPlanOptions = []permissionOption{
	{"allow_always", "Yes, and auto-accept edits", "acceptEdits"},
	{"allow_once", "Yes, and manually approve edits", "default"},
	{"reject_once", "No, keep planning", "plan"},
}

// exitPlanBypass comes first among the ExitPlanMode options when the CLI
// can switch to bypassPermissions (see translator.bypassAllowed).
var exitPlanBypass = permissionOption{"allow_always", "Yes, and bypass permissions", "bypassPermissions"}

// bypassAllowed reports whether the CLI accepts the bypassPermissions mode:
// it was started in that mode, or with --allow-dangerously-skip-permissions
// or --dangerously-skip-permissions (extra_args), or it has switched to it.
// claude-agent-acp starts every CLI with the first of these unless it runs
// as root; this dialect leaves that to the configuration.
func (t *translator) bypassAllowed() bool {
	if t.opts.PermissionMode == "bypassPermissions" || t.mode == "bypassPermissions" {
		return true
	}
	return slices.ContainsFunc(t.opts.ExtraArgs, func(a string) bool {
		return a == "--allow-dangerously-skip-permissions" || a == "--dangerously-skip-permissions"
	})
}

// exitPlanChoices are the options of an ExitPlanMode permission request,
// as claude-agent-acp offers them.
func (t *translator) exitPlanChoices() []permissionOption {
	if t.bypassAllowed() {
		return append([]permissionOption{exitPlanBypass}, exitPlanOptions...)
	}
	return exitPlanOptions
}

// editorResponse handles the editor's answer to a permission request.
func (t *translator) editorResponse(m translate.Msg) ([]translate.Out, error) {
	p, ok, err := t.perms.Take(m.Ref)
	if !ok {
		// No error for a late answer to a permission request already
		// withdrawn: it is dropped.
		return nil, err
	}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if m.Error != nil || json.Unmarshal(m.Body, &r) != nil {
		return []translate.Out{controlSuccess(p.requestID, deny("The editor could not ask the user for permission", false))}, nil
	}
	switch r.Outcome.Outcome {
	case "selected":
		if p.exitPlan {
			return t.exitPlanAnswer(p, r.Outcome.OptionID), nil
		}
		switch r.Outcome.OptionID {
		case optAllow:
			return []translate.Out{controlSuccess(p.requestID, allow(p.input, nil))}, nil
		case optAllowAlways:
			return []translate.Out{controlSuccess(p.requestID, allow(p.input, alwaysRules(p)))}, nil
		case optReject:
			return []translate.Out{controlSuccess(p.requestID, deny("The user refused permission to use this tool", false))}, nil
		}
	case "cancelled", "canceled":
		return []translate.Out{controlSuccess(p.requestID, deny("The user cancelled the tool use", true))}, nil
	}
	return []translate.Out{controlSuccess(p.requestID, deny("The editor answered the permission request with an option that was not offered", false))}, nil
}

// exitPlanAnswer answers ExitPlanMode: leaving plan mode for the chosen
// mode (kept by the CLI for the session, and shown to the editor), or
// staying in it.
func (t *translator) exitPlanAnswer(p *permission, option string) []translate.Out {
	if option == "bypassPermissions" && !p.bypass {
		option = "" // not offered
	}
	switch option {
	case "acceptEdits", "default", "bypassPermissions":
		t.mode = option
		setMode := marshal([]any{map[string]string{"type": "setMode", "mode": option, "destination": "session"}})
		return []translate.Out{
			controlSuccess(p.requestID, allow(p.input, setMode)),
			t.modeUpdate(),
			t.configUpdate(),
		}
	case "plan":
		return []translate.Out{controlSuccess(p.requestID, deny("The user wants to keep planning", false))}
	}
	return []translate.Out{controlSuccess(p.requestID, deny("The editor answered the permission request with an option that was not offered", false))}
}

// allow is a can_use_tool answer allowing the tool with its input
// unchanged, and for "always" the permission updates to keep.
func allow(input, updatedPermissions json.RawMessage) any {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	return struct {
		Behavior           string          `json:"behavior"`
		UpdatedInput       json.RawMessage `json:"updatedInput"`
		UpdatedPermissions json.RawMessage `json:"updatedPermissions,omitempty"`
	}{"allow", input, updatedPermissions}
}

// alwaysRules are the permission updates an "always allow" keeps: the CLI's
// own suggestions when it made some, else a rule allowing the tool for the
// rest of the session.
func alwaysRules(p *permission) json.RawMessage {
	if len(p.suggestions) > 0 && string(p.suggestions) != "null" && string(p.suggestions) != "[]" {
		return p.suggestions
	}
	return marshal([]any{map[string]any{
		"type":        "addRules",
		"rules":       []any{map[string]string{"toolName": p.toolName}},
		"behavior":    "allow",
		"destination": "session",
	}})
}
