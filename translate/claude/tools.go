package claude

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tidwall/gjson"
)

// textContent is an ACP text content block.
type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// toolContent is one ACP ToolCallContent (schema: ToolCallContent): content
// (wrapping a content block) or diff.
type toolContent struct {
	Type    string  `json:"type"`
	Content any     `json:"content,omitempty"`
	Path    string  `json:"path,omitempty"`
	OldText *string `json:"oldText,omitempty"`
	NewText *string `json:"newText,omitempty"`
	// newFile marks a diff whose oldText is null (a new file).
	newFile bool
}

// MarshalJSON writes oldText null for a diff of a new file, which
// omitempty would drop.
func (c toolContent) MarshalJSON() ([]byte, error) {
	type plain toolContent
	if c.Type != "diff" || !c.newFile {
		return marshal(plain(c)), nil
	}
	return marshal(struct {
		Type    string  `json:"type"`
		Path    string  `json:"path"`
		OldText *string `json:"oldText"`
		NewText *string `json:"newText"`
	}{c.Type, c.Path, nil, c.NewText}), nil
}

func textItem(s string) toolContent {
	return toolContent{Type: "content", Content: textContent{"text", s}}
}

func diffItem(path string, oldText *string, newText string) toolContent {
	return toolContent{Type: "diff", Path: path, OldText: oldText, NewText: &newText, newFile: oldText == nil}
}

// location is an ACP ToolCallLocation.
type location struct {
	Path string `json:"path"`
	Line *int64 `json:"line,omitempty"`
}

// toolCall is an ACP tool_call, tool_call_update, or the toolCall of a
// permission request (schema: ToolCall, ToolCallUpdate).
type toolCall struct {
	Meta          json.RawMessage `json:"_meta,omitempty"`
	SessionUpdate string          `json:"sessionUpdate,omitempty"`
	ToolCallID    string          `json:"toolCallId"`
	Title         *string         `json:"title,omitempty"`
	Kind          string          `json:"kind,omitempty"`
	Status        string          `json:"status,omitempty"`
	Content       []toolContent   `json:"content,omitempty"`
	Locations     []location      `json:"locations,omitempty"`
	RawInput      json.RawMessage `json:"rawInput,omitempty"`
	RawOutput     json.RawMessage `json:"rawOutput,omitempty"`
	// emptyContent writes "content":[] (omitempty drops an empty list).
	emptyContent bool
}

func (c toolCall) MarshalJSON() ([]byte, error) {
	type plain toolCall
	if !c.emptyContent || len(c.Content) > 0 {
		return marshal(plain(c)), nil
	}
	type withEmpty struct {
		plain
		Content []toolContent `json:"content"`
	}
	return marshal(withEmpty{plain(c), []toolContent{}}), nil
}

// toolMeta is the _meta the reference adapter puts on tool calls, naming the
// CLI's tool (docs/agent-protocols.md#claude-stream-json-mapping) and, for a
// subagent's, the tool use of the Task that runs it.
func toolMeta(name, parent string) json.RawMessage {
	m := map[string]string{"toolName": name}
	if parent != "" {
		m["parentToolUseId"] = parent
	}
	return marshal(map[string]any{"claudeCode": m})
}

// toolView is how a tool use is shown: title, kind, content, locations.
type toolView struct {
	title     string
	kind      string
	content   []toolContent
	locations []location
}

// viewTool describes a tool use from its name and input (an empty object
// while the input is still streaming) as claude-agent-acp 0.23.1 does:
// titles name paths relative to the session cwd, locations and diffs take
// them absolute (ACP spec, Tool Calls).
func (t *translator) viewTool(name string, input json.RawMessage) toolView {
	in := gjson.ParseBytes(input)
	str := func(key string) string { return in.Get(key).Str }
	var v toolView
	switch name {
	case "Bash":
		v.kind, v.title = "execute", "Terminal"
		if c := str("command"); c != "" {
			v.title = c
		}
		if d := str("description"); d != "" {
			v.content = []toolContent{textItem(d)}
		}
	case "BashOutput":
		v.kind, v.title = "execute", "Read shell output"
	case "KillShell", "KillBash":
		v.kind, v.title = "execute", "Stop shell"
	case "Read":
		v.kind, v.title = "read", "Read File"
		offset, limit := in.Get("offset").Int(), in.Get("limit").Int()
		first := max(offset, 1)
		var lines string
		switch {
		case limit > 0:
			lines = fmt.Sprintf(" (%d - %d)", first, first+limit-1)
		case offset > 0:
			lines = fmt.Sprintf(" (from line %d)", offset)
		}
		if p := str("file_path"); p != "" {
			v.title = "Read " + t.displayPath(p) + lines
			v.locations = []location{{Path: t.absPath(p), Line: &first}}
		} else {
			v.title += lines
		}
	case "Edit", "MultiEdit":
		v.kind, v.title = "edit", "Edit"
		if p := str("file_path"); p != "" {
			v.title = "Edit " + t.displayPath(p)
			abs := t.absPath(p)
			v.locations = []location{{Path: abs}}
			edits := []gjson.Result{in}
			if name == "MultiEdit" {
				edits = in.Get("edits").Array()
			}
			for _, e := range edits {
				o, n := e.Get("old_string").Str, e.Get("new_string").Str
				if o == "" && n == "" {
					continue
				}
				var old *string
				if o != "" {
					old = &o
				}
				v.content = append(v.content, diffItem(abs, old, n))
			}
		}
	case "Write":
		v.kind, v.title = "edit", "Write"
		if p := str("file_path"); p != "" {
			v.title = "Write " + t.displayPath(p)
			abs := t.absPath(p)
			v.locations = []location{{Path: abs}}
			v.content = []toolContent{diffItem(abs, nil, str("content"))}
		} else if c := str("content"); c != "" {
			v.content = []toolContent{textItem(c)}
		}
	case "NotebookEdit":
		v.kind, v.title = "edit", "Edit Notebook"
		if p := str("notebook_path"); p != "" {
			v.title = "Edit Notebook " + t.displayPath(p)
			v.locations = []location{{Path: t.absPath(p)}}
		}
	case "Grep":
		v.kind, v.title = "search", grepLabel(in)
	case "Glob":
		v.kind, v.title = "search", "Find"
		if p := str("path"); p != "" {
			v.title += " `" + p + "`"
			v.locations = []location{{Path: t.absPath(p)}}
		}
		if pat := str("pattern"); pat != "" {
			v.title += " `" + pat + "`"
		}
	case "LS":
		v.kind, v.title = "search", "List the current directory"
		if p := str("path"); p != "" {
			v.title = "List " + t.displayPath(p)
		}
	case "WebFetch":
		v.kind, v.title = "fetch", "Fetch"
		if u := str("url"); u != "" {
			v.title = "Fetch " + u
		}
		if p := str("prompt"); p != "" {
			v.content = []toolContent{textItem(p)}
		}
	case "WebSearch":
		v.kind, v.title = "fetch", `"`+str("query")+`"`
		if d := in.Get("allowed_domains").Array(); len(d) > 0 {
			v.title += " (allowed: " + joinStrings(d) + ")"
		}
		if d := in.Get("blocked_domains").Array(); len(d) > 0 {
			v.title += " (blocked: " + joinStrings(d) + ")"
		}
	case "Task", "Agent":
		v.kind, v.title = "think", "Task"
		if d := str("description"); d != "" {
			v.title = d
		}
		if p := str("prompt"); p != "" {
			v.content = []toolContent{textItem(p)}
		}
	case "TodoWrite":
		v.kind, v.title = "think", "Update TODOs"
	case "ExitPlanMode":
		v.kind, v.title = "switch_mode", "Ready to code?"
		if p := str("plan"); p != "" {
			v.content = []toolContent{textItem(p)}
		}
	default:
		v.kind, v.title = "other", name
		if name == "" {
			v.title = "Unknown Tool"
		}
	}
	return v
}

// grepLabel is a Grep tool use's title: the grep command line it amounts
// to, as claude-agent-acp writes it.
func grepLabel(in gjson.Result) string {
	var b strings.Builder
	b.WriteString("grep")
	if in.Get("-i").Bool() {
		b.WriteString(" -i")
	}
	if in.Get("-n").Bool() {
		b.WriteString(" -n")
	}
	for _, f := range []string{"-A", "-B", "-C"} {
		if n := in.Get(f); n.Exists() {
			fmt.Fprintf(&b, " %s %s", f, n.String())
		}
	}
	switch in.Get("output_mode").Str {
	case "files_with_matches":
		b.WriteString(" -l")
	case "count":
		b.WriteString(" -c")
	}
	if n := in.Get("head_limit"); n.Exists() {
		fmt.Fprintf(&b, " | head -%s", n.String())
	}
	if g := in.Get("glob").Str; g != "" {
		b.WriteString(` --include="` + g + `"`)
	}
	if ty := in.Get("type").Str; ty != "" {
		b.WriteString(" --type=" + ty)
	}
	if in.Get("multiline").Bool() {
		b.WriteString(" -P")
	}
	if p := in.Get("pattern").Str; p != "" {
		b.WriteString(` "` + p + `"`)
	}
	if p := in.Get("path").Str; p != "" {
		b.WriteString(" " + p)
	}
	return b.String()
}

func joinStrings(rs []gjson.Result) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}

// displayPath is a path as a title shows it: relative to the session cwd
// when it lies inside it.
func (t *translator) displayPath(p string) string {
	if t.cwd == "" {
		return p
	}
	abs := t.absPath(p)
	if rel, err := filepath.Rel(t.cwd, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return rel
	}
	return p
}

// absPath makes a CLI path absolute against the session cwd: ACP wants
// absolute paths in locations and diffs (ACP spec, Tool Calls). Pure string
// work: no I/O.
func (t *translator) absPath(p string) string {
	if filepath.IsAbs(p) || t.cwd == "" {
		return p
	}
	return filepath.Join(t.cwd, p)
}

// planEntry is an ACP PlanEntry.
type planEntry struct {
	Content  string `json:"content"`
	Priority string `json:"priority"`
	Status   string `json:"status"`
}

// planEntries converts TodoWrite's todos
// (docs/agent-protocols.md#claude-stream-json-mapping: {content, status,
// activeForm} → {content, status, priority "medium"}). ok is false when the
// input has no todos list (yet).
func planEntries(input json.RawMessage) (entries []planEntry, ok bool) {
	todos := gjson.GetBytes(input, "todos")
	if !todos.IsArray() {
		return nil, false
	}
	entries = []planEntry{}
	for _, td := range todos.Array() {
		status := td.Get("status").Str
		switch status {
		case "pending", "in_progress", "completed":
		default:
			status = "pending"
		}
		entries = append(entries, planEntry{Content: td.Get("content").Str, Priority: "medium", Status: status})
	}
	return entries, true
}

// resultView is what a tool call shows of its result, as claude-agent-acp
// 0.23.1 shows it: a failure's text in a code fence; Bash output as a
// console block; what Read read in a code fence; nothing for edits, whose
// diff stays what the editor shows; other tools' content as it is.
// title, when not "", retitles the tool call.
func resultView(name string, content gjson.Result, failed bool) (items []toolContent, title string) {
	if failed {
		if items = resultContent(content); len(items) > 0 {
			for i := range items {
				if tc, ok := items[i].Content.(textContent); ok {
					items[i] = textItem("```\n" + tc.Text + "\n```")
				}
			}
			return items, ""
		}
	}
	switch name {
	case "Read":
		items = resultContent(content)
		for i := range items {
			if tc, ok := items[i].Content.(textContent); ok {
				items[i] = textItem(markdownFence(tc.Text))
			}
		}
		return items, ""
	case "Bash":
		var out []string
		switch {
		case content.Type == gjson.String:
			out = []string{content.Str}
		case content.IsArray():
			for _, b := range content.Array() {
				out = append(out, b.Get("text").Str)
			}
		}
		text := strings.Join(out, "\n")
		if strings.TrimSpace(text) == "" {
			return nil, ""
		}
		return []toolContent{textItem("```console\n" + strings.TrimRight(text, " \t\r\n") + "\n```")}, ""
	case "Edit", "MultiEdit", "Write", "NotebookEdit":
		return nil, ""
	case "ExitPlanMode":
		return nil, "Exited Plan Mode"
	}
	return resultContent(content), ""
}

// markdownFence puts text in a code fence longer than any backtick run
// that starts one of its lines.
func markdownFence(text string) string {
	fence := "```"
	for _, line := range strings.Split(text, "\n") {
		n := len(line) - len(strings.TrimLeft(line, "`"))
		for n >= 3 && n >= len(fence) {
			fence += "`"
		}
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return fence + "\n" + text + fence
}

// resultContent converts a tool_result's content (a string, or a list of
// text and image blocks) to ACP tool call content.
func resultContent(content gjson.Result) []toolContent {
	switch {
	case content.Type == gjson.String:
		if content.Str == "" {
			return nil
		}
		return []toolContent{textItem(content.Str)}
	case content.IsArray():
		var out []toolContent
		for _, b := range content.Array() {
			switch b.Get("type").Str {
			case "text":
				if s := b.Get("text").Str; s != "" {
					out = append(out, textItem(s))
				}
			case "image":
				src := b.Get("source")
				if src.Get("type").Str == "base64" {
					out = append(out, toolContent{Type: "content", Content: struct {
						Type     string `json:"type"`
						Data     string `json:"data"`
						MimeType string `json:"mimeType"`
					}{"image", src.Get("data").Str, src.Get("media_type").Str}})
				}
			}
		}
		return out
	}
	return nil
}
