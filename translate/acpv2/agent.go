package acpv2

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// FromAgent implements translate.Translator.
func (t *Translator) FromAgent(frame []byte) ([]translate.Out, error) {
	env, perr := translate.ParseEnvelope(frame)
	if perr != nil {
		if env.ID != nil && env.Method != "" {
			return []translate.Out{{Kind: translate.Frame, Body: translate.ErrorFrame(clone(env.ID), perr.JSON())}}, perr
		}
		return nil, fmt.Errorf("acp-v2: unusable agent frame: %w", perr)
	}
	switch {
	case env.IsResponse():
		return t.response(env)
	case env.IsRequest():
		return t.agentRequest(env)
	case env.Method == "$/cancel_request":
		ref, ok := t.callRefs[key(json.RawMessage(gjson.GetBytes(env.Params, "requestId").Raw))]
		if !ok {
			return nil, nil
		}
		return []translate.Out{{Kind: translate.CancelCall, Ref: ref}}, nil
	case env.Method == "session/update":
		return t.update(env.Params), nil
	}
	// elicitation/complete and extension notifications pass through.
	return []translate.Out{{Kind: translate.Notify, Method: env.Method, Body: clone(env.Params)}}, nil
}

// response handles the agent's answer to one of the translator's requests.
func (t *Translator) response(env translate.Envelope) ([]translate.Out, error) {
	n, err := strconv.ParseUint(string(env.ID), 10, 64)
	p := t.requests[n]
	if err != nil || p == nil {
		return nil, fmt.Errorf("acp-v2: agent answered unknown request id %s", env.ID)
	}
	delete(t.requests, n)
	if p.abandoned {
		if p.kind == reqLoad {
			t.session(p.session).replaying = false
		}
		return nil, nil
	}
	delete(t.byRef, p.ref)
	if env.Error != nil {
		if p.kind == reqPrompt {
			if s := t.sessions[p.session]; s != nil && s.turn != nil && s.turn.id == n {
				s.turn = nil
			}
		}
		if p.kind == reqLoad {
			t.session(p.session).replaying = false
		}
		return []translate.Out{{Kind: translate.Fail, Ref: p.ref, Body: errorObject(env.Error)}}, nil
	}
	result := clone(env.Result)
	switch p.kind {
	case reqInitialize:
		return t.initialized(p.ref, result), nil
	case reqPrompt:
		// The acknowledgement: held until the idle state_update ends the turn.
		s := t.sessions[p.session]
		if s == nil || s.turn == nil || s.turn.id != n {
			return nil, nil // ended already (an idle update came first)
		}
		s.turn.acked = true
		s.turn.meta = clone(json.RawMessage(gjson.GetBytes(result, "_meta").Raw))
		return nil, nil
	case reqNew:
		o := decode(result)
		if o == nil {
			return []translate.Out{fail(p.ref, translate.Errorf(translate.CodeInternalError,
				"the agent answered session/new with %.200s, not an object with a sessionId", result))}, nil
		}
		id := o.str("sessionId")
		t.session(id)
		return t.sessionResult(p.ref, id, o), nil
	case reqLoad, reqResume:
		t.session(p.session).replaying = false
		o := decode(result)
		if o == nil {
			o = object{}
		}
		return t.sessionResult(p.ref, p.session, o), nil
	case reqList:
		// The same shape, but for SessionInfo's v2-only members, which v1
		// keeps as unknown fields.
	case reqConfig:
		o := decode(result)
		if o != nil {
			renameConfigOptions(o)
			result = marshal(o)
		}
	}
	return []translate.Out{reply(p.ref, result)}, nil
}

// sessionResult answers session/new, load or resume: configOptions renamed
// to v1's shape, and v2's availableCommands, which v1 sends as an update,
// sent as one after the answer.
func (t *Translator) sessionResult(ref translate.Ref, sessionID string, o object) []translate.Out {
	renameConfigOptions(o)
	commands, ok := o["availableCommands"]
	delete(o, "availableCommands")
	outs := []translate.Out{reply(ref, marshal(o))}
	if ok && sessionID != "" {
		u := object{"sessionUpdate": quoted("available_commands_update"), "availableCommands": commands}
		if out, ok := t.availableCommands(sessionID, u); ok {
			outs = append(outs, out...)
		}
	}
	return outs
}

// agentRequest handles a request of the agent: permission requests in v1
// shape, v1 client methods carried as extensions (V1ClientMethodPrefix) as
// the v1 methods they carry, anything else (elicitation, extensions)
// passed through.
func (t *Translator) agentRequest(env translate.Envelope) ([]translate.Out, error) {
	params := clone(env.Params)
	if env.Method == "session/request_permission" {
		var notes []translate.Out
		params, notes = t.permission(params)
		if params == nil {
			e := translate.Errorf(translate.CodeInvalidParams, "session/request_permission params must be an object with a sessionId")
			return []translate.Out{{Kind: translate.Frame, Body: translate.ErrorFrame(clone(env.ID), e.JSON())}}, e
		}
		return append(notes, t.call(env.ID, env.Method, params)), nil
	}
	if v1, ok := strings.CutPrefix(env.Method, translate.V1ClientMethodPrefix); ok && (strings.HasPrefix(v1, "fs/") || strings.HasPrefix(v1, "terminal/")) {
		// A v1 client method, carried as v2's extension by an agent that
		// read the editor's under _meta (acp-bridge serve fronting a v1
		// agent): the editor's own.
		return []translate.Out{t.call(env.ID, v1, params)}, nil
	}
	return []translate.Out{t.call(env.ID, env.Method, params)}, nil
}

func (t *Translator) call(id json.RawMessage, method string, params json.RawMessage) translate.Out {
	t.nextCall++
	ref := t.nextCall
	t.calls[ref] = clone(id)
	t.callRefs[key(id)] = ref
	return translate.Out{Kind: translate.Call, Ref: ref, Method: method, Body: params}
}

// permission turns a v2 permission request (title, description, a subject)
// into v1's (a toolCall). A tool-call subject gives the toolCall; a command
// subject becomes an execute tool call showing the command; the prompt's
// title and description fill what the subject leaves out.
func (t *Translator) permission(raw json.RawMessage) (json.RawMessage, []translate.Out) {
	o := decode(raw)
	if o == nil || o.str("sessionId") == "" {
		return nil, nil
	}
	var notes []translate.Out
	title, description := o.str("title"), o.str("description")
	subject := decode(o["subject"])
	tc := object{}
	switch subject.str("type") {
	case "tool_call":
		if inner := decode(subject["toolCall"]); inner != nil {
			var more []translate.Out
			tc, more = toolFields(inner, true)
			notes = append(notes, more...)
		}
	case "command":
		tc["kind"] = quoted("execute")
		tc["rawInput"] = marshal(object{"command": subject["command"], "cwd": subject["cwd"]})
		if id := subject.str("toolCallId"); id != "" {
			tc["toolCallId"] = quoted(id)
		}
		if title == "" {
			title = subject.str("command")
		}
	case "":
	default:
		notes = append(notes, note(NoteUnrepresentable, "permission subject of type %q has no v1 form; the prompt shows its title", subject.str("type")))
	}
	if _, ok := tc["toolCallId"]; !ok {
		t.nextCall++ // a unique id for a prompt about no tool call
		tc["toolCallId"] = quoted("acp-bridge-permission-" + strconv.FormatUint(uint64(t.nextCall), 10))
	}
	if _, ok := tc["title"]; !ok && title != "" {
		tc["title"] = quoted(title)
	}
	if _, ok := tc["content"]; !ok && description != "" {
		tc["content"] = marshal([]object{{"type": quoted("content"), "content": marshal(object{"type": quoted("text"), "text": quoted(description)})}})
	}
	out := object{"sessionId": o["sessionId"], "toolCall": marshal(tc)}
	var options []object
	if json.Unmarshal(o["options"], &options) == nil {
		for _, opt := range options {
			switch k := opt.str("kind"); k {
			case "allow_once", "allow_always", "reject_once", "reject_always":
			default:
				// v1's kinds are closed: an unknown one is offered as a
				// one-time choice of the same leaning.
				opt["kind"] = quoted("allow_once")
				if strings.Contains(k, "reject") {
					opt["kind"] = quoted("reject_once")
				}
				notes = append(notes, note(NoteFallback, "permission option kind %q sent as %s", k, opt.str("kind")))
			}
		}
		out["options"] = marshal(options)
	}
	if meta, ok := o["_meta"]; ok {
		out["_meta"] = meta
	}
	return marshal(out), notes
}

// errorObject maps a v2 error to v1's: the code stays; typed data gives the
// message its words; data keeps the agent's.
func errorObject(raw json.RawMessage) json.RawMessage {
	obj := translate.ErrorObject(raw)
	code := gjson.GetBytes(obj, "code").Int()
	msg := gjson.GetBytes(obj, "message").Str
	data := gjson.GetBytes(obj, "data")
	switch {
	case code == -32022 || data.Get("supported").IsArray() && data.Get("requested").Exists():
		return translate.Errorf(translate.CodeInternalError,
			"the agent does not support the requested ACP version %s (it supports %s): %s; run it with --agent-protocol set to one it supports",
			data.Get("requested").Raw, data.Get("supported").Raw, msg).With("agentError", json.RawMessage(obj)).JSON()
	case code == translate.CodeResourceNotFound && data.Get("sessionId").Type == gjson.String:
		e := &translate.Error{Code: translate.CodeResourceNotFound, Message: "Resource not found",
			Reason: fmt.Sprintf("the agent has no session %q (%s): start a new session", data.Get("sessionId").Str, msg)}
		return e.With("agentError", json.RawMessage(obj)).With("sessionId", data.Get("sessionId").Str).JSON()
	}
	return obj
}
