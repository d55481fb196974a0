package codexapp

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// FromEditor handles one editor message.
func (t *translator) FromEditor(m translate.Msg) ([]translate.Out, error) {
	switch m.Kind {
	case translate.Request:
		return t.editorRequest(m), nil
	case translate.Notification:
		if m.Method == "session/cancel" {
			return t.cancel(translate.Get(m.Body, "sessionId").Str), nil
		}
		return nil, nil
	case translate.Response:
		return t.permissionAnswer(m)
	case translate.CancelRequest:
		for _, s := range t.sessions {
			if s.turn != nil && s.turn.ref == m.Ref {
				return t.cancel(s.id), nil
			}
		}
		return nil, nil
	case translate.Abandon:
		return t.abandon(m.Ref), nil
	case translate.LinkDown:
		t.calls.Clear()
		t.reqs = make(map[int64]*agentReq)
		t.sessions = make(map[string]*session)
		return nil, nil
	}
	return nil, nil
}

func (t *translator) editorRequest(m translate.Msg) []translate.Out {
	p := gjson.ParseBytes(m.Body)
	if m.Method != "initialize" && m.Method != "authenticate" && !t.initDone {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidRequest, "codex-app-server: %s before initialize: send initialize first", m.Method)}
	}
	switch m.Method {
	case "initialize":
		t.initRef, t.initWait = m.Ref, 1
		return []translate.Out{t.request("initialize", map[string]any{
			"clientInfo":   map[string]any{"name": "acp-bridge", "title": "acp-bridge", "version": "1"},
			"capabilities": map[string]any{"experimentalApi": true},
		}, &agentReq{kind: reqInitialize, ref: m.Ref})}
	case "authenticate":
		return []translate.Out{failf(m.Ref, translate.CodeAuthRequired, "codex-app-server: the bridge cannot log Codex in: %s", loginHint)}
	case "session/new":
		if t.needsAuth {
			return []translate.Out{failf(m.Ref, translate.CodeAuthRequired, "Codex is not logged in: %s", loginHint)}
		}
		params := map[string]any{"cwd": p.Get("cwd").Str}
		if t.opts.Model != "" {
			params["model"] = t.opts.Model
		}
		if pr := findMode(t.opts.Mode); pr != nil {
			params["approvalPolicy"], params["sandbox"] = pr.approval, pr.sandbox
		}
		if cfg := mcpConfig(p.Get("mcpServers")); cfg != nil {
			params["config"] = map[string]any{"mcp_servers": cfg}
		}
		return []translate.Out{t.request("thread/start", params, &agentReq{kind: reqThreadStart, ref: m.Ref, method: m.Method})}
	case "session/load", "session/resume":
		id := p.Get("sessionId").Str
		if id == "" {
			return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "%s: sessionId is missing", m.Method)}
		}
		params := map[string]any{"threadId": id}
		if cwd := p.Get("cwd").Str; cwd != "" {
			params["cwd"] = cwd
		}
		if m.Method == "session/resume" {
			params["excludeTurns"] = true
		}
		return []translate.Out{t.request("thread/resume", params, &agentReq{kind: reqThreadResume, ref: m.Ref, session: id, method: m.Method})}
	case "session/list":
		params := map[string]any{}
		if c := p.Get("cursor"); c.Type == gjson.String {
			params["cursor"] = c.Str
		}
		if cwd := p.Get("cwd").Str; cwd != "" {
			params["cwd"] = cwd
		}
		return []translate.Out{t.request("thread/list", params, &agentReq{kind: reqThreadList, ref: m.Ref})}
	case "session/close":
		id := p.Get("sessionId").Str
		var outs []translate.Out
		if s := t.sessions[id]; s != nil && s.turn != nil {
			outs = append(outs, t.cancel(id)...)
			if tu := s.turn; tu.id == "" || !tu.started {
				// Its interrupt is not done with: kept until the turn ends.
				t.closing[id] = s
			}
			outs = append(outs, t.endTurn(s, "cancelled")...)
		}
		delete(t.sessions, id)
		return append(outs, t.request("thread/unsubscribe", map[string]any{"threadId": id}, &agentReq{kind: reqUnsubscribe, ref: m.Ref, session: id}))
	case "session/prompt":
		return t.prompt(m.Ref, p)
	case "session/set_mode":
		s, errOut := t.known(m.Ref, p)
		if s == nil {
			return errOut
		}
		id := p.Get("modeId").Str
		if findMode(id) == nil {
			return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/set_mode: unknown mode %q: the modes are read-only, auto and full-access", id)}
		}
		s.mode, s.modeSent = id, false
		return []translate.Out{reply(m.Ref, struct{}{}), update(s.id, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": id})}
	case "session/set_model":
		s, errOut := t.known(m.Ref, p)
		if s == nil {
			return errOut
		}
		s.model, s.modelSent = p.Get("modelId").Str, false
		return []translate.Out{reply(m.Ref, struct{}{})}
	case "session/set_config_option":
		s, errOut := t.known(m.Ref, p)
		if s == nil {
			return errOut
		}
		value := p.Get("value").Str
		switch p.Get("configId").Str {
		case "mode":
			if findMode(value) == nil {
				return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/set_config_option: unknown mode %q: the modes are read-only, auto and full-access", value)}
			}
			s.mode, s.modeSent = value, false
		case "model":
			s.model, s.modelSent = value, false
		default:
			return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/set_config_option: unknown option %q: the options are mode and model", p.Get("configId").Str)}
		}
		return []translate.Out{reply(m.Ref, map[string]any{"configOptions": t.configOptions(s)})}
	}
	return []translate.Out{failf(m.Ref, translate.CodeMethodNotFound, "codex-app-server: method %q is not supported", m.Method)}
}

// known returns the session a request names, or the error to answer.
func (t *translator) known(ref translate.Ref, p gjson.Result) (*session, []translate.Out) {
	id := p.Get("sessionId").Str
	if s := t.sessions[id]; s != nil {
		return s, nil
	}
	return nil, []translate.Out{failf(ref, translate.CodeInvalidParams, "unknown sessionId %q: create it with session/new, or reopen it with session/load or session/resume", id)}
}

// mcpConfig turns ACP MCP servers into Codex's mcp_servers config.
func mcpConfig(servers gjson.Result) map[string]any {
	if !servers.IsArray() || len(servers.Array()) == 0 {
		return nil
	}
	cfg := map[string]any{}
	for _, s := range servers.Array() {
		name := s.Get("name").Str
		if name == "" {
			continue
		}
		headers := map[string]string{}
		for _, h := range s.Get("headers").Array() {
			headers[h.Get("name").Str] = h.Get("value").Str
		}
		if url := s.Get("url").Str; url != "" {
			c := map[string]any{"url": url}
			if len(headers) > 0 {
				c["http_headers"] = headers
			}
			cfg[name] = c
			continue
		}
		args := []string{}
		for _, a := range s.Get("args").Array() {
			args = append(args, a.Str)
		}
		env := map[string]string{}
		for _, e := range s.Get("env").Array() {
			env[e.Get("name").Str] = e.Get("value").Str
		}
		c := map[string]any{"command": s.Get("command").Str, "args": args}
		if len(env) > 0 {
			c["env"] = env
		}
		cfg[name] = c
	}
	return cfg
}

// prompt starts a turn.
func (t *translator) prompt(ref translate.Ref, p gjson.Result) []translate.Out {
	id := p.Get("sessionId").Str
	s := t.sessions[id]
	if s == nil {
		// A thread this connection has not opened (the translator is new
		// after a reconnect): Codex says whether it knows it.
		s = &session{id: id, mode: "", modeSent: true, modelSent: true}
		t.sessions[id] = s
	}
	if s.turn != nil {
		return []translate.Out{failf(ref, translate.CodeInvalidRequest, "session %s is already running a prompt: wait for its answer or send session/cancel", id)}
	}
	input, err := userInput(p.Get("prompt"))
	if err != nil {
		return []translate.Out{failf(ref, translate.CodeInvalidParams, "session/prompt: %v", err)}
	}
	params := map[string]any{"threadId": id, "input": input}
	if pr := findMode(s.mode); pr != nil && !s.modeSent {
		params["approvalPolicy"] = pr.approval
		params["sandboxPolicy"] = map[string]any{"type": pr.sandboxType}
		s.modeSent = true
	}
	if s.model != "" && !s.modelSent {
		params["model"] = s.model
		s.modelSent = true
	}
	tu := &turn{ref: ref, tools: map[string]*tool{}, streamed: map[string]bool{}, base: s.total}
	s.turn = tu
	return []translate.Out{t.request("turn/start", params, &agentReq{kind: reqTurnStart, ref: ref, session: id, turn: tu})}
}

// userInput maps ACP content blocks to Codex's UserInput: text as text,
// images as data URLs (or their URI), resources as text that names them.
func userInput(blocks gjson.Result) ([]map[string]any, error) {
	if !blocks.IsArray() {
		return nil, fmt.Errorf("prompt must be an array of content blocks")
	}
	var in []map[string]any
	text := func(s string) { in = append(in, map[string]any{"type": "text", "text": s}) }
	for _, b := range blocks.Array() {
		switch b.Get("type").Str {
		case "text":
			text(b.Get("text").Str)
		case "image":
			if data := b.Get("data").Str; data != "" {
				in = append(in, map[string]any{"type": "image", "url": "data:" + b.Get("mimeType").Str + ";base64," + data})
			} else if uri := b.Get("uri").Str; uri != "" {
				in = append(in, map[string]any{"type": "image", "url": uri})
			}
		case "resource_link":
			text(link(b.Get("name").Str, b.Get("uri").Str))
		case "resource":
			r := b.Get("resource")
			uri := r.Get("uri").Str
			if r.Get("text").Exists() {
				text(link("", uri) + "\n<context ref=\"" + uri + "\">\n" + r.Get("text").Str + "\n</context>")
			} else {
				text(link("", uri))
			}
		case "audio":
			return nil, fmt.Errorf("audio content is not supported by Codex (promptCapabilities.audio is false)")
		default:
			return nil, fmt.Errorf("unknown content block type %q", b.Get("type").Str)
		}
	}
	if len(in) == 0 {
		return nil, fmt.Errorf("the prompt is empty")
	}
	return in, nil
}

// link names a resource as codex-acp does: [@name](uri).
func link(name, uri string) string {
	if name == "" {
		name = uri
		if i := strings.LastIndexByte(uri, '/'); i >= 0 && i+1 < len(uri) {
			name = uri[i+1:]
		}
	}
	return "[@" + name + "](" + uri + ")"
}

// cancel cancels the session's running turn.
func (t *translator) cancel(id string) []translate.Out {
	s := t.sessions[id]
	if s == nil || s.turn == nil || s.turn.cancelled {
		return nil
	}
	tu := s.turn
	tu.cancelled = true
	outs := t.calls.Withdraw(func(a *approval) bool { return a.session == id }, func(a *approval) []translate.Out {
		return []translate.Out{answer(a.agentID, map[string]any{"decision": "cancel"})}
	})
	return append(outs, t.interrupt(s, tu)...)
}

// interrupt sends turn/interrupt for a cancelled turn whose id is known.
func (t *translator) interrupt(s *session, tu *turn) []translate.Out {
	if tu.id == "" || tu.interrupt {
		return nil
	}
	tu.interrupt = true
	return []translate.Out{t.request("turn/interrupt", map[string]any{"threadId": s.id, "turnId": tu.id},
		&agentReq{kind: reqInterrupt, session: s.id, turn: tu})}
}

// abandon forgets a request the engine answered itself.
func (t *translator) abandon(ref translate.Ref) []translate.Out {
	if ref == t.initRef {
		t.initRef = 0
	}
	for _, r := range t.reqs {
		if r.ref == ref {
			r.ref = 0
		}
	}
	for _, s := range t.sessions {
		if s.turn != nil && s.turn.ref == ref {
			tu := s.turn
			outs := t.cancel(s.id)
			s.turn = nil
			if tu.id != "" {
				s.drop(tu.id)
			}
			tu.ref = 0
			return outs
		}
	}
	return nil
}

func (s *session) drop(turnID string) {
	if s.dropped == nil {
		s.dropped = map[string]bool{}
	}
	s.dropped[turnID] = true
}

// permissionAnswer maps the editor's answer to a permission request back
// to the app-server's approval request.
func (t *translator) permissionAnswer(m translate.Msg) ([]translate.Out, error) {
	a, ok, err := t.calls.Take(m.Ref)
	if !ok {
		return nil, err
	}
	decision := json.RawMessage(`"decline"`)
	if m.Error == nil {
		outcome := translate.Get(m.Body, "outcome")
		switch {
		case outcome.Get("outcome").Str == "cancelled":
			decision = json.RawMessage(`"cancel"`)
		case outcome.Get("outcome").Str == "selected":
			switch id := outcome.Get("optionId").Str; {
			case id == optAllow:
				decision = json.RawMessage(`"accept"`)
			case id == a.alwaysID && a.always != nil:
				decision = a.always
			case id == optReject:
				decision = json.RawMessage(`"cancel"`)
			}
		}
	}
	return []translate.Out{answer(a.agentID, map[string]any{"decision": decision})}, nil
}

// Permission option ids, as codex-acp names them.
const (
	optAlways    = "approved-for-session"
	optAmendment = "approved-execpolicy-amendment"
	optAllow     = "approved"
	optReject    = "abort"
)
