// Sessions from the editor's side: opening one (new, load, resume) on a
// CLI process, the commands and state its answer carries, and closing
// it.

package claude

import (
	"cmp"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
)

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
