// Scenarios of what an agent advertises: set_mode, its requests to the
// client, session load, resume, list and close, authentication, and the
// capabilities themselves.

package check

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/tidwall/gjson"
)

func scSetMode(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	nm, err := r.newSession()
	if err != nil {
		return notRun("session/new failed: %v", err)
	}
	modes := nm.Get("result.modes.availableModes").Array()
	if len(modes) == 0 {
		return skip("the session advertises no modes")
	}
	// The first mode other than the current one: the last ones are often
	// modes an agent may refuse (bypassPermissions needs a launch flag).
	current := nm.Get("result.modes.currentModeId").Str
	mode := modes[0].Get("id").Str
	for _, m := range modes {
		if id := m.Get("id").Str; id != current {
			mode = id
			break
		}
	}
	m, err := r.call("session/set_mode", map[string]any{"sessionId": r.sid, "modeId": mode})
	if err != nil {
		return fail(nil, "%s", waitErr("session/set_mode", err))
	}
	if m.IsError() {
		return fail([]int{m.N}, "session/set_mode to the advertised mode %q failed", mode)
	}
	if !m.Get("result").IsObject() {
		return fail([]int{m.N}, "session/set_mode answered result %s, want an object ({} at least)", m.Get("result").Raw)
	}
	return pass("mode %q set", mode)
}

func scClientRequests(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	from := len(r.messages())
	for _, text := range []string{r.opts.FilePrompt, r.opts.PermissionPrompt} {
		id, err := r.request("session/prompt", textPrompt(r.sid, text))
		if err != nil {
			return notRun("sending the prompt: %v", err)
		}
		if _, err := r.response(id, r.opts.Timeout); err != nil {
			return notRun("%s", waitErr(fmt.Sprintf("the prompt %q", text), err))
		}
	}
	r.settle()
	offered := map[string]bool{"fs/read_text_file": true, "session/request_permission": true}
	var bad []int
	var probs []string
	n := 0
	for _, m := range r.messages()[from:] {
		if m.Out || !m.IsRequest() || m.method == "acp-check/barrier" {
			continue
		}
		n++
		var p []string
		if !offered[m.method] && !strings.HasPrefix(m.method, "_") {
			p = append(p, fmt.Sprintf("%s was called although the client did not advertise it", m.method))
		}
		if sid := m.Get("params.sessionId"); sid.Str != r.sid {
			p = append(p, fmt.Sprintf("sessionId is %s, not this session's %q", orAbsent(sid), r.sid))
		}
		if path := m.Get("params.path"); path.Exists() && !filepath.IsAbs(path.Str) {
			p = append(p, fmt.Sprintf("path %s is not absolute", path.Raw))
		}
		if len(p) > 0 {
			bad = append(bad, m.N)
			probs = append(probs, fmt.Sprintf("#%d %s: %s", m.N, m.method, strings.Join(p, "; ")))
		}
	}
	if len(bad) > 0 {
		return fail(bad, "%s", strings.Join(probs, " | "))
	}
	if n == 0 {
		return skip("the agent sent no request to the client for %q or %q", r.opts.FilePrompt, r.opts.PermissionPrompt)
	}
	return pass("%d request(s) to the client, all well formed", n)
}

// promptOnce sends the prompt and waits for its answer and a quiet period.
func (r *run) promptOnce() (Msg, error) {
	m, err := r.call("session/prompt", textPrompt(r.sid, r.opts.Prompt))
	if err == nil {
		r.settle()
	}
	return m, err
}

// sessionParams are the params of session/load and session/resume.
func (r *run) sessionParams() map[string]any {
	return map[string]any{"sessionId": r.sid, "cwd": r.opts.Cwd, "mcpServers": []any{}}
}

// reopen opens a session, plays one prompt in it and calls method
// (session/load, session/resume) on it, which the agent advertises with
// capability in agentCapabilities, as advertised reads it. It returns the
// transcript index of the call's first message and its answer; ok false
// means v is the scenario's verdict.
func (r *run) reopen(method, capability string, advertised func(gjson.Result) bool) (from int, m Msg, v verdict, ok bool) {
	if v, ok := r.setup(); !ok {
		return 0, m, v, false
	}
	if !advertised(r.init.Get("agentCapabilities." + capability)) {
		return 0, m, skip("the agent does not advertise %s", capability), false
	}
	if _, err := r.promptOnce(); err != nil {
		return 0, m, notRun("%s", waitErr("the prompt before "+method, err)), false
	}
	from = len(r.messages())
	m, err := r.call(method, r.sessionParams())
	if err != nil {
		return from, m, fail(nil, "%s", waitErr(method, err)), false
	}
	if m.IsError() {
		return from, m, fail([]int{m.N}, "%s of the session just used failed although %s is advertised", method, capability), false
	}
	return from, m, verdict{}, true
}

func scSessionLoad(r *run) verdict {
	from, m, v, ok := r.reopen("session/load", "loadSession", gjson.Result.Bool)
	if !ok {
		return v
	}
	if res := m.Get("result"); res.Exists() && res.Type != gjson.Null && !res.IsObject() {
		return fail([]int{m.N}, "session/load answered result %s, want an object", res.Raw)
	}
	replayed := r.updatesBetween(r.sid, from-1, m.N)
	if len(replayed) == 0 {
		return fail([]int{m.N}, "session/load replayed no update before its answer: the editor shows an empty conversation (the agent must replay the whole conversation, then answer)")
	}
	return pass("%d update(s) replayed before the answer", len(replayed))
}

func scSessionResume(r *run) verdict {
	from, m, v, ok := r.reopen("session/resume", "sessionCapabilities.resume", gjson.Result.Exists)
	if !ok {
		return v
	}
	if replayed := r.turnContentBetween(r.sid, from-1, m.N); len(replayed) > 0 {
		return fail(append(replayed, m.N), "session/resume replayed %d update(s) of the conversation; unlike session/load it must not (the editor would show it twice)", len(replayed))
	}
	p, err := r.call("session/prompt", textPrompt(r.sid, r.opts.Prompt))
	if err != nil {
		return fail(nil, "%s", waitErr("a prompt on the resumed session", err))
	}
	if p.IsError() {
		return fail([]int{m.N, p.N}, "a prompt on the resumed session failed")
	}
	return pass("resumed without replay; the session serves prompts")
}

func scSessionList(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	if !r.init.Get("agentCapabilities.sessionCapabilities.list").Exists() {
		return skip("the agent does not advertise sessionCapabilities.list")
	}
	params := map[string]any{}
	var lines []int
	for page := 0; page < 20; page++ {
		m, err := r.call("session/list", params)
		if err != nil {
			return fail(lines, "%s", waitErr("session/list", err))
		}
		lines = append(lines, m.N)
		if m.IsError() {
			return fail(lines, "session/list failed although sessionCapabilities.list is advertised")
		}
		ss := m.Get("result.sessions")
		if !ss.IsArray() {
			return fail(lines, "session/list answered sessions %s, want an array", orAbsent(ss))
		}
		for _, s := range ss.Array() {
			if s.Get("sessionId").Str != r.sid {
				continue
			}
			if cwd := s.Get("cwd").Str; cwd != r.opts.Cwd {
				return fail(lines, "session/list gives the session cwd %s, want %q", orAbsent(s.Get("cwd")), r.opts.Cwd)
			}
			return pass("the session is listed with its cwd")
		}
		next := m.Get("result.nextCursor")
		if next.Type != gjson.String {
			break
		}
		params = map[string]any{"cursor": next.Str}
	}
	return fail(lines, "session/list does not list the session %q just created", r.sid)
}

func scSessionClose(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	if !r.init.Get("agentCapabilities.sessionCapabilities.close").Exists() {
		return skip("the agent does not advertise sessionCapabilities.close")
	}
	m, err := r.call("session/close", map[string]any{"sessionId": r.sid})
	if err != nil {
		return fail(nil, "%s", waitErr("session/close", err))
	}
	if m.IsError() {
		return fail([]int{m.N}, "session/close of an open session failed although sessionCapabilities.close is advertised")
	}
	p, err := r.call("session/prompt", textPrompt(r.sid, r.opts.Prompt))
	if err != nil {
		return fail([]int{m.N}, "%s", waitErr("a prompt for the closed session", err))
	}
	if !p.IsError() {
		return fail([]int{m.N, p.N}, "a prompt for the closed session was served; session/close frees the session")
	}
	return pass("closed; a prompt for it is refused (error %d)", p.Get("error.code").Int())
}

func scAuth(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	var methods []string
	for _, m := range r.init.Get("authMethods").Array() {
		t := m.Get("type").Str
		if t == "" {
			t = "agent"
		}
		methods = append(methods, fmt.Sprintf("%s (%s)", m.Get("id").Str, t))
	}
	m, err := r.call("session/new", map[string]any{"cwd": r.opts.Cwd, "mcpServers": []any{}})
	if err != nil {
		return fail(nil, "%s", waitErr("session/new", err))
	}
	required := m.IsError() && m.Get("error.code").Int() == -32000
	switch {
	case !required && len(methods) == 0:
		return pass("no authentication asked for")
	case !required:
		return pass("auth methods %s advertised; session/new works without authenticate", strings.Join(methods, ", "))
	case len(methods) == 0:
		return fail([]int{m.N}, "session/new answered auth_required but authMethods is empty: an editor has no way to authenticate")
	}
	if r.authMethod() == "" {
		return pass("auth methods %s; session/new answered auth_required, and check can run none of them itself", strings.Join(methods, ", "))
	}
	if _, err := r.newSession(); err != nil {
		return fail(nil, "session/new answered auth_required; %v", err)
	}
	return pass("auth methods %s; session/new answered auth_required, and worked after authenticate with %q", strings.Join(methods, ", "), r.authMethod())
}

func scCapabilities(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	var caps []string
	flatten("agentCapabilities", r.init.Get("agentCapabilities"), &caps)
	for i, c := range caps {
		caps[i] = strings.TrimPrefix(c, "agentCapabilities.")
	}
	if len(caps) == 0 {
		return pass("nothing beyond the baseline (prompts of text and resource links)")
	}
	return pass("%s", strings.Join(caps, ", "))
}
