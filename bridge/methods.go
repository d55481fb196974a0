package bridge

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// agentMethods are the requests an ACP v1 agent handles: the stable set and
// the unstable ones an agent may opt into (acp-spec.md §6). Anything else
// that is not an extension ("_…") is answered -32601 by the bridge itself, so
// a typo never reaches a legacy agent.
var agentMethods = map[string]bool{
	"initialize": true, "authenticate": true, "logout": true,
	"session/new": true, "session/load": true, "session/resume": true, "session/close": true,
	"session/list": true, "session/delete": true, "session/set_mode": true,
	"session/set_config_option": true, "session/prompt": true,
	// unstable (schema.unstable.json) and removed-but-still-spoken (§6.3)
	"session/fork": true, "session/set_model": true, "providers/list": true, "providers/set": true,
	"providers/disable": true, "nes/start": true, "nes/suggest": true, "nes/close": true, "mcp/message": true,
}

var agentNotifications = map[string]bool{
	"session/cancel": true, "$/cancel_request": true,
	"nes/accept": true, "nes/reject": true, "mcp/message": true,
	"document/didOpen": true, "document/didChange": true, "document/didClose": true,
	"document/didSave": true, "document/didFocus": true,
}

func knownAgentMethod(m string) bool       { return agentMethods[m] || strings.HasPrefix(m, "_") }
func knownAgentNotification(m string) bool { return agentNotifications[m] || strings.HasPrefix(m, "_") }

// required lists, per method, the params the engine checks before routing:
// enough to answer -32602 for a malformed request without decoding the rest.
var required = map[string][]string{
	"initialize":                {"protocolVersion"},
	"authenticate":              {"methodId"},
	"session/new":               {"cwd"},
	"session/load":              {"sessionId", "cwd"},
	"session/resume":            {"sessionId", "cwd"},
	"session/close":             {"sessionId"},
	"session/delete":            {"sessionId"},
	"session/set_mode":          {"sessionId", "modeId"},
	"session/set_config_option": {"sessionId", "configId", "value"},
	"session/prompt":            {"sessionId", "prompt"},
}

// checkParams returns a -32602 error when params cannot be right for method.
func checkParams(method string, params json.RawMessage) *translate.Error {
	if strings.HasPrefix(method, "_") || !agentMethods[method] {
		return nil
	}
	p := gjson.ParseBytes(params)
	if params != nil && !p.IsObject() {
		return translate.Errorf(translate.CodeInvalidParams, "%s params must be an object", method)
	}
	for _, name := range required[method] {
		if !p.Get(name).Exists() {
			return translate.Errorf(translate.CodeInvalidParams, "%s requires %q", method, name)
		}
	}
	if sid := p.Get("sessionId"); sid.Exists() && sid.Type != gjson.String {
		return translate.Errorf(translate.CodeInvalidParams, `"sessionId" must be a string`)
	}
	switch method {
	case "initialize":
		if v := p.Get("protocolVersion"); v.Type != gjson.Number && v.Type != gjson.String {
			return translate.Errorf(translate.CodeInvalidParams, `"protocolVersion" must be an integer`)
		}
	case "session/new", "session/load", "session/resume":
		cwd := p.Get("cwd")
		if cwd.Type != gjson.String || !filepath.IsAbs(cwd.Str) {
			return translate.Errorf(translate.CodeInvalidParams, `"cwd" must be an absolute path`)
		}
		if m := p.Get("mcpServers"); m.Exists() && !m.IsArray() {
			return translate.Errorf(translate.CodeInvalidParams, `"mcpServers" must be an array`)
		}
	case "session/prompt":
		if !p.Get("prompt").IsArray() {
			return translate.Errorf(translate.CodeInvalidParams, `"prompt" must be an array of content blocks`)
		}
	}
	return nil
}
