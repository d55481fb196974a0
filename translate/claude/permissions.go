// Permissions: the editor's answers to can_use_tool requests turned into
// Claude Code's allow or deny, the options offered, and leaving plan
// mode.

package claude

import (
	"encoding/json"
	"slices"

	"github.com/acp-bridge/acp-bridge/translate"
)

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
