package bridge

import (
	"bytes"
	"encoding/json"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

type initState int

// editorInit is where the editor's initialize stands. The core and the v2
// part (v2editor) share it: the engine holds it, the part a pointer to it,
// and both read and write it on the loop.
type editorInit struct {
	state initState
	// req is the initialize in flight while state is initPending.
	req *request
	// params are the editor's initialize params, replayed on new links.
	params json.RawMessage
	// result is the (rewritten) answer of the first initialize, given
	// again to a repeated one on translating dialects.
	result json.RawMessage
	// err is why the last initialize failed ("" if it did not).
	err string
}

// succeeded records the answer to the editor's initialize: the connection
// is initialized.
func (in *editorInit) succeeded(result json.RawMessage) {
	in.state = initDone
	in.req = nil
	in.err = ""
	in.result = result
}

const (
	initNone    initState = iota // not asked, or the last initialize failed
	initPending                  // asked, the agent has not answered
	initDone
)

// initialize handles the editor's initialize. The first goes to the control
// link (dialled now). A repeated one is answered, never refused (a proxy is no
// stricter than what it fronts, and the official conformance harness
// re-initializes): a relayed ACP agent answers it itself, other dialects get
// the first answer again. Whatever version the editor asks for, the translator
// is handed version 1: the engine speaks v1 (ACP spec, Initialization: version
// negotiation), and an ACP link's translator negotiates the agent's own
// version.
func (e *engine) initialize(req *request, params json.RawMessage) {
	asked := gjson.GetBytes(params, "protocolVersion")
	if asked.Raw != "1" && !e.v2.trying && !e.v2.on {
		params = withKey(params, "protocolVersion", json.RawMessage("1"))
	}
	answering := any(protocolVersion)
	if e.v2.trying || e.v2.on {
		answering = "the agent's" // relayed if it answers 2 (v2relay.go)
	}
	e.log.Info("editor initialize", "asked_version", asked.Raw, "answering", answering,
		"editor", gjson.GetBytes(params, "clientInfo.name").Str, "again", e.init.state == initDone)
	caps := params
	if e.v2.trying {
		// A v2 editor's initialize goes out as written; what the editor
		// serves is what the Front's translation announces (v2 has no fs,
		// but v1's members beside v2's may claim it).
		caps = e.v2.v1Params
	}
	e.editorCaps = clientCaps{
		fsRead:  gjson.GetBytes(caps, "clientCapabilities.fs.readTextFile").Bool(),
		fsWrite: gjson.GetBytes(caps, "clientCapabilities.fs.writeTextFile").Bool(),
	}
	if e.init.state == initDone && !e.b.Dialect.Relay {
		e.answer(req, bytes.Clone(e.init.result))
		return
	}
	e.init.params = bytes.Clone(params)
	l, err := e.sup.ensureControl()
	if err != nil {
		e.fail(req, err)
		return
	}
	if e.init.state != initDone {
		e.init.state = initPending
		e.init.req = req
	}
	req.link = l
	e.armTimeout(req)
	e.feed(l, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: "initialize", Body: e.init.params})
}

// protocolVersion is the ACP version the engine speaks, to agents and to
// editors; a v2 editor gets a front that translates (v2front.go).
const protocolVersion = 1

// clientCaps are the editor capabilities the engine itself acts on.
type clientCaps struct {
	fsRead, fsWrite bool
}

// initialized rewrites the agent's initialize answer into the bridge's:
// protocol version 1, and the bridge identifying itself under
// _meta["acp-bridge"]. A relayed ACP agent keeps its own agentInfo (clients
// switch on agentInfo.name, and the relay must be transparent); behind a
// translating dialect the editor's agent is the bridge, so agentInfo is the
// bridge's and the backend's moves to _meta["acp-bridge"].agentInfo.
// Capabilities pass unchanged: a translator advertises only what its dialect
// can deliver.
func (e *engine) initialized(l *link, result json.RawMessage) (json.RawMessage, *translate.Error) {
	if e.v2.trying || e.v2.on {
		if out, ok := e.v2.v2Initialized(l, result); ok {
			return out, nil
		}
	}
	if v := gjson.GetBytes(result, "protocolVersion"); v.Raw != "1" {
		return nil, versionError(v, e.b.Dialect.Name)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(result, &m); err != nil || m == nil {
		return nil, translate.Errorf(translate.CodeInternalError,
			"the agent's initialize answer is not a JSON object, so it does not speak ACP v1: pick its dialect with --dialect (see 'acp-bridge dialects')")
	}
	version := e.b.Version
	if version == "" {
		version = "dev"
	}
	// editorProtocol is the ACP version of the editor hop (a v2 editor's
	// front rewrites it to 2), agentProtocol that of the agent hop when
	// the agent speaks ACP itself (other dialects name their protocol): the
	// version its translator negotiated, or v1 for a plain relay.
	own := map[string]any{"name": "acp-bridge", "version": version, "agent": e.b.AgentName, "dialect": e.b.Dialect.Name,
		"editorProtocol": protocolVersion}
	if v := agentProtocol(l); v != 0 {
		own["agentProtocol"] = v
		e.log.Info("agent initialized", "agent_protocol", v)
	} else if e.b.Dialect.Relay {
		own["agentProtocol"] = protocolVersion
	}
	if backend, ok := m["agentInfo"]; !ok || !e.b.Dialect.Relay {
		title := "acp-bridge"
		name := gjson.GetBytes(backend, "title").Str
		if name == "" {
			name = gjson.GetBytes(backend, "name").Str
		}
		if name == "" {
			name = e.b.AgentName
		}
		if name != "" {
			title += " → " + name
		}
		if ok {
			own["agentInfo"] = backend
		}
		m["agentInfo"], _ = json.Marshal(map[string]string{"name": "acp-bridge", "title": title, "version": version})
	}
	if _, ok := m["authMethods"]; !ok {
		m["authMethods"] = json.RawMessage("[]")
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	meta["acp-bridge"], _ = json.Marshal(own)
	m["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(m)
	if err != nil {
		return nil, translate.Errorf(translate.CodeInternalError, "acp-bridge could not rewrite the initialize answer: %v", err)
	}
	e.init.succeeded(out)
	return out, nil
}

// agentProtocol is the ACP version the link's agent hop speaks, when its
// translator negotiated one (an ACP agent); 0 otherwise.
func agentProtocol(l *link) int {
	if l == nil {
		return 0
	}
	if n, ok := l.tr.(interface{ AgentProtocol() int }); ok {
		return n.AgentProtocol()
	}
	return 0
}

// versionError explains an initialize answer with a version other than 1,
// naming the dialect that would fit when the answer shows it.
func versionError(v gjson.Result, dialect string) *translate.Error {
	switch {
	case !v.Exists():
		return translate.Errorf(translate.CodeInternalError,
			"the agent's initialize answer has no protocolVersion, so it does not speak ACP v1 as dialect %s expects: pick its dialect with --dialect (see 'acp-bridge dialects')", dialect)
	case v.Type == gjson.String && len(v.Str) > 2 && v.Str[:2] == "0.":
		return translate.Errorf(translate.CodeInternalError,
			"the agent answered protocolVersion %s: it speaks the original Zed ACP 0.0.x, not ACP v1; use --dialect acp-v0", v.Raw)
	}
	return translate.Errorf(translate.CodeInternalError,
		"the agent answered protocolVersion %s, and acp-bridge relays ACP v1 only: use an agent release that speaks v1, or the dialect that matches it (see 'acp-bridge dialects')", v.Raw)
}

// repeatRefused reports whether req is a v1 editor's repeated initialize,
// sent once the connection was initialized (failRaw).
func (e *engine) repeatRefused(req *request) bool {
	return req.method == "initialize" && req.id != nil && e.init.state == initDone && req != e.init.req &&
		e.init.result != nil && e.v2.front == nil && !e.v2.on && !e.v2.trying
}

// initFailed records a failed initialize so the editor may send another,
// and so that what it pipelined behind it is answered with the cause.
func (e *engine) initFailed(req *request, errObj json.RawMessage) {
	if e.init.state != initPending || req != e.init.req {
		return // a repeated initialize failed: the connection stays initialized
	}
	e.init.state = initNone
	e.init.req = nil
	e.init.err = errorMessage(errObj)
}

// notInitialized is the answer to a request sent before initialize
// succeeded; initErr is why the last initialize failed ("" if none did).
func notInitialized(method, initErr string) *translate.Error {
	if initErr != "" {
		// The cause is the agent's, not the editor's request: -32603.
		return translate.Errorf(translate.CodeInternalError,
			"initialize failed (%s), so %s cannot be served: send initialize again", initErr, method)
	}
	return translate.Errorf(translate.CodeInvalidRequest, "the first request must be initialize, not %s", method)
}

// releaseHeld handles the messages held while initialize was pending, once
// it no longer is: after a success they are served in order; after a
// failure requests are answered at once with its cause (and a held
// initialize starts a new attempt, behind which the rest are held again).
func (e *engine) releaseHeld() {
	e.v2.releaseV2Held()
	e.v2.releaseFrontReplies()
	// A v2 editor's held messages are the front's translations; the tap
	// saw the editor's own when they arrived.
	e.v2.viaFront = e.v2.front != nil
	defer func() { e.v2.viaFront = false }()
	for len(e.held) > 0 && e.init.state != initPending {
		frame := e.held[0]
		e.held[0] = nil
		e.held = e.held[1:]
		e.fromEditor(frame)
	}
	if len(e.held) == 0 {
		e.held = nil
	}
}

// errorMessage returns the message of a JSON-RPC error object.
func errorMessage(errObj json.RawMessage) string {
	if m := gjson.GetBytes(errObj, "message").Str; m != "" {
		return m
	}
	return string(errObj)
}

// withKey returns the object obj with key set to value, other members kept
// as the agent wrote them: the key's value is replaced in place when obj has
// the key once, else the member is added at the end. Order, spacing and
// escapes stay (fidelity: a relayed update with a renamed session is the
// agent's bytes but for the id), and it costs a scan of obj rather than a
// decode and encode: an aliased session's every update is rewritten so.
// What is not a valid object, or names the key more than once (a reader
// keeps the last), is rebuilt whole, the key set once.
func withKey(obj json.RawMessage, key string, value json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(obj)
	if len(trimmed) < 2 || trimmed[0] != '{' || !gjson.ValidBytes(trimmed) {
		return withKeyRebuilt(obj, key, value)
	}
	var found gjson.Result
	n, members := 0, 0
	gjson.ParseBytes(trimmed).ForEach(func(k, v gjson.Result) bool {
		members++
		if k.String() == key {
			n++
			found = v
		}
		return true
	})
	switch {
	case n == 1 && found.Index > 0 && found.Index+len(found.Raw) <= len(trimmed):
		out := make([]byte, 0, len(trimmed)+len(value))
		out = append(out, trimmed[:found.Index]...)
		out = append(out, value...)
		return append(out, trimmed[found.Index+len(found.Raw):]...)
	case n == 0:
		end := bytes.LastIndexByte(trimmed, '}')
		out := make([]byte, 0, len(trimmed)+len(key)+len(value)+4)
		out = append(out, trimmed[:end]...)
		if members > 0 {
			out = append(out, ',')
		}
		out = append(out, mustJSON(key)...)
		out = append(out, ':')
		out = append(out, value...)
		return append(out, '}')
	}
	return withKeyRebuilt(obj, key, value)
}

// withKeyRebuilt is withKey by decoding and encoding obj.
func withKeyRebuilt(obj json.RawMessage, key string, value json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	m[key] = value
	out, _ := json.Marshal(m)
	return out
}
