package acp

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// acpKeys are the camelCase property names of the ACP v1 schema. The
// field-names rule renames only their snake_case forms, so that keys an
// agent owns (a tool's rawInput, _meta) keep their spelling.
var acpKeys = []string{
	"additionalDirectories",
	"agentCapabilities",
	"agentInfo",
	"authMethods",
	"availableCommands",
	"availableModes",
	"clientCapabilities",
	"clientInfo",
	"configId",
	"configOptions",
	"currentModeId",
	"currentValue",
	"elicitationId",
	"embeddedContext",
	"exitCode",
	"exitStatus",
	"lastModified",
	"loadSession",
	"mcpCapabilities",
	"mcpServers",
	"messageId",
	"methodId",
	"mimeType",
	"modeId",
	"newText",
	"nextCursor",
	"oldText",
	"optionId",
	"outputByteLimit",
	"promptCapabilities",
	"protocolVersion",
	"rawInput",
	"rawOutput",
	"readTextFile",
	"requestId",
	"requestedSchema",
	"sessionCapabilities",
	"sessionId",
	"sessionUpdate",
	"stopReason",
	"terminalId",
	"toolCall",
	"toolCallId",
	"updatedAt",
	"writeTextFile",
}

// snakeToCamel maps "session_id" to "sessionId", for every ACP key.
var snakeToCamel = func() map[string]string {
	m := make(map[string]string, len(acpKeys))
	for _, k := range acpKeys {
		var b strings.Builder
		for _, r := range k {
			if 'A' <= r && r <= 'Z' {
				b.WriteByte('_')
				r += 'a' - 'A'
			}
			b.WriteRune(r)
		}
		m[b.String()] = k
	}
	return m
}()

// opaque are the keys whose values belong to the agent or the tool, not to
// ACP: the field-names rule does not look inside them.
var opaque = map[string]bool{"_meta": true, "rawInput": true, "rawOutput": true, "raw_input": true, "raw_output": true, "data": true}

// atTypes maps the "@type" update shapes (docs/agent-protocols.md#at-type-updates)
// to the v1 sessionUpdate variants.
var atTypes = map[string]string{
	"agent_message_text": "agent_message_chunk",
	"agent_thought_text": "agent_thought_chunk",
	"user_message_text":  "user_message_chunk",
	"tool_call_start":    "tool_call",
	"tool_call_complete": "tool_call_update",
	"plan_update":        "plan",
}

// camelCase rewrites the snake_case ACP keys and "@type" updates of one JSON
// value. It returns the new bytes and what it changed, or "" (and msg
// untouched) when there was nothing to change.
func camelCase(msg []byte) ([]byte, string) {
	d := json.NewDecoder(bytes.NewReader(msg))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return msg, ""
	}
	changed := map[string]bool{}
	v = rename(v, changed)
	if len(changed) == 0 {
		return msg, ""
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return msg, ""
	}
	what := make([]string, 0, len(changed))
	for k := range changed {
		what = append(what, k)
	}
	sort.Strings(what)
	return bytes.TrimRight(buf.Bytes(), "\n"), strings.Join(what, ", ")
}

func rename(v any, changed map[string]bool) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			nk := k
			if c, ok := snakeToCamel[k]; ok {
				if _, dup := v[c]; !dup {
					nk = c
					changed[k+"→"+c] = true
				}
			}
			if !opaque[nk] {
				x = rename(x, changed)
			}
			out[nk] = x
		}
		if t, ok := out["@type"].(string); ok && out["sessionUpdate"] == nil {
			kind := t
			if k, ok := atTypes[t]; ok {
				kind = k
			}
			delete(out, "@type")
			out["sessionUpdate"] = kind
			if strings.HasSuffix(t, "_text") {
				if text, ok := out["text"]; ok && out["content"] == nil {
					delete(out, "text")
					out["content"] = map[string]any{"type": "text", "text": text}
				}
			}
			if t == "tool_call_complete" && out["status"] == nil {
				out["status"] = "completed"
			}
			changed["@type "+t+"→sessionUpdate "+kind] = true
		}
		return out
	case []any:
		for i, x := range v {
			v[i] = rename(x, changed)
		}
	}
	return v
}
