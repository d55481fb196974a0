// Scenarios of what an agent must refuse or ignore: unknown methods and
// sessions, notifications, malformed JSON, invalid requests; and stdout
// holding only JSON messages.

package check

func scUnknownMethod(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	for _, method := range []string{"acp-check/no_such_method", "_acp_check/no_such_method"} {
		m, err := r.call(method, map[string]any{})
		if err != nil {
			return fail(nil, "%s", waitErr(method, err))
		}
		if c := m.Get("error.code"); !m.IsError() || c.Int() != -32601 {
			return fail([]int{m.N}, "%s was answered %s, want error -32601 (Method not found)", method, m.Get("error").Raw+m.Get("result").Raw)
		}
	}
	return pass("-32601 for an unknown method and an unknown extension method")
}

func scNotification(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	_, _ = r.newSession() // optional: an idle session to cancel
	// Whatever the setup drew from the agent is in before the window
	// opens: an unsolicited answer the agent sent after its initialize
	// answer is another scenario's finding (schema), not an answer to
	// these notifications.
	r.settle()
	from := len(r.messages())
	_, _ = r.notify("acp-check/notice", map[string]any{})
	_, _ = r.notify("_acp_check/notice", map[string]any{})
	if r.sid != "" {
		_, _ = r.notify("session/cancel", map[string]any{"sessionId": r.sid})
	}
	r.settle()
	for _, m := range r.messages()[from:] {
		if m.Out || !m.obj || m.method != "" {
			continue
		}
		// Anything without a method is an answer; one with no id, or an
		// id of no client request, can only answer a notification.
		if m.id == "" {
			return fail([]int{m.N}, "an answer without an id (%s): a notification was answered; notifications get no answer, not even an error", firstKey(m, "error", "result"))
		}
		if _, ours := r.methodOf(m.id); !ours {
			return fail([]int{m.N}, "a response that answers none of the client's requests: a notification was answered")
		}
	}
	return pass("no answer to three notifications")
}

func scMalformed(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	g, err := r.write([]byte(`{"jsonrpc":"2.0","id":99,"method":"session/new","params":{"cwd":`))
	if err != nil {
		return notRun("sending malformed JSON: %v", err)
	}
	m, err := r.sessionNew()
	if err != nil {
		return fail([]int{g.N}, "%s", waitErr("after a malformed line, session/new", err))
	}
	r.drain(r.opts.Quiet)
	var parse *Msg
	for _, x := range r.messages()[g.N:] {
		if !x.Out && x.IsError() && x.Get("error.code").Int() == -32700 {
			parse = &x
			break
		}
	}
	if parse == nil {
		return fail([]int{g.N, m.N}, "malformed JSON was not answered with error -32700 (Parse error)")
	}
	if parse.id != "null" {
		return fail([]int{g.N, parse.N}, "the -32700 answer has id %s, want null", parse.id)
	}
	if m.IsError() {
		return fail([]int{g.N, m.N}, "after the malformed line session/new failed: the agent did not keep working")
	}
	return pass("-32700 with id null, then session/new still worked")
}

func scInvalidRequest(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	g, err := r.write([]byte(`{"jsonrpc":"2.0","id":77,"method":42,"params":{}}`))
	if err != nil {
		return notRun("sending an invalid request: %v", err)
	}
	m, err := r.await(r.opts.Timeout, func(m Msg) bool { return m.IsResponse() && (m.id == "77" || m.id == "null" && m.IsError()) })
	if err != nil {
		return fail([]int{g.N}, "%s", waitErr("a request whose method is a number was not answered", err))
	}
	if c := m.Get("error.code").Int(); !m.IsError() || c != -32600 {
		return fail([]int{g.N, m.N}, "a request whose method is a number was answered %s, want error -32600 (Invalid Request)", m.Get("error").Raw+m.Get("result").Raw)
	}
	return pass("-32600")
}

func scUnknownSession(r *run) verdict {
	if _, err := r.initialize(); err != nil {
		return notRun("initialize failed: %v", err)
	}
	m, err := r.call("session/prompt", textPrompt("acp-check-no-such-session", r.opts.Prompt))
	if err != nil {
		return fail(nil, "%s", waitErr("a prompt for an unknown session", err))
	}
	if !m.IsError() {
		return fail([]int{m.N}, "a prompt for a session that was never created was served; it must be an error")
	}
	return pass("error %d", m.Get("error.code").Int())
}

// basicSession is the session schema and stdout-purity watch: initialize,
// session/new, one prompt to the end of its turn, settle.
func (r *run) basicSession() (verdict, bool) {
	if _, err := r.call("initialize", r.proto.initParams); err != nil {
		return notRun("initialize: %v", err), false
	}
	if _, err := r.newSession(); err == nil {
		if id, err := r.request("session/prompt", textPrompt(r.sid, r.opts.Prompt)); err == nil {
			_, _ = r.await(r.opts.Timeout, func(m Msg) bool { return r.proto.turnEnded(r, m, id) })
		}
	}
	r.settle()
	return verdict{}, true
}

func scStdoutPurity(r *run) verdict {
	if v, ok := r.basicSession(); !ok {
		return v
	}
	var bad []int
	for _, m := range r.messages() {
		if !m.Out && !m.obj {
			bad = append(bad, m.N)
		}
	}
	if len(bad) > 0 {
		return fail(bad, "%d line(s) on the agent's stdout are not JSON-RPC messages; stdout must carry only ACP (log to stderr)", len(bad))
	}
	return pass("%d messages, all JSON objects", len(r.messages()))
}
