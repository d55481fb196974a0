package codexapp

import (
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// toolItems are the item types shown as tool calls.
var toolItems = map[string]bool{
	"commandExecution": true, "fileChange": true, "mcpToolCall": true,
	"webSearch": true, "dynamicToolCall": true, "imageView": true,
}

func (t *translator) itemStarted(s *session, tu *turn, item gjson.Result) []translate.Out {
	typ, id := item.Get("type").Str, item.Get("id").Str
	if !toolItems[typ] || id == "" {
		return nil
	}
	if tl := tu.tools[id]; tl != nil {
		// Announced already (an approval came first): the item's details.
		u := toolFields(item)
		u["sessionUpdate"], u["toolCallId"], u["status"] = "tool_call_update", id, "in_progress"
		return []translate.Out{update(s.id, u)}
	}
	u := toolFields(item)
	tl := &tool{kind: u["kind"].(string), title: u["title"].(string)}
	tu.tools[id], tu.order = tl, append(tu.order, id)
	u["sessionUpdate"], u["toolCallId"], u["status"] = "tool_call", id, "in_progress"
	return []translate.Out{update(s.id, u)}
}

func (t *translator) itemCompleted(s *session, tu *turn, item gjson.Result) []translate.Out {
	typ, id := item.Get("type").Str, item.Get("id").Str
	switch typ {
	case "agentMessage":
		if tu.streamed[id] || item.Get("text").Str == "" {
			return nil
		}
		return []translate.Out{chunk(s.id, "agent_message_chunk", item.Get("text").Str)}
	case "reasoning":
		if tu.streamed[id] {
			return nil
		}
		if text := reasoningText(item); text != "" {
			return []translate.Out{chunk(s.id, "agent_thought_chunk", text)}
		}
		return nil
	case "plan":
		return []translate.Out{planItem(s.id, item.Get("text").Str)}
	}
	if !toolItems[typ] || id == "" {
		return nil
	}
	var outs []translate.Out
	tl := tu.tools[id]
	if tl == nil {
		u := toolFields(item)
		tl = &tool{kind: u["kind"].(string), title: u["title"].(string)}
		tu.tools[id], tu.order = tl, append(tu.order, id)
		u["sessionUpdate"], u["toolCallId"], u["status"] = "tool_call", id, "in_progress"
		outs = append(outs, update(s.id, u))
	}
	tl.done = true
	u := toolResult(item, tl.output.String())
	u["sessionUpdate"], u["toolCallId"] = "tool_call_update", id
	return append(outs, update(s.id, u))
}

// replay is the session/update that shows one item of a loaded thread.
func (t *translator) replay(sid string, item gjson.Result) []translate.Out {
	typ, id := item.Get("type").Str, item.Get("id").Str
	switch typ {
	case "userMessage":
		var outs []translate.Out
		for _, c := range item.Get("content").Array() {
			switch c.Get("type").Str {
			case "text":
				outs = append(outs, chunk(sid, "user_message_chunk", c.Get("text").Str))
			case "image":
				if url := c.Get("url").Str; strings.HasPrefix(url, "data:") {
					mime, data, _ := strings.Cut(strings.TrimPrefix(url, "data:"), ";base64,")
					outs = append(outs, update(sid, map[string]any{"sessionUpdate": "user_message_chunk",
						"content": map[string]any{"type": "image", "mimeType": mime, "data": data}}))
				}
			}
		}
		return outs
	case "agentMessage":
		if text := item.Get("text").Str; text != "" {
			return []translate.Out{chunk(sid, "agent_message_chunk", text)}
		}
		return nil
	case "reasoning":
		if text := reasoningText(item); text != "" {
			return []translate.Out{chunk(sid, "agent_thought_chunk", text)}
		}
		return nil
	case "plan":
		return []translate.Out{planItem(sid, item.Get("text").Str)}
	}
	if !toolItems[typ] || id == "" {
		return nil
	}
	u := toolFields(item)
	for k, v := range toolResult(item, "") {
		u[k] = v
	}
	u["sessionUpdate"], u["toolCallId"] = "tool_call", id
	return []translate.Out{update(sid, u)}
}

func reasoningText(item gjson.Result) string {
	var parts []string
	for _, p := range item.Get("summary").Array() {
		parts = append(parts, p.Str)
	}
	if len(parts) == 0 {
		for _, p := range item.Get("content").Array() {
			parts = append(parts, p.Str)
		}
	}
	return strings.Join(parts, "\n\n")
}

// planItem shows a plan item's text as a plan, one entry per line.
func planItem(sid, text string) translate.Out {
	entries := []map[string]any{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "-*0123456789."))
		if line != "" {
			entries = append(entries, map[string]any{"content": line, "priority": "medium", "status": "pending"})
		}
	}
	return update(sid, map[string]any{"sessionUpdate": "plan", "entries": entries})
}

// toolFields are a tool item's kind, title, rawInput, locations and
// content (a file change's diffs) for its tool_call.
func toolFields(item gjson.Result) map[string]any {
	u := map[string]any{}
	switch item.Get("type").Str {
	case "commandExecution":
		u["kind"] = commandKind(item.Get("commandActions"))
		u["title"] = commandTitle(item.Get("command").Str, item.Get("commandActions"))
		u["rawInput"] = map[string]any{"command": item.Get("command").Str, "cwd": item.Get("cwd").Str}
	case "fileChange":
		u["kind"] = "edit"
		var paths []string
		var locations []map[string]any
		for _, c := range item.Get("changes").Array() {
			paths = append(paths, c.Get("path").Str)
			locations = append(locations, map[string]any{"path": c.Get("path").Str})
		}
		u["title"] = "Edit " + strings.Join(paths, ", ")
		if len(paths) == 0 {
			u["title"] = "Edit files"
		}
		u["content"] = diffs(item.Get("changes"))
		if locations != nil {
			u["locations"] = locations
		}
		u["rawInput"] = map[string]any{"changes": json.RawMessage(rawOr(item.Get("changes"), "[]"))}
	case "mcpToolCall":
		u["kind"] = "other"
		u["title"] = "Tool: " + item.Get("server").Str + "/" + item.Get("tool").Str
		u["rawInput"] = json.RawMessage(rawOr(item.Get("arguments"), "{}"))
	case "dynamicToolCall":
		u["kind"] = "other"
		u["title"] = "Tool: " + item.Get("tool").Str
		u["rawInput"] = json.RawMessage(rawOr(item.Get("arguments"), "{}"))
	case "webSearch":
		u["kind"] = "fetch"
		q := item.Get("query").Str
		if q == "" {
			q = item.Get("action.query").Str
		}
		u["title"] = "Searching the Web"
		if q != "" {
			u["title"] = "Searching for: " + q
		}
		u["rawInput"] = map[string]any{"query": q}
	case "imageView":
		u["kind"] = "read"
		u["title"] = "View Image " + item.Get("path").Str
		u["locations"] = []map[string]any{{"path": item.Get("path").Str}}
	}
	return u
}

// toolResult is a finished tool item's status, content and rawOutput.
func toolResult(item gjson.Result, streamed string) map[string]any {
	u := map[string]any{}
	status := item.Get("status").Str
	switch status {
	case "completed", "":
		// webSearch and imageView items have no status: done when completed.
		u["status"] = "completed"
	case "inProgress":
		u["status"] = "in_progress"
	default: // failed, declined
		u["status"] = "failed"
	}
	switch item.Get("type").Str {
	case "commandExecution":
		out := item.Get("aggregatedOutput").Str
		if out == "" {
			out = streamed
		}
		if exit := item.Get("exitCode"); exit.Type == gjson.Number && exit.Int() != 0 && status == "completed" {
			u["status"] = "failed"
		}
		if out != "" {
			u["content"] = textContent(out)
		}
		raw := map[string]any{"exitCode": json.RawMessage(rawOr(item.Get("exitCode"), "null")), "status": status}
		if out != "" {
			raw["output"] = out
		}
		if d := item.Get("durationMs"); d.Type == gjson.Number {
			raw["durationMs"] = d.Int()
		}
		u["rawOutput"] = raw
	case "fileChange":
		if len(item.Get("changes").Array()) > 0 {
			u["content"] = diffs(item.Get("changes"))
		}
		u["rawOutput"] = map[string]any{"status": status}
	case "mcpToolCall":
		if r := item.Get("result"); r.IsObject() {
			var content []map[string]any
			for _, c := range r.Get("content").Array() {
				content = append(content, map[string]any{"type": "content", "content": json.RawMessage(c.Raw)})
			}
			if content != nil {
				u["content"] = content
			}
			u["rawOutput"] = json.RawMessage(r.Raw)
		}
		if e := item.Get("error"); e.IsObject() {
			u["content"] = textContent(e.Get("message").Str)
			u["rawOutput"] = json.RawMessage(e.Raw)
		}
	case "dynamicToolCall":
		if c := item.Get("contentItems"); c.IsArray() {
			u["rawOutput"] = json.RawMessage(c.Raw)
		}
		if s := item.Get("success"); s.Type == gjson.False {
			u["status"] = "failed"
		}
	case "webSearch":
		if r := item.Get("results"); r.Exists() && r.Type != gjson.Null {
			u["rawOutput"] = json.RawMessage(r.Raw)
		}
	}
	return u
}

func rawOr(r gjson.Result, def string) string {
	if !r.Exists() || r.Raw == "" {
		return def
	}
	return r.Raw
}

// commandKind is the ACP kind of a command from Codex's parse of it.
func commandKind(actions gjson.Result) string {
	kind := ""
	for _, a := range actions.Array() {
		k := "execute"
		switch a.Get("type").Str {
		case "read":
			k = "read"
		case "listFiles", "search":
			k = "search"
		}
		if kind != "" && kind != k {
			return "execute"
		}
		kind = k
	}
	if kind == "" {
		return "execute"
	}
	return kind
}

// commandTitle shows the command as the user would type it: Codex's
// parsed commands when it made them, else the command without the
// shell wrapper.
func commandTitle(command string, actions gjson.Result) string {
	var parts []string
	for _, a := range actions.Array() {
		if c := a.Get("command").Str; c != "" {
			parts = append(parts, c)
		}
	}
	if len(parts) > 0 {
		return strings.Join(parts, " && ")
	}
	for _, shell := range []string{"/bin/bash -lc ", "bash -lc ", "/bin/sh -c ", "sh -c ", "/bin/zsh -lc ", "zsh -lc "} {
		if rest, ok := strings.CutPrefix(command, shell); ok {
			if len(rest) >= 2 && rest[0] == '\'' && rest[len(rest)-1] == '\'' {
				rest = rest[1 : len(rest)-1]
			}
			return rest
		}
	}
	return command
}

// diffs is the ACP diff content of a file change's changes.
func diffs(changes gjson.Result) []map[string]any {
	out := []map[string]any{}
	for _, c := range changes.Array() {
		path, diff := c.Get("path").Str, c.Get("diff").Str
		switch c.Get("kind.type").Str {
		case "add":
			out = append(out, map[string]any{"type": "diff", "path": path, "oldText": nil, "newText": diff})
		case "delete":
			out = append(out, map[string]any{"type": "diff", "path": path, "oldText": diff, "newText": ""})
		default:
			oldText, newText := hunks(diff)
			if mv := c.Get("kind.move_path").Str; mv != "" {
				path = mv
			}
			out = append(out, map[string]any{"type": "diff", "path": path, "oldText": oldText, "newText": newText})
		}
	}
	return out
}

// hunks splits a unified diff into the old and new text of its hunks
// (context lines in both), the hunks separated by a blank line.
func hunks(diff string) (oldText, newText string) {
	var o, n strings.Builder
	inHunk := false
	for _, line := range strings.SplitAfter(diff, "\n") {
		switch {
		case strings.HasPrefix(line, "@@"):
			if inHunk {
				o.WriteString("\n")
				n.WriteString("\n")
			}
			inHunk = true
		case !inHunk, strings.HasPrefix(line, `\`):
		case strings.HasPrefix(line, "-"):
			o.WriteString(line[1:])
		case strings.HasPrefix(line, "+"):
			n.WriteString(line[1:])
		case strings.HasPrefix(line, " "):
			o.WriteString(line[1:])
			n.WriteString(line[1:])
		case line == "\n":
			o.WriteString(line)
			n.WriteString(line)
		}
	}
	if !inHunk {
		return "", diff
	}
	return o.String(), n.String()
}
