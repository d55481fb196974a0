package bridge

import (
	"encoding/json"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

type initState int

const (
	initNone    initState = iota // not asked, or the last initialize failed
	initPending                  // asked, the agent has not answered
	initDone
)

// clientCaps are the editor capabilities the engine itself acts on.
type clientCaps struct {
	fsRead, fsWrite bool
}

// protocolVersion is the only ACP version the bridge speaks to editors.
const protocolVersion = 1

// initialize opens the control link (if it is not open) and relays the
// editor's initialize to it. Whatever version the editor asks for, the agent
// is asked for 1: the bridge relays v1 (acp-spec.md §4.1, §18).
func (e *engine) initialize(req *request, params json.RawMessage) {
	switch e.init {
	case initPending:
		e.fail(req, translate.Errorf(translate.CodeInvalidRequest, "initialize is already in progress"))
		return
	case initDone:
		e.fail(req, translate.Errorf(translate.CodeInvalidRequest, "the connection is already initialized"))
		return
	}
	asked := gjson.GetBytes(params, "protocolVersion")
	if asked.Raw != "1" {
		params = withKey(params, "protocolVersion", json.RawMessage("1"))
	}
	e.log.Info("editor initialize", "asked_version", asked.Raw, "answering", protocolVersion,
		"editor", gjson.GetBytes(params, "clientInfo.name").Str)
	e.initParams = append(json.RawMessage(nil), params...)
	e.editorCaps = clientCaps{
		fsRead:  gjson.GetBytes(params, "clientCapabilities.fs.readTextFile").Bool(),
		fsWrite: gjson.GetBytes(params, "clientCapabilities.fs.writeTextFile").Bool(),
	}
	if e.control == nil || e.control.down != nil {
		e.control = e.newLink(Spawn{})
	}
	e.init = initPending
	req.link = e.control
	e.armTimeout(req)
	e.feed(e.control, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: "initialize", Body: e.initParams})
}

// initialized rewrites the agent's initialize answer into the bridge's:
// protocol version 1, agentInfo naming the bridge, and the backend's own
// agentInfo kept under _meta["acp-bridge"]. Capabilities pass unchanged:
// the translator already advertises only what its dialect can deliver.
func (e *engine) initialized(result json.RawMessage) (json.RawMessage, *translate.Error) {
	if v := gjson.GetBytes(result, "protocolVersion"); v.Raw != "1" {
		e.init = initNone
		return nil, translate.Errorf(translate.CodeInternalError,
			"the agent answered protocolVersion %s; acp-bridge relays ACP v1 only", v.Raw)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(result, &m); err != nil || m == nil {
		e.init = initNone
		return nil, translate.Errorf(translate.CodeInternalError, "the agent's initialize answer is not an object")
	}
	backend := m["agentInfo"]
	name := gjson.GetBytes(backend, "title").Str
	if name == "" {
		name = gjson.GetBytes(backend, "name").Str
	}
	if name == "" {
		name = e.b.AgentName
	}
	version := e.b.Version
	if version == "" {
		version = "dev"
	}
	title := "acp-bridge"
	if name != "" {
		title += " → " + name
	}
	m["protocolVersion"] = json.RawMessage("1")
	m["agentInfo"], _ = json.Marshal(map[string]string{"name": "acp-bridge", "title": title, "version": version})
	if _, ok := m["authMethods"]; !ok {
		m["authMethods"] = json.RawMessage("[]")
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	own := map[string]any{"agent": e.b.AgentName, "dialect": e.b.Dialect.Name}
	if backend != nil {
		own["agentInfo"] = backend
	}
	meta["acp-bridge"], _ = json.Marshal(own)
	m["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(m)
	if err != nil {
		return nil, translate.Errorf(translate.CodeInternalError, "%v", err)
	}
	e.init = initDone
	return out, nil
}

// withKey returns the object obj with key set to value (other members kept).
func withKey(obj json.RawMessage, key string, value json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	m[key] = value
	out, _ := json.Marshal(m)
	return out
}
