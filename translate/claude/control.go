// Claude Code's control protocol from the agent's side: answers to the
// translator's control requests, and the CLI's own requests
// (can_use_tool, cancels of them).

package claude

import (
	"encoding/json"
	"fmt"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// controlResponse handles the CLI's answer to one of the translator's
// control requests.
func (t *translator) controlResponse(msg gjson.Result) ([]translate.Out, error) {
	resp := msg.Get("response")
	id := resp.Get("request_id").Str
	c, ok := t.ctl[id]
	if !ok {
		return nil, fmt.Errorf("claude: the CLI answered control request %s, which claude has not sent or no longer waits for", resp.Get("request_id").Raw)
	}
	delete(t.ctl, id)
	if resp.Get("subtype").Str == "success" {
		return t.controlAnswered(c, compactJSON([]byte(resp.Get("response").Raw)), ""), nil
	}
	why := resp.Get("error").Str
	if why == "" {
		why = "the CLI answered with an error and gave no reason"
	}
	return t.controlAnswered(c, nil, why), nil
}

// cliControlRequest handles a control request of the CLI: can_use_tool
// becomes a permission request; every other subtype (hook_callback,
// mcp_message: the bridge registers no hooks and hosts no MCP server) is
// refused at once so that the CLI does not wait.
func (t *translator) cliControlRequest(msg gjson.Result) ([]translate.Out, error) {
	rid := msg.Get("request_id")
	if rid.Type != gjson.String || rid.Str == "" {
		return nil, fmt.Errorf("claude: control request without a request_id string cannot be answered: %.200s", msg.Raw)
	}
	req := msg.Get("request")
	subtype := req.Get("subtype").Str
	if subtype != "can_use_tool" {
		return []translate.Out{
			controlError(rid.Str, "acp-bridge does not handle control request "+quoteSubtype(subtype)),
			t.note("CLI control request " + quoteSubtype(subtype) + " refused"),
		}, nil
	}
	return t.canUseTool(rid.Str, req), nil
}

func quoteSubtype(s string) string {
	if s == "" {
		return "without a subtype"
	}
	return fmt.Sprintf("%q", s)
}

// canUseTool asks the editor for permission
// (docs/agent-protocols.md#claude-stream-json-captured-run and
// #claude-stream-json-mapping). Each request gets its own Call, whatever else
// is pending, so several subagents asking at once never block each other or
// the session.
func (t *translator) canUseTool(requestID string, req gjson.Result) []translate.Out {
	if t.session == "" || t.closed || t.turn == nil || t.turn.cancelled || t.staleTurns > 0 {
		return []translate.Out{controlSuccess(requestID, deny("No prompt is running: the turn was cancelled or has ended", true))}
	}
	name := req.Get("tool_name").Str
	input := compactJSON([]byte(req.Get("input").Raw))
	if input == nil {
		input = json.RawMessage("{}")
	}
	toolID := req.Get("tool_use_id").Str
	if toolID == "" {
		toolID = "permission-" + requestID
	}
	var outs []translate.Out
	if tl := t.tools[toolID]; tl == nil || !tl.announced {
		// The editor must see the tool call it is asked about.
		outs = append(outs, t.announce(toolID, name, input))
	}
	v := t.viewTool(name, input)
	p := &permission{requestID: requestID, toolID: toolID, toolName: name, input: input, exitPlan: name == "ExitPlanMode"}
	options := permissionOptions
	if p.exitPlan {
		options = t.exitPlanChoices()
		p.bypass = options[0] == exitPlanBypass
	}
	if s := req.Get("permission_suggestions"); s.IsArray() {
		p.suggestions = compactJSON([]byte(s.Raw))
	}
	return append(outs, t.perms.Call(t.session, "session/request_permission", marshal(struct {
		Options   []permissionOption `json:"options"`
		SessionID string             `json:"sessionId"`
		ToolCall  toolCall           `json:"toolCall"`
	}{options, t.session, toolCall{ToolCallID: toolID, Title: &v.title, Kind: v.kind, Content: v.content, Locations: v.locations, RawInput: input}}), p))
}

// controlCancel handles the CLI withdrawing one of its control requests: a
// pending permission request is withdrawn from the editor as well. The CLI
// no longer waits, so it gets no answer.
func (t *translator) controlCancel(msg gjson.Result) []translate.Out {
	id := msg.Get("request_id").Str
	return t.perms.Withdraw(func(p *permission) bool { return p.requestID == id }, nil)
}
