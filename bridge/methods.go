package bridge

import (
	"encoding/json"
	"path/filepath"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// objectResults are the ACP v1 agent methods, stable and unstable, whose
// result is an object (ACP schema): a null answer to one of them is
// repaired to {}. Other methods pass whatever the agent answers.
var objectResults = map[string]bool{
	"initialize": true, "authenticate": true, "logout": true,
	"session/new": true, "session/load": true, "session/resume": true, "session/close": true,
	"session/list": true, "session/delete": true, "session/set_mode": true,
	"session/set_config_option": true, "session/prompt": true,
	"session/fork": true, "session/set_model": true,
}

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
// Only methods the engine itself routes on are checked: everything else is
// the agent's to judge.
func checkParams(method string, params json.RawMessage) *translate.Error {
	names, ok := required[method]
	if !ok {
		return nil
	}
	p := gjson.ParseBytes(params)
	if params != nil && !p.IsObject() {
		return translate.Errorf(translate.CodeInvalidParams, "%s params must be an object", method)
	}
	for _, name := range names {
		if !p.Get(name).Exists() {
			return translate.Errorf(translate.CodeInvalidParams, "%s requires %q in its params", method, name)
		}
	}
	if sid := p.Get("sessionId"); sid.Exists() && sid.Type != gjson.String {
		return translate.Errorf(translate.CodeInvalidParams, `%s: "sessionId" must be a string`, method)
	}
	switch method {
	case "initialize":
		if v := p.Get("protocolVersion"); v.Type != gjson.Number && v.Type != gjson.String {
			return translate.Errorf(translate.CodeInvalidParams, `initialize: "protocolVersion" must be an integer`)
		}
	case "session/new", "session/load", "session/resume":
		cwd := p.Get("cwd")
		if cwd.Type != gjson.String || !filepath.IsAbs(cwd.Str) {
			return translate.Errorf(translate.CodeInvalidParams, `%s: "cwd" must be an absolute path`, method)
		}
		if m := p.Get("mcpServers"); m.Exists() && !m.IsArray() {
			return translate.Errorf(translate.CodeInvalidParams, `%s: "mcpServers" must be an array`, method)
		}
	case "session/prompt":
		if !p.Get("prompt").IsArray() {
			return translate.Errorf(translate.CodeInvalidParams, `session/prompt: "prompt" must be an array of content blocks`)
		}
	}
	return nil
}
