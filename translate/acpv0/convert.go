package acpv0

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
)

// chunk is a legacy UserMessageChunk: {"text"} or {"path"}.
type chunk struct {
	Text *string `json:"text,omitempty"`
	Path *string `json:"path,omitempty"`
}

// promptChunks converts ACP prompt blocks (schema: ContentBlock) to legacy
// chunks (docs/agent-protocols.md#acp-v0-mapping). The error is a -32602
// naming the block the legacy agent cannot take; the prompt is then not sent
// at all.
func promptChunks(blocks []json.RawMessage) ([]chunk, *translate.Error) {
	chunks := make([]chunk, 0, len(blocks))
	for i, raw := range blocks {
		var b struct {
			Type     string  `json:"type"`
			Text     *string `json:"text"`
			URI      *string `json:"uri"`
			Resource *struct {
				URI  string  `json:"uri"`
				Text *string `json:"text"`
				Blob *string `json:"blob"`
			} `json:"resource"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: %s", i, describeJSONError(err))
		}
		switch b.Type {
		case "text":
			if b.Text == nil {
				return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: text block without text", i)
			}
			chunks = append(chunks, chunk{Text: b.Text})
		case "resource_link":
			if b.URI == nil {
				return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: resource_link without uri", i)
			}
			if path, ok := fileURIPath(*b.URI); ok {
				// The legacy agent reads @-mentioned paths itself.
				chunks = append(chunks, chunk{Path: &path})
			} else {
				// No legacy form for other URIs: the model gets the URI.
				chunks = append(chunks, chunk{Text: b.URI})
			}
		case "resource":
			switch {
			case b.Resource == nil:
				return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: resource block without resource", i)
			case b.Resource.Text != nil:
				// Inline the text, wrapped the way claude-code-acp does so the
				// model knows where it came from.
				text := "<context ref=\"" + b.Resource.URI + "\">\n" + *b.Resource.Text + "\n</context>"
				chunks = append(chunks, chunk{Text: &text})
			case b.Resource.Blob != nil:
				return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: the embedded binary resource %s cannot be sent: the legacy Zed ACP 0.0.x agent accepts only text and file paths", i, b.Resource.URI)
			default:
				return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: resource without text or blob", i)
			}
		case "image", "audio":
			return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: %s content cannot be sent: the legacy Zed ACP 0.0.x agent accepts only text and file paths (promptCapabilities.%s is false)", i, b.Type, b.Type)
		default:
			return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: unsupported content block type %q", i, b.Type)
		}
	}
	return chunks, nil
}

// fileURIPath returns the local path of a file:// URI on this machine
// (empty or "localhost" host); file:///C:/x becomes C:\x on Windows.
func fileURIPath(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || !strings.EqualFold(u.Scheme, "file") || (u.Host != "" && u.Host != "localhost") || u.Path == "" {
		return "", false
	}
	p := u.Path
	if len(p) >= 3 && p[0] == '/' && p[2] == ':' && (p[1]|0x20 >= 'a' && p[1]|0x20 <= 'z') {
		p = p[1:]
	}
	return filepath.FromSlash(p), true
}

// absPath makes a legacy path absolute against the session cwd; ACP wants
// absolute paths in locations, diffs and fs calls (ACP spec, Tool Calls and
// File System).
// Pure string work: no I/O.
func (t *translator) absPath(p string) string {
	if filepath.IsAbs(p) || t.cwd == "" {
		return p
	}
	return filepath.Join(t.cwd, p)
}

// iconKinds maps a legacy Icon to an ACP ToolKind
// (docs/agent-protocols.md#acp-v0-mapping).
var iconKinds = map[string]string{
	"pencil":     "edit",
	"terminal":   "execute",
	"fileSearch": "search",
	"regex":      "search",
	"folder":     "read",
	"globe":      "fetch",
	"lightBulb":  "think",
	"hammer":     "other",
}

// confirmationKinds is the fallback kind of a confirmation whose icon is
// unknown.
var confirmationKinds = map[string]string{
	"edit":    "edit",
	"execute": "execute",
	"fetch":   "fetch",
}

func toolKind(icon, confirmationType string) string {
	if k, ok := iconKinds[icon]; ok {
		return k
	}
	if k, ok := confirmationKinds[confirmationType]; ok {
		return k
	}
	return "other"
}

// toolContent converts a legacy ToolCallContent (one object or null) to an
// ACP ToolCallContent list. absent reports a missing or null value (the
// callers decide between omitting content and clearing it with []).
func (t *translator) toolContent(raw json.RawMessage) (list json.RawMessage, absent bool, err *translate.Error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true, nil
	}
	var c struct {
		Type     string          `json:"type"`
		Markdown *string         `json:"markdown"`
		Path     *string         `json:"path"`
		OldText  json.RawMessage `json:"oldText"`
		NewText  *string         `json:"newText"`
	}
	if e := json.Unmarshal(raw, &c); e != nil {
		return nil, false, translate.Errorf(translate.CodeInvalidParams, "content: %s", describeJSONError(e))
	}
	switch c.Type {
	case "markdown":
		if c.Markdown == nil {
			return nil, false, translate.Errorf(translate.CodeInvalidParams, "markdown content without markdown")
		}
		type text struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		return marshal([]struct {
			Type    string `json:"type"`
			Content text   `json:"content"`
		}{{"content", text{"text", *c.Markdown}}}), false, nil
	case "diff":
		if c.Path == nil || c.NewText == nil {
			return nil, false, translate.Errorf(translate.CodeInvalidParams, "diff content needs path and newText")
		}
		// oldText null (or absent) means a new file.
		var old *string
		if len(c.OldText) > 0 && string(c.OldText) != "null" {
			old = new(string)
			if e := json.Unmarshal(c.OldText, old); e != nil {
				return nil, false, translate.Errorf(translate.CodeInvalidParams, "diff oldText: %s", describeJSONError(e))
			}
		}
		return marshal([]struct {
			Type    string  `json:"type"`
			Path    string  `json:"path"`
			OldText *string `json:"oldText"`
			NewText string  `json:"newText"`
		}{{"diff", t.absPath(*c.Path), old, *c.NewText}}), false, nil
	}
	return nil, false, translate.Errorf(translate.CodeInvalidParams, "unknown tool call content type %q", c.Type)
}

// location is an ACP ToolCallLocation.
type location struct {
	Path string  `json:"path"`
	Line *uint32 `json:"line,omitempty"`
}

// legacyLocation is a legacy ToolCallLocation. Rust peers may add a serde
// "type" key naming the struct (the Rust library of the time tagged it so);
// unknown keys are ignored.
type legacyLocation struct {
	Path *string `json:"path"`
	Line *uint32 `json:"line"`
}

func (t *translator) locations(in []legacyLocation) ([]location, *translate.Error) {
	var out []location
	for i, l := range in {
		if l.Path == nil {
			return nil, translate.Errorf(translate.CodeInvalidParams, "location %d has no path", i)
		}
		out = append(out, location{Path: t.absPath(*l.Path), Line: l.Line})
	}
	return out, nil
}
