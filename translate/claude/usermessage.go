// User messages the CLI writes: tool results and what the PostToolUse
// hook shows of them, and the CLI's echo of a queued prompt.

package claude

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// userMessage handles a user message the CLI wrote: tool results become
// tool_call_updates; its own notes ("[Request interrupted by user]") are
// not shown.
func (t *translator) userMessage(msg gjson.Result) []translate.Out {
	var outs []translate.Out
	for _, block := range msg.Get("message.content").Array() {
		if block.Get("type").Str != "tool_result" {
			continue
		}
		id := block.Get("tool_use_id").Str
		tl := t.tools[id]
		if tl == nil {
			outs = append(outs, t.note("tool result for tool use "+fmt.Sprintf("%q", id)+", which was never announced"))
			continue
		}
		delete(t.tools, id)
		if tl.name == "EnterPlanMode" && !block.Get("is_error").Bool() {
			// claude-agent-acp's PostToolUse hook: the CLI is planning now.
			t.mode = "plan"
			outs = append(outs, t.modeUpdate(), t.configUpdate())
		}
		if tl.plan || !tl.announced {
			continue
		}
		failed := block.Get("is_error").Bool()
		status := "completed"
		if failed {
			status = "failed"
		} else {
			outs = append(outs, t.postToolUse(id, tl, msg.Get("tool_use_result"))...)
		}
		content := block.Get("content")
		raw := compactJSON([]byte(content.Raw))
		if raw == nil {
			raw = json.RawMessage(`""`)
		}
		u := toolCall{
			Meta:          toolMeta(tl.name, tl.parent),
			SessionUpdate: "tool_call_update",
			ToolCallID:    id,
			Status:        status,
			RawOutput:     raw,
		}
		var title string
		u.Content, title = resultView(tl.name, content, failed)
		if title != "" {
			u.Title = &title
		}
		outs = append(outs, t.update(u))
	}
	return outs
}

// postToolUse shows what claude-agent-acp's PostToolUse hook shows once a
// tool succeeded, before its result: a tool_call_update carrying the tool's
// own response (the user message's tool_use_result, which is the hook's
// tool_response) in _meta.claudeCode.toolResponse, and for Edit the diff
// and locations of the patch the CLI applied.
func (t *translator) postToolUse(id string, tl *tool, response gjson.Result) []translate.Out {
	if !response.Exists() {
		return nil
	}
	raw := compactJSON([]byte(response.Raw))
	if raw == nil {
		return nil
	}
	meta := map[string]any{"toolResponse": raw, "toolName": tl.name}
	if tl.parent != "" {
		meta["parentToolUseId"] = tl.parent
	}
	u := toolCall{
		Meta:          marshal(map[string]any{"claudeCode": meta}),
		SessionUpdate: "tool_call_update",
		ToolCallID:    id,
	}
	if tl.name == "Edit" {
		u.Content, u.Locations = patchView(response)
	}
	return []translate.Out{t.update(u)}
}

// patchView is the diff of an Edit's response, hunk by hunk, as
// claude-agent-acp shows it: each hunk of structuredPatch is one diff
// (context lines on both sides) located at the hunk's first new line.
func patchView(response gjson.Result) ([]toolContent, []location) {
	path := response.Get("filePath").Str
	patch := response.Get("structuredPatch")
	if path == "" || !patch.IsArray() {
		return nil, nil
	}
	var content []toolContent
	var locations []location
	for _, hunk := range patch.Array() {
		var oldLines, newLines []string
		for _, l := range hunk.Get("lines").Array() {
			line := l.String()
			text := ""
			if line != "" {
				text = line[1:]
			}
			switch {
			case strings.HasPrefix(line, "-"):
				oldLines = append(oldLines, text)
			case strings.HasPrefix(line, "+"):
				newLines = append(newLines, text)
			default:
				oldLines = append(oldLines, text)
				newLines = append(newLines, text)
			}
		}
		if len(oldLines) == 0 && len(newLines) == 0 {
			continue
		}
		start := hunk.Get("newStart").Int()
		locations = append(locations, location{Path: path, Line: &start})
		var oldText *string
		if s := strings.Join(oldLines, "\n"); s != "" {
			oldText = &s
		}
		content = append(content, diffItem(path, oldText, strings.Join(newLines, "\n")))
	}
	return content, locations
}

// echo handles the CLI's echo of a queued prompt (--replay-user-messages),
// which says the CLI took it, as claude-agent-acp reads it: the running
// prompt is answered end_turn (with the usage of the results it saw, none)
// and what follows is the queued prompt's turn. The echo of a prompt
// answered "cancelled" while queued starts a turn nobody waits for: it is
// interrupted and its output dropped. It reports false for other user
// messages.
func (t *translator) echo(msg gjson.Result) ([]translate.Out, bool) {
	id := msg.Get("uuid").Str
	if id == "" {
		return nil, false
	}
	if t.dropped[id] {
		delete(t.dropped, id)
		if t.turn != nil {
			// Taken into the running turn, which is being cancelled.
			return nil, true
		}
		t.staleTurns++
		return []translate.Out{t.controlRequest(&ctlRequest{kind: ctlInterrupt}, struct {
			Subtype string `json:"subtype"`
		}{"interrupt"})}, true
	}
	i := slices.IndexFunc(t.queue, func(q *turn) bool { return q.uuid == id })
	if i < 0 {
		return nil, false
	}
	next := t.queue[i]
	if next.cancelled {
		// Taken into the running turn, which is being cancelled: the
		// prompt is answered after it (see result).
		return nil, true
	}
	t.queue = slices.Delete(t.queue, i, i+1)
	var outs []translate.Out
	if tr := t.turn; tr != nil && !tr.abandoned && t.staleTurns == 0 {
		outs = append(outs, reply(tr.ref, stopReason{StopReason: "end_turn", Usage: &usage{}}))
	}
	t.turn = next
	return outs, true
}
