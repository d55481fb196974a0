package acpv0

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/acp-bridge/acp-bridge/translate"
)

// FromEditor implements translate.Translator.
func (t *translator) FromEditor(m translate.Msg) ([]translate.Out, error) {
	switch m.Kind {
	case translate.Request:
		return t.editorRequest(m), nil
	case translate.Notification:
		if m.Method == "session/cancel" {
			var p struct {
				SessionID string `json:"sessionId"`
			}
			if json.Unmarshal(m.Body, &p) == nil && p.SessionID != "" && p.SessionID == t.session && !t.closed {
				return t.cancelTurn(), nil
			}
		}
		// Unknown notifications, and cancels for other sessions, are
		// ignored (receivers may ignore notifications they do not know).
		return nil, nil
	case translate.Response:
		return t.editorResponse(m)
	case translate.CancelRequest:
		// The legacy protocol cancels only the whole turn.
		if t.turn != nil && t.turn.ref == m.Ref {
			return t.cancelTurn(), nil
		}
		return nil, nil
	case translate.Abandon:
		return t.abandon(m.Ref), nil
	case translate.LinkUp, translate.LinkDown, translate.Tick:
		// One link per translator: a lost link ends it, and the engine
		// has answered what was pending. Nothing to do.
		return nil, nil
	}
	return nil, fmt.Errorf("acp-v0: unexpected editor input kind %d", m.Kind)
}

func (t *translator) editorRequest(m translate.Msg) []translate.Out {
	switch m.Method {
	case "initialize":
		return t.initialize(m)
	case "authenticate":
		return t.authenticate(m)
	case "session/new":
		return t.newSession(m)
	case "session/prompt":
		return t.prompt(m)
	case "session/close":
		return t.closeSession(m)
	}
	return []translate.Out{failf(m.Ref, translate.CodeMethodNotFound, "%s", notImplemented(m.Method))}
}

func (t *translator) initialize(m translate.Msg) []translate.Out {
	if t.init != initNone {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidRequest, "initialize was already sent on this agent connection")}
	}
	t.init = initPending
	_, frame := t.sendAgent(reqInitialize, m.Ref, mInitialize, marshal(struct {
		ProtocolVersion string `json:"protocolVersion"`
	}{t.protocolVersion}))
	return []translate.Out{frame}
}

// initialized handles the agent's answer to the legacy initialize: it answers
// the editor's initialize (unless abandoned) and any session/new queued
// behind it.
func (t *translator) initialized(req *agentRequest, result, errObj json.RawMessage) []translate.Out {
	var failure json.RawMessage
	var r struct {
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
		IsAuthenticated *bool           `json:"isAuthenticated"`
	}
	var version string
	switch {
	case errObj != nil:
		failure = passError(errObj)
	case json.Unmarshal(result, &r) != nil || r.ProtocolVersion == nil:
		failure = translate.Errorf(translate.CodeInternalError, "the agent's initialize result is not a legacy 0.0.x InitializeResponse (no protocolVersion): %.200s", result).JSON()
	case json.Unmarshal(r.ProtocolVersion, &version) != nil:
		failure = translate.Errorf(translate.CodeInternalError, "the agent answered protocolVersion %s, which is not a legacy 0.0.x version: it speaks ACP v1 or later, so configure dialect \"acp\" instead of \"acp-v0\"", r.ProtocolVersion).JSON()
	case !isLegacyVersion(version):
		failure = translate.Errorf(translate.CodeInternalError, "the agent answered protocolVersion %q; dialect acp-v0 speaks only the original Zed ACP 0.0.x (Gemini CLI 0.1.13–0.1.20 with --experimental-acp)", version).JSON()
	}
	var outs []translate.Out
	if failure != nil {
		t.init = initFailed
		t.initErr = failure
		if !req.abandoned {
			outs = append(outs, fail(req.ref, failure))
		}
		for _, q := range t.queued {
			outs = append(outs, fail(q.ref, failure))
		}
		t.queued = nil
		return outs
	}
	t.init = initDone
	t.agentVersion = version
	if !req.abandoned {
		outs = append(outs, reply(req.ref, t.initializeResult(r.IsAuthenticated == nil || *r.IsAuthenticated)))
	}
	for _, q := range t.queued {
		outs = append(outs, t.openSession(q))
	}
	t.queued = nil
	return outs
}

type authMethod struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

// initializeResult is the ACP v1 initialize answer. The engine then forces
// protocolVersion 1 and replaces agentInfo with the bridge's own, moving
// this one under _meta; it is kept generic because nothing in the legacy
// handshake names the agent.
func (t *translator) initializeResult(authenticated bool) any {
	methods := []authMethod{}
	if !authenticated {
		// isAuthenticated:false → one agent-type method whose authenticate
		// runs the legacy login (docs/agent-protocols.md#acp-v0-mapping).
		methods = append(methods, authMethod{
			ID:          legacyLoginID,
			Name:        "Log in",
			Description: "Runs the browser login of the legacy agent (for Gemini CLI: Google sign-in); it completes once the login has finished in a browser on the agent's machine.",
		})
	}
	type promptCapabilities struct {
		Image           bool `json:"image"`
		Audio           bool `json:"audio"`
		EmbeddedContext bool `json:"embeddedContext"`
	}
	type sessionCapabilities struct {
		// Close is a presence object (ACP spec, Initialization: capabilities):
		// {} means supported.
		Close struct{} `json:"close"`
	}
	type agentCapabilities struct {
		LoadSession         bool                `json:"loadSession"`
		PromptCapabilities  promptCapabilities  `json:"promptCapabilities"`
		SessionCapabilities sessionCapabilities `json:"sessionCapabilities"`
	}
	type implementation struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	return struct {
		ProtocolVersion   int               `json:"protocolVersion"`
		AgentCapabilities agentCapabilities `json:"agentCapabilities"`
		AuthMethods       []authMethod      `json:"authMethods"`
		AgentInfo         implementation    `json:"agentInfo"`
	}{
		ProtocolVersion: 1,
		AgentCapabilities: agentCapabilities{
			// Embedded text resources are inlined into text chunks; blobs,
			// images and audio have no legacy form.
			PromptCapabilities: promptCapabilities{EmbeddedContext: true},
			// session/close ends the session's agent process (the engine
			// closes the link once the translator has answered).
		},
		AuthMethods: methods,
		AgentInfo:   implementation{Name: "acp-v0 agent", Version: t.agentVersion},
	}
}

func (t *translator) authenticate(m translate.Msg) []translate.Out {
	var p struct {
		MethodID string `json:"methodId"`
	}
	if err := json.Unmarshal(m.Body, &p); err != nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "authenticate params: %s", describeJSONError(err))}
	}
	if p.MethodID != legacyLoginID {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown auth method %q: the legacy agent offers only %q", p.MethodID, legacyLoginID)}
	}
	switch t.init {
	case initFailed:
		return []translate.Out{fail(m.Ref, t.initErr)}
	case initNone, initPending:
		return []translate.Out{failf(m.Ref, translate.CodeInvalidRequest, "authenticate before initialize completed")}
	}
	_, frame := t.sendAgent(reqAuthenticate, m.Ref, mAuthenticate, nil)
	return []translate.Out{frame}
}

func (t *translator) newSession(m translate.Msg) []translate.Out {
	if m.Session == "" {
		return []translate.Out{failf(m.Ref, translate.CodeInternalError, "session/new reached the acp-v0 translator without a session id from the engine")}
	}
	if t.session != "" || len(t.queued) > 0 {
		return []translate.Out{failf(m.Ref, translate.CodeInternalError, "a legacy agent process holds one conversation; this one already serves a session (the engine must open a new agent link per session)")}
	}
	var p struct {
		Cwd *string `json:"cwd"`
	}
	if err := json.Unmarshal(m.Body, &p); err != nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/new params: %s", describeJSONError(err))}
	}
	if p.Cwd == nil || !filepath.IsAbs(*p.Cwd) {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/new needs an absolute cwd")}
	}
	q := queuedSession{ref: m.Ref, session: m.Session, cwd: filepath.Clean(*p.Cwd)}
	switch t.init {
	case initNone:
		return []translate.Out{failf(m.Ref, translate.CodeInternalError, "session/new before initialize on this agent connection")}
	case initPending:
		t.queued = append(t.queued, q)
		return nil
	case initFailed:
		return []translate.Out{fail(m.Ref, t.initErr)}
	}
	return []translate.Out{t.openSession(q)}
}

// openSession binds the translator to the session. The legacy agent creates
// its conversation lazily on the first sendUserMessage
// (docs/agent-protocols.md#acp-v0-behaviour), so nothing goes to the agent.
func (t *translator) openSession(q queuedSession) translate.Out {
	if t.session != "" {
		return failf(q.ref, translate.CodeInternalError, "a legacy agent process holds one conversation; this one already serves a session")
	}
	t.session = q.session
	t.cwd = q.cwd
	return reply(q.ref, struct {
		SessionID string `json:"sessionId"`
	}{q.session})
}

// checkSession returns a Fail when params do not name this translator's open
// session.
func (t *translator) checkSession(ref translate.Ref, sessionID string) []translate.Out {
	if sessionID == "" || sessionID != t.session || t.closed {
		return []translate.Out{failf(ref, translate.CodeInvalidParams, "unknown session %q", sessionID)}
	}
	return nil
}

func (t *translator) closeSession(m translate.Msg) []translate.Out {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(m.Body, &p)
	if outs := t.checkSession(m.Ref, p.SessionID); outs != nil {
		return outs
	}
	var outs []translate.Out
	if t.turn != nil {
		// Closing implies cancelling (ACP spec, session/close); the engine closes
		// the link right after, so the legacy answer would never arrive.
		outs = t.cancelTurn()
		tr := t.turn
		t.forgetTurn()
		outs = append(outs, reply(tr.ref, stopReason("cancelled")))
	}
	t.closed = true
	return append(outs, reply(m.Ref, struct{}{}))
}

func stopReason(reason string) any {
	return struct {
		StopReason string `json:"stopReason"`
	}{reason}
}

func (t *translator) prompt(m translate.Msg) []translate.Out {
	var p struct {
		SessionID string            `json:"sessionId"`
		Prompt    []json.RawMessage `json:"prompt"`
	}
	if err := json.Unmarshal(m.Body, &p); err != nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/prompt params: %s", describeJSONError(err))}
	}
	if outs := t.checkSession(m.Ref, p.SessionID); outs != nil {
		return outs
	}
	if p.Prompt == nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/prompt needs a prompt")}
	}
	if t.turn != nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidRequest, "a prompt is already running in this session: wait for its response or send session/cancel first (the legacy agent would silently abort the running turn)")}
	}
	chunks, err := promptChunks(p.Prompt)
	if err != nil {
		return []translate.Out{fail(m.Ref, err.JSON())}
	}
	id, frame := t.sendAgent(reqPrompt, m.Ref, mSendUserMessage, marshal(struct {
		Chunks []chunk `json:"chunks"`
	}{chunks}))
	t.turn = &turn{ref: m.Ref, agentID: id}
	return []translate.Out{frame}
}

// turnEnded handles the agent's answer to sendUserMessage, which arrives when
// the whole turn is over (docs/agent-protocols.md#acp-v0-methods).
func (t *translator) turnEnded(req *agentRequest, id uint64, errObj json.RawMessage) []translate.Out {
	if req.abandoned || t.turn == nil || t.turn.agentID != id {
		return nil
	}
	tr := t.turn
	t.turn = nil
	// The agent cannot use confirmations it still waits for once its turn
	// is over; close them so neither side keeps waiting.
	outs := t.cancelPermissions()
	switch {
	case tr.cancelRequested:
		// After cancelSendMessage the legacy turn ends with an error
		// ("This operation was aborted") or null; ACP wants a successful
		// cancelled stop (ACP spec, Prompt Turn: cancellation).
		outs = append(outs, reply(tr.ref, stopReason("cancelled")))
	case errObj != nil:
		// e.g. Gemini's {"code":429,"message":"Rate limit exceeded…"}:
		// code, message and data pass through.
		outs = append(outs, fail(tr.ref, passError(errObj)))
	default:
		outs = append(outs, reply(tr.ref, stopReason("end_turn")))
	}
	return outs
}

// cancelTurn sends cancelSendMessage and answers every pending confirmation
// with "cancel", as session/cancel requires (ACP spec, Prompt Turn:
// cancellation; docs/agent-protocols.md#acp-v0-mapping). It sends nothing when
// the running turn was already cancelled, or when no turn runs and a cancel is
// in flight; a cancel still in flight from before the running turn started
// does not count.
func (t *translator) cancelTurn() []translate.Out {
	var outs []translate.Out
	var skip bool
	if t.turn != nil {
		skip = t.turn.cancelRequested || (t.cancelInFlight != nil && *t.cancelInFlight > t.turn.agentID)
	} else {
		skip = t.cancelInFlight != nil
	}
	if !skip {
		id, frame := t.sendAgent(reqCancel, 0, mCancelSendMessage, nil)
		t.cancelInFlight = &id
		outs = append(outs, frame)
	}
	if t.turn != nil {
		t.turn.cancelRequested = true
	}
	return append(outs, t.cancelPermissions()...)
}

// cancelPermissions withdraws every outstanding permission Call (in Ref
// order): $/cancel_request to the editor, the tool call closed as failed
// (the agent sends no update after a cancel,
// docs/agent-protocols.md#acp-v0-captured-session), and the
// outcome "cancel" to the agent.
func (t *translator) cancelPermissions() []translate.Out {
	return t.calls.Withdraw(func(c *editorCall) bool { return c.kind == callPermission }, func(c *editorCall) []translate.Out {
		outs := []translate.Out{t.toolStatus(c.toolID, "failed")}
		return append(outs, answerAgent(c.agentID, confirmationResult{c.toolID, "cancel"})...)
	})
}

// forgetTurn drops the running turn; the legacy answer to its
// sendUserMessage, when it comes, is swallowed.
func (t *translator) forgetTurn() {
	if req := t.requests[t.turn.agentID]; req != nil {
		req.abandoned = true
	}
	t.turn = nil
}

// abandon forgets an editor request the engine answered itself.
func (t *translator) abandon(ref translate.Ref) []translate.Out {
	if t.turn != nil && t.turn.ref == ref {
		// Tell the agent to stop working on it, too.
		outs := t.cancelTurn()
		t.forgetTurn()
		return outs
	}
	for i, q := range t.queued {
		if q.ref == ref {
			t.queued = slices.Delete(t.queued, i, i+1)
			return nil
		}
	}
	for _, req := range t.requests {
		if req.ref == ref && (req.kind == reqInitialize || req.kind == reqAuthenticate) {
			req.abandoned = true
		}
	}
	return nil
}

// editorResponse handles the editor's answer to a Call.
func (t *translator) editorResponse(m translate.Msg) ([]translate.Out, error) {
	c, ok, err := t.calls.Take(m.Ref)
	if !ok {
		// No error for a late answer to a permission request already
		// withdrawn: it is dropped.
		return nil, err
	}
	switch c.kind {
	case callPermission:
		outcome := permissionOutcome(m, c.offered)
		status := "in_progress"
		if outcome == "reject" || outcome == "cancel" {
			// The agent sends no closing update after a refusal
			// (docs/agent-protocols.md#acp-v0-captured-session): close the tool call here.
			status = "failed"
		}
		outs := []translate.Out{t.toolStatus(c.toolID, status)}
		return append(outs, answerAgent(c.agentID, confirmationResult{c.toolID, outcome})...), nil
	case callRead:
		if m.Error != nil {
			return answerAgentError(c.agentID, passError(m.Error)), nil
		}
		var r struct {
			Content *string `json:"content"`
		}
		if json.Unmarshal(m.Body, &r) != nil || r.Content == nil {
			return answerAgentError(c.agentID, translate.Errorf(translate.CodeInternalError, "the editor's fs/read_text_file result has no content").JSON()), nil
		}
		return answerAgent(c.agentID, struct {
			Content string `json:"content"`
		}{*r.Content}), nil
	case callWrite:
		if m.Error != nil {
			return answerAgentError(c.agentID, passError(m.Error)), nil
		}
		return answerAgent(c.agentID, nil), nil
	}
	return nil, fmt.Errorf("acp-v0: call %d has unknown kind %d", m.Ref, c.kind)
}

type confirmationResult struct {
	ID      uint64 `json:"id"`
	Outcome string `json:"outcome"`
}

// permissionOutcome maps the editor's answer to session/request_permission
// to a legacy outcome. Only a selected option the translator offered can
// allow; everything else refuses.
func permissionOutcome(m translate.Msg, offered []string) string {
	if m.Error != nil {
		return "reject"
	}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if json.Unmarshal(m.Body, &r) != nil {
		return "reject"
	}
	switch r.Outcome.Outcome {
	case "selected":
		if slices.Contains(offered, r.Outcome.OptionID) {
			return r.Outcome.OptionID
		}
	case "cancelled", "canceled": // "canceled" from ACP 0.0.27–0.0.29 peers (docs/agent-protocols.md#early-acp-spellings)
		return "cancel"
	}
	return "reject"
}
