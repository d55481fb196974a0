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

// toolContent is one ACP ToolCallContent (acp-spec.md §10.2): content
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
// permission request (acp-spec.md §9.1, §10.2).
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

// toolMeta is the _meta the reference adapter puts on tool calls, naming
// the CLI's tool (legacy-formats.md §3.4).
func toolMeta(name string) json.RawMessage {
	return marshal(map[string]any{"claudeCode": map[string]string{"toolName": name}})
}

// toolView is how a tool use is shown: title, kind, content, locations.
type toolView struct {
	title     string
	kind      string
	content   []toolContent
	locations []location
}

// viewTool describes a tool use from its name and input (an empty object
// while the input is still streaming). Kinds follow legacy-formats.md §3.4.
func (t *translator) viewTool(name string, input json.RawMessage) toolView {
	in := gjson.ParseBytes(input)
	str := func(key string) string { return in.Get(key).Str }
	path := func(key string) string {
		p := str(key)
		if p == "" {
			return ""
		}
		return t.absPath(p)
	}
	var v toolView
	switch name {
	case "Bash":
		v.kind = "execute"
		v.title = "Terminal"
		if c := str("command"); c != "" {
			v.title = "`" + strings.ReplaceAll(c, "`", `\`+"`") + "`"
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
		if p := path("file_path"); p != "" {
			v.title = "Read " + p
			loc := location{Path: p}
			if off := in.Get("offset"); off.Type == gjson.Number && off.Int() > 0 {
				n := off.Int()
				loc.Line = &n
				v.title = fmt.Sprintf("Read %s (from line %d)", p, n)
			}
			v.locations = []location{loc}
		}
	case "Edit":
		v.kind, v.title = "edit", "Edit"
		if p := path("file_path"); p != "" {
			v.title = "Edit `" + p + "`"
			v.locations = []location{{Path: p}}
			if o, n := in.Get("old_string"), in.Get("new_string"); o.Type == gjson.String && n.Type == gjson.String {
				old := o.Str
				v.content = []toolContent{diffItem(p, &old, n.Str)}
			}
		}
	case "MultiEdit":
		v.kind, v.title = "edit", "Edit"
		if p := path("file_path"); p != "" {
			v.title = "Edit `" + p + "`"
			v.locations = []location{{Path: p}}
			for _, e := range in.Get("edits").Array() {
				if o, n := e.Get("old_string"), e.Get("new_string"); o.Type == gjson.String && n.Type == gjson.String {
					old := o.Str
					v.content = append(v.content, diffItem(p, &old, n.Str))
				}
			}
		}
	case "Write":
		v.kind, v.title = "edit", "Write"
		if p := path("file_path"); p != "" {
			v.title = "Write " + p
			v.locations = []location{{Path: p}}
			if c := in.Get("content"); c.Type == gjson.String {
				v.content = []toolContent{diffItem(p, nil, c.Str)}
			}
		}
	case "NotebookEdit":
		v.kind, v.title = "edit", "Edit Notebook"
		if p := path("notebook_path"); p != "" {
			v.title = "Edit Notebook " + p
			v.locations = []location{{Path: p}}
		}
	case "Grep":
		v.kind, v.title = "search", "grep"
		if pat := str("pattern"); pat != "" {
			v.title = fmt.Sprintf("grep %q", pat)
			if p := str("path"); p != "" {
				v.title += " " + p
			}
		}
	case "Glob":
		v.kind, v.title = "search", "Find"
		if pat := str("pattern"); pat != "" {
			v.title = "Find `" + pat + "`"
			if p := str("path"); p != "" {
				v.title += " in " + p
			}
		}
	case "LS":
		v.kind, v.title = "search", "List the current directory"
		if p := path("path"); p != "" {
			v.title = "List " + p
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
		v.kind, v.title = "fetch", "Web search"
		if q := str("query"); q != "" {
			v.title = fmt.Sprintf("Search the web for %q", q)
		}
	case "Task":
		v.kind, v.title = "think", "Task"
		if d := str("description"); d != "" {
			v.title = d
		}
		if p := str("prompt"); p != "" {
			v.content = []toolContent{textItem(p)}
		}
	case "TodoWrite":
		v.kind, v.title = "think", "Update the plan"
	case "ExitPlanMode":
		v.kind, v.title = "switch_mode", "Ready to code?"
		if p := str("plan"); p != "" {
			v.content = []toolContent{textItem(p)}
		}
	default:
		v.kind, v.title = "other", name
		if name == "" {
			v.title = "Tool"
		}
	}
	return v
}

// absPath makes a CLI path absolute against the session cwd: ACP wants
// absolute paths in locations and diffs (acp-spec.md §10.2). Pure string
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

// planEntries converts TodoWrite's todos (legacy-formats.md §3.4:
// {content, status, activeForm} → {content, status, priority "medium"}).
// ok is false when the input has no todos list (yet).
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
