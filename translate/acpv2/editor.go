package acpv2

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// FromEditor implements translate.Translator.
func (t *Translator) FromEditor(m translate.Msg) ([]translate.Out, error) {
	switch m.Kind {
	case translate.Request:
		return t.request(m)
	case translate.Notification:
		// session/cancel has the same shape in both versions, and
		// extension notifications pass through.
		return []translate.Out{{Kind: translate.Frame, Body: translate.NotificationFrame(m.Method, clone(m.Body))}}, nil
	case translate.Response:
		id, ok := t.calls[m.Ref]
		if !ok {
			return nil, fmt.Errorf("acp-v2: editor answered unknown call %d", m.Ref)
		}
		delete(t.calls, m.Ref)
		delete(t.callRefs, key(id))
		if m.Error != nil {
			return []translate.Out{{Kind: translate.Frame, Body: translate.ErrorFrame(id, clone(m.Error))}}, nil
		}
		// A permission answer has the same shape in both versions.
		result := clone(m.Body)
		if result == nil {
			result = json.RawMessage("null")
		}
		return []translate.Out{{Kind: translate.Frame, Body: translate.ResultFrame(id, result)}}, nil
	case translate.CancelRequest, translate.Abandon:
		id, ok := t.byRef[m.Ref]
		if !ok {
			return nil, nil
		}
		if m.Kind == translate.Abandon {
			// The engine answered the request itself: forget it, and the
			// turn it was, so its idle update answers nothing.
			delete(t.byRef, m.Ref)
			if p := t.requests[id]; p != nil {
				p.abandoned = true
				if s := t.sessions[p.session]; p.kind == reqPrompt && s != nil && s.turn != nil && s.turn.ref == m.Ref {
					s.turn = nil
				}
			}
		}
		params := []byte(`{"requestId":` + strconv.FormatUint(id, 10) + `}`)
		return []translate.Out{{Kind: translate.Frame, Body: translate.NotificationFrame("$/cancel_request", params)}}, nil
	case translate.LinkUp, translate.Tick:
		return nil, nil
	case translate.LinkDown:
		*t = *New()
		return nil, nil
	}
	return nil, fmt.Errorf("acp-v2: unexpected editor message kind %d", m.Kind)
}

// request translates one editor request.
func (t *Translator) request(m translate.Msg) ([]translate.Out, error) {
	p := &pending{ref: m.Ref}
	params := clone(m.Body)
	method := m.Method
	var err error
	switch m.Method {
	case "initialize":
		p.kind = reqInitialize
		params = initializeParams(params)
	case "authenticate":
		method = "auth/login"
	case "session/new":
		p.kind = reqNew
		params, err = sessionParams(params)
	case "session/load":
		p.kind, method = reqLoad, "session/resume"
		params, err = sessionParams(params)
		if err == nil {
			o := decode(params)
			o["replayFrom"] = json.RawMessage(`{"type":"start"}`)
			params = marshal(o)
			p.session = o.str("sessionId")
			// The editor shows the replay in a fresh view: what it was
			// sent of the session before does not count.
			s := t.session(p.session)
			s.replaying = true
			s.messages, s.tools = make(map[string]*message), make(map[string]*tool)
			s.msgOrder, s.toolOrder = nil, nil
		}
	case "session/resume":
		p.kind = reqResume
		params, err = sessionParams(params)
		if err == nil {
			p.session = decode(params).str("sessionId")
		}
	case "session/list":
		p.kind = reqList
	case "session/set_config_option":
		p.kind = reqConfig
		// v1 tags a boolean value and leaves a value id untagged; v2
		// tags both.
		if o := decode(params); o != nil {
			if _, tagged := o["type"]; !tagged {
				o["type"] = quoted("id")
				params = marshal(o)
			}
		}
	case "session/set_mode", "session/set_model", "fs/read_text_file", "fs/write_text_file":
		return []translate.Out{fail(m.Ref, translate.Errorf(translate.CodeMethodNotFound,
			"%s is not available: the agent speaks ACP v2, which has no session modes (use its config options instead)", m.Method))}, nil
	case "session/prompt":
		p.kind = reqPrompt
		p.session = decode(params).str("sessionId")
		if p.session == "" {
			return []translate.Out{fail(m.Ref, translate.Errorf(translate.CodeInvalidParams, "session/prompt needs a sessionId"))}, nil
		}
		s := t.session(p.session)
		if s.turn != nil {
			return []translate.Out{fail(m.Ref, translate.Errorf(translate.CodeInvalidRequest,
				"session %s already has a prompt running: wait for its answer or cancel it", p.session))}, nil
		}
		id, out := t.send(p, method, params)
		s.turn = &turn{ref: m.Ref, id: id}
		return []translate.Out{out}, nil
	}
	if err != nil {
		return []translate.Out{fail(m.Ref, translate.Errorf(translate.CodeInvalidParams, "%s: %v", m.Method, err))}, nil
	}
	_, out := t.send(p, method, params)
	return []translate.Out{out}, nil
}

// initializeParams turns a v1 initialize into v2's: clientInfo becomes info
// (required in v2), clientCapabilities becomes capabilities without fs and
// terminal, which v2 dropped; the editor's fs and terminal, when it has
// either, go under capabilities._meta["acp-bridge"] (see
// translate.MetaV1ClientCapabilities): the agent's calls of them are relayed
// to the editor, so an agent that is itself a bridge in front of a v1 agent
// (acp-bridge serve) can offer them. Other members (_meta, extensions)
// stay.
func initializeParams(raw json.RawMessage) json.RawMessage {
	o := decode(raw)
	if o == nil {
		o = object{}
	}
	o["protocolVersion"] = json.RawMessage(strconv.Itoa(ProtocolVersion))
	info := decode(o["clientInfo"])
	if info == nil || info.str("name") == "" {
		info = object{"name": quoted("acp-bridge")}
	}
	if _, ok := info["version"]; !ok {
		info["version"] = quoted("unknown")
	}
	delete(info, "title") // v2's Implementation has none
	o["info"] = marshal(info)
	delete(o, "clientInfo")
	caps := object{}
	v1 := object{}
	if old := decode(o["clientCapabilities"]); old != nil {
		for k, v := range old {
			switch k {
			case "fs", "terminal":
				// Gone from v2 (its agents use MCP servers instead), but
				// announced under _meta, for an agent that relays them.
				r := gjson.ParseBytes(v)
				if r.Type == gjson.True || r.Get("readTextFile").Type == gjson.True || r.Get("writeTextFile").Type == gjson.True {
					v1[k] = v
				}
			case "auth":
				// v1's boolean terminal is v2's object marker.
				auth := decode(v)
				if auth == nil {
					break
				}
				if string(auth["terminal"]) == "true" {
					auth["terminal"] = json.RawMessage("{}")
				} else {
					delete(auth, "terminal")
				}
				caps[k] = marshal(auth)
			default:
				caps[k] = v
			}
		}
	}
	if len(v1) > 0 {
		caps["_meta"] = withOwnMeta(caps["_meta"], translate.MetaV1ClientCapabilities, marshal(v1))
	}
	o["capabilities"] = marshal(caps)
	delete(o, "clientCapabilities")
	return marshal(o)
}

// withOwnMeta returns the _meta object meta with key set under its
// "acp-bridge" member, every other member kept. A meta that is not an
// object is replaced.
func withOwnMeta(meta json.RawMessage, key string, value json.RawMessage) json.RawMessage {
	m := decode(meta)
	if m == nil {
		m = object{}
	}
	own := decode(m["acp-bridge"])
	if own == nil {
		own = object{}
	}
	own[key] = value
	m["acp-bridge"] = marshal(own)
	return marshal(m)
}

// sessionParams turns the params of session/new, load or resume into v2's:
// a stdio MCP server (untagged in v1) gains "type":"stdio".
func sessionParams(raw json.RawMessage) (json.RawMessage, error) {
	o := decode(raw)
	if o == nil {
		return nil, fmt.Errorf("params must be an object")
	}
	var servers []json.RawMessage
	if raw, ok := o["mcpServers"]; ok && json.Unmarshal(raw, &servers) == nil {
		for i, s := range servers {
			so := decode(s)
			if so == nil {
				continue
			}
			if _, tagged := so["type"]; !tagged {
				so["type"] = quoted("stdio")
				servers[i] = marshal(so)
			}
		}
		o["mcpServers"] = marshal(servers)
	}
	return marshal(o), nil
}
