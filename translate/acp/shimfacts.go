// Stable ACP v1 schema facts the shim's rules check against: stop
// reasons, methods and their results, and the variants of a turn's
// updates.

package acp

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"
)

// Stable ACP v1 schema facts the rules check against.
var (
	stopReasons = map[string]bool{
		"end_turn": true, "max_tokens": true, "max_turn_requests": true, "refusal": true, "cancelled": true,
	}
	objectResult = map[string]bool{
		"initialize": true, "authenticate": true, "logout": true,
		"session/new": true, "session/load": true, "session/resume": true, "session/close": true,
		"session/list": true, "session/delete": true, "session/set_mode": true,
		"session/set_config_option": true, "session/prompt": true,
		"session/fork": true, "session/set_model": true,
	}
)

// knownMethod reports whether ACP defines method as an agent method.
func knownMethod(m string) bool {
	return objectResult[m]
}

// unknownTo reports whether errObj, the agent's answer to method (which
// ACP does not define), says the agent does not know it. Any error does for
// a method outside ACP's namespace rules; an extension method (_name) may
// exist and fail for its own reasons, so its error must name the method or
// say it is unknown.
func unknownTo(method string, errObj []byte) bool {
	if !strings.HasPrefix(method, "_") {
		return true
	}
	msg := strings.ToLower(gjson.GetBytes(errObj, "message").Str)
	if strings.Contains(msg, strings.ToLower(method)) {
		return true
	}
	for _, w := range []string{"unknown", "not found", "not implemented", "unsupported", "no such method", "unhandled"} {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// stableVariant reports whether kind is a sessionUpdate variant of the
// stable ACP v1 schema. (A switch: it runs on every update.)
func stableVariant(kind string) bool {
	switch kind {
	case "user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
		"tool_call", "tool_call_update", "plan",
		"available_commands_update", "current_mode_update",
		"config_option_update", "session_info_update", "usage_update":
		return true
	}
	return false
}

// turnVariant reports whether kind belongs to a turn; the others
// (commands, mode, info, usage) may come between turns.
func turnVariant(kind string) bool {
	switch kind {
	case "user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
		"tool_call", "tool_call_update", "plan":
		return true
	}
	return false
}

// fastContentBlock reports that params' first "content" member is, in the
// compact form every SDK writes, an object whose first member is a string
// "type": a content block, without walking the JSON. false means "look
// properly".
func fastContentBlock(params []byte) bool {
	i := bytes.Index(params, []byte(`content":`))
	return i > 0 && params[i-1] == '"' && bytes.HasPrefix(params[i+len(`content":`):], []byte(`{"type":"`))
}
