package acpv2

import (
	"encoding/json"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// initialized maps the agent's v2 initialize answer to v1's shape. It does
// not check the version: Negotiator and the engine do.
func (t *Translator) initialized(ref translate.Ref, result json.RawMessage) []translate.Out {
	o := decode(result)
	if o == nil {
		return []translate.Out{fail(ref, translate.Errorf(translate.CodeInternalError,
			"the agent's initialize answer is not a JSON object (%.200s), so it does not speak ACP v2: pick its dialect with --dialect (see 'acp-bridge dialects')", result))}
	}
	if v := gjson.GetBytes(o["protocolVersion"], "@this"); v.Raw != strconv.Itoa(ProtocolVersion) {
		return []translate.Out{fail(ref, translate.Errorf(translate.CodeInternalError,
			"the agent answered protocolVersion %s to a request for ACP v2: run it with --agent-protocol %s, or with the dialect that matches it", v.Raw, v.Raw))}
	}
	v1 := object{}
	for k, v := range o {
		switch k {
		case "protocolVersion":
			v1[k] = json.RawMessage("1")
		case "info":
			v1["agentInfo"] = v
		case "capabilities":
			v1["agentCapabilities"] = agentCapabilities(decode(v))
		case "authMethods":
			v1[k] = authMethods(v)
		default:
			v1[k] = v // _meta and extensions
		}
	}
	if _, ok := v1["agentCapabilities"]; !ok {
		v1["agentCapabilities"] = agentCapabilities(nil)
	}
	return []translate.Out{reply(ref, marshal(v1))}
}

// agentCapabilities maps v2's capabilities to v1's agentCapabilities. v2's
// session group (null: no sessions) carries a baseline of new, list,
// resume, close, prompt and cancel; v1 loadSession is served by a resume
// with replay. Object markers become booleans; _meta stays.
func agentCapabilities(c object) json.RawMessage {
	v1 := object{
		"loadSession":        json.RawMessage("false"),
		"promptCapabilities": json.RawMessage(`{"image":false,"audio":false,"embeddedContext":false}`),
		"mcpCapabilities":    json.RawMessage(`{"http":false,"sse":false}`),
	}
	if meta, ok := c["_meta"]; ok && !isNull(meta, true) {
		v1["_meta"] = meta
	}
	if auth, ok := c["auth"]; ok && !isNull(auth, true) {
		v1["auth"] = auth
	}
	s := decode(c["session"])
	if s == nil {
		return marshal(v1)
	}
	v1["loadSession"] = json.RawMessage("true")
	sessionCaps := object{"list": json.RawMessage("{}"), "resume": json.RawMessage("{}"), "close": json.RawMessage("{}")}
	for _, k := range []string{"delete", "additionalDirectories"} {
		if m := decode(s[k]); m != nil {
			sessionCaps[k] = marshal(m)
		}
	}
	v1["sessionCapabilities"] = marshal(sessionCaps)
	if p := decode(s["prompt"]); p != nil {
		pc := object{}
		for _, k := range []string{"image", "audio", "embeddedContext"} {
			pc[k] = marker(p[k])
		}
		if meta, ok := p["_meta"]; ok && !isNull(meta, true) {
			pc["_meta"] = meta
		}
		v1["promptCapabilities"] = marshal(pc)
	}
	if m := decode(s["mcp"]); m != nil {
		// stdio is a v1 baseline; sse has no v2 form.
		v1["mcpCapabilities"] = marshal(object{"http": marker(m["http"]), "sse": json.RawMessage("false")})
	}
	return marshal(v1)
}

// marker turns a v2 object marker into a v1 boolean.
func marker(raw json.RawMessage) json.RawMessage {
	if decode(raw) != nil {
		return json.RawMessage("true")
	}
	return json.RawMessage("false")
}

// authMethods maps v2 auth methods ({type:"agent", methodId, …}) to v1's
// ({id, …}); the terminal type has the same form in both.
func authMethods(raw json.RawMessage) json.RawMessage {
	var methods []object
	if json.Unmarshal(raw, &methods) != nil {
		return json.RawMessage("[]")
	}
	out := []object{}
	for _, m := range methods {
		switch m.str("type") {
		case "agent", "":
			if id, ok := m["methodId"]; ok {
				m["id"] = id
				delete(m, "methodId")
			}
			delete(m, "type")
			out = append(out, m)
		case "terminal":
			if id, ok := m["methodId"]; ok {
				m["id"] = id
				delete(m, "methodId")
			}
			// v2 lists the environment as [{name, value}], v1 as an object.
			var env []struct{ Name, Value string }
			if raw, ok := m["env"]; ok && json.Unmarshal(raw, &env) == nil {
				vars := make(map[string]string, len(env))
				for _, v := range env {
					vars[v.Name] = v.Value
				}
				m["env"] = marshal(vars)
			}
			out = append(out, m)
		}
	}
	return marshal(out)
}
