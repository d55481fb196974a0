package claude

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
)

// anthropicBlock is one content block of a user message (Anthropic Messages
// API shapes, as the CLI takes them on stdin).
type anthropicBlock struct {
	Type   string       `json:"type"`
	Text   *string      `json:"text,omitempty"`
	Source *imageSource `json:"source,omitempty"`
	Title  string       `json:"title,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// promptBlocks converts ACP prompt blocks (schema: ContentBlock) to the
// content of a CLI user message (docs/agent-protocols.md#claude-stream-json-mapping):
//
//   - text → text; "/mcp:server:command args", the name an MCP prompt is
//     offered under (see availableCommands), becomes the CLI's
//     "/server:command (MCP) args";
//   - image → an image block, base64 from data or by URL from uri;
//   - resource_link → "@path" for a local file (the CLI reads the file
//     itself), the URI as text otherwise;
//   - resource with text → the text wrapped in <context ref="URI">, as
//     claude-code-acp does, so the model knows where it came from;
//   - resource with a blob → an image or PDF document block by its MIME
//     type; other blobs, audio and unknown block types → -32602, and
//     nothing is sent.
func promptBlocks(blocks []json.RawMessage) ([]anthropicBlock, *translate.Error) {
	out := make([]anthropicBlock, 0, len(blocks))
	for i, raw := range blocks {
		var b struct {
			Type     string  `json:"type"`
			Text     *string `json:"text"`
			Data     string  `json:"data"`
			MimeType string  `json:"mimeType"`
			URI      *string `json:"uri"`
			Name     string  `json:"name"`
			Resource *struct {
				URI      string  `json:"uri"`
				Text     *string `json:"text"`
				Blob     *string `json:"blob"`
				MimeType string  `json:"mimeType"`
			} `json:"resource"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d is not a content block: %v", i, err)
		}
		switch b.Type {
		case "text":
			if b.Text == nil {
				return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: text block without text", i)
			}
			out = append(out, textBlock(mcpCommand(*b.Text)))
		case "image":
			switch {
			case b.Data != "":
				if b.MimeType == "" {
					return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: image without mimeType", i)
				}
				out = append(out, anthropicBlock{Type: "image", Source: &imageSource{Type: "base64", MediaType: b.MimeType, Data: b.Data}})
			case b.URI != nil && (strings.HasPrefix(*b.URI, "http://") || strings.HasPrefix(*b.URI, "https://")):
				out = append(out, anthropicBlock{Type: "image", Source: &imageSource{Type: "url", URL: *b.URI}})
			default:
				return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: image without data or an http(s) uri", i)
			}
		case "resource_link":
			if b.URI == nil {
				return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: resource_link without uri", i)
			}
			out = append(out, textBlock(mention(*b.URI)))
		case "resource":
			r := b.Resource
			switch {
			case r == nil:
				return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: resource block without resource", i)
			case r.Text != nil:
				out = append(out, textBlock("<context ref=\""+r.URI+"\">\n"+*r.Text+"\n</context>"))
			case r.Blob != nil && strings.HasPrefix(r.MimeType, "image/"):
				out = append(out, anthropicBlock{Type: "image", Source: &imageSource{Type: "base64", MediaType: r.MimeType, Data: *r.Blob}})
			case r.Blob != nil && r.MimeType == "application/pdf":
				out = append(out, anthropicBlock{Type: "document", Source: &imageSource{Type: "base64", MediaType: r.MimeType, Data: *r.Blob}, Title: r.URI})
			case r.Blob != nil:
				return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: the embedded binary resource %s (%s) cannot be sent: Claude Code takes images and PDF documents only", i, r.URI, orUnknown(r.MimeType))
			default:
				return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: resource without text or blob", i)
			}
		case "audio":
			return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: audio cannot be sent: Claude Code takes no audio (promptCapabilities.audio is false)", i)
		default:
			return nil, translate.Errorf(translate.CodeInvalidParams, "prompt block %d: unsupported content block type %q", i, b.Type)
		}
	}
	return out, nil
}

func textBlock(s string) anthropicBlock { return anthropicBlock{Type: "text", Text: &s} }

func orUnknown(s string) string {
	if s == "" {
		return "no MIME type"
	}
	return s
}

// mention returns the prompt text for a resource_link: an @-mention of a
// local file, which Claude Code resolves itself (quoted when the path has a
// space), or the URI.
func mention(uri string) string {
	path, ok := fileURIPath(uri)
	if !ok {
		return uri
	}
	if strings.ContainsAny(path, " \t") {
		return `@"` + path + `"`
	}
	return "@" + path
}

// fileURIPath returns the local path of a file:// URI on this machine
// (empty or "localhost" host).
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

// mcpCommand rewrites a slash command for an MCP prompt from the name the
// editor was offered, "/mcp:server:command args", to the CLI's
// "/server:command (MCP) args"; other text is returned as it is.
func mcpCommand(text string) string {
	rest, ok := strings.CutPrefix(text, "/mcp:")
	if !ok {
		return text
	}
	name, args, _ := strings.Cut(rest, " ")
	server, command, ok := strings.Cut(name, ":")
	if !ok || server == "" || command == "" || strings.ContainsAny(name, "\t\n") {
		return text
	}
	if args != "" {
		args = " " + args
	}
	return "/" + server + ":" + command + " (MCP)" + args
}

// localCommands are the slash commands the CLI answers itself, whose
// output comes only as the result's text (as claude-agent-acp knows them).
var localCommands = []string{"/context", "/heapdump", "/extra-usage"}

// localCommand reports whether a prompt starts with one of localCommands.
func localCommand(blocks []anthropicBlock) bool {
	if len(blocks) == 0 || blocks[0].Type != "text" || blocks[0].Text == nil {
		return false
	}
	name, _, _ := strings.Cut(*blocks[0].Text, " ")
	return slices.Contains(localCommands, name)
}
