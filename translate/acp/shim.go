package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acpschema"
	"github.com/tidwall/gjson"
)

// Rule names one repair of the compliance shim: something an imperfect ACP
// agent gets wrong that the bridge fixes on the way to the editor. Each rule
// is counted (as a translate.Note named after it), switchable, and listed in
// the --shim report.
type Rule string

// The rules, in the order docs/shim.md lists them.
const (
	// RuleNotificationResponses drops responses to notifications and
	// id:null responses that answer no request.
	RuleNotificationResponses Rule = "notification-responses"
	// RuleEnvelope adds a missing "jsonrpc":"2.0" and makes a response with
	// both or neither of result and error a proper error.
	RuleEnvelope Rule = "envelope"
	// RuleStdoutNoise drops non-JSON lines of a child's stdout, up to a
	// limit after which the agent is reported broken (legacy.Command).
	RuleStdoutNoise Rule = "stdout-noise"
	// RuleProtocolVersion makes a string protocolVersion ("1", "1.0") the
	// integer.
	RuleProtocolVersion Rule = "protocol-version"
	// RuleFieldNames renames snake_case ACP keys to camelCase, rewrites
	// "@type" update shapes to sessionUpdate variants and normalises the
	// old spelling "canceled".
	RuleFieldNames Rule = "field-names"
	// RuleCancelledStopReason makes the stop reason of a cancelled turn
	// "cancelled".
	RuleCancelledStopReason Rule = "cancelled-stop-reason"
	// RuleLateUpdates holds a prompt's answer for a quiet period, so that
	// in-flight updates land first, and drops a turn's updates that arrive
	// after its answer.
	RuleLateUpdates Rule = "late-updates"
	// RuleEarlyUpdates holds updates for a session the editor does not know
	// yet until its session/new (or resume, fork) answer is written.
	RuleEarlyUpdates Rule = "early-updates"
	// RuleDanglingPermissions withdraws permission requests a turn left
	// pending when it ended, answering them "cancelled" toward the agent.
	RuleDanglingPermissions Rule = "dangling-permissions"
	// RuleUnstableVariants drops session/update variants the stable ACP v1
	// schema does not have.
	RuleUnstableVariants Rule = "unstable-variants"
	// RuleUnsupportedClientMethods answers -32601 to agent requests for
	// client capabilities the editor did not advertise.
	RuleUnsupportedClientMethods Rule = "unsupported-client-methods"
	// RuleObjectResults makes null results {} for ACP methods whose result
	// is an object (the engine's repair of the same name).
	RuleObjectResults Rule = "object-results"
	// RuleOneTurn rejects (or queues) a second prompt on a session whose
	// turn is running. The engine applies it, for every dialect.
	RuleOneTurn Rule = "one-turn"
	// RuleSchema checks the shape of what reaches the editor; a message a
	// strict editor would reject is counted (and dropped by switch).
	RuleSchema Rule = "schema"
	// RuleMethodNotFound answers -32601 for a method the agent does not
	// know but answered with another code.
	RuleMethodNotFound Rule = "method-not-found"
)

// Rules lists every rule.
var Rules = []Rule{
	RuleNotificationResponses, RuleEnvelope, RuleStdoutNoise, RuleProtocolVersion,
	RuleFieldNames, RuleCancelledStopReason, RuleLateUpdates, RuleEarlyUpdates,
	RuleDanglingPermissions, RuleUnstableVariants, RuleUnsupportedClientMethods,
	RuleObjectResults, RuleOneTurn, RuleSchema, RuleMethodNotFound,
}

// Indexes of the rules in Rules, for the shim's switch array (a map
// lookup per rule per message would cost more than the rules).
const (
	iNotificationResponses = iota
	iEnvelope
	iStdoutNoise
	iProtocolVersion
	iFieldNames
	iCancelledStopReason
	iLateUpdates
	iEarlyUpdates
	iDanglingPermissions
	iUnstableVariants
	iUnsupportedClientMethods
	iObjectResults
	iOneTurn
	iSchema
	iMethodNotFound
	numRules
)

// IsRule reports whether name is a rule's name.
func IsRule(name string) bool {
	for _, r := range Rules {
		if string(r) == name {
			return true
		}
	}
	return false
}

// DefaultQuiet is how long a prompt's answer is held for in-flight updates
// when ShimOptions.Quiet is zero, once the agent has been seen sending an
// update after its answer. Until then the hold is FirstQuiet: an agent that
// behaves pays next to nothing per turn, and one that does not is caught
// by the short hold (updates sent with the answer arrive within it) or by
// the late-update rule, and gets the full hold from then on.
const (
	DefaultQuiet = 30 * time.Millisecond
	FirstQuiet   = time.Millisecond
)

// ShimOptions switch the shim's rules.
type ShimOptions struct {
	// Off holds the rules switched off; every other rule is on.
	Off map[Rule]bool
	// Quiet is how long a prompt's answer is held so that updates the
	// agent sent just before it land first; 0 means DefaultQuiet, negative
	// means no hold.
	Quiet time.Duration
	// ForwardLate forwards updates that arrive after their turn's answer
	// (still counted) instead of dropping them.
	ForwardLate bool
	// DropInvalid drops a notification the schema rule finds invalid, and
	// turns such an answer into an error, instead of passing it on.
	DropInvalid bool
}

// On reports whether rule r is switched on.
func (o ShimOptions) On(r Rule) bool { return !o.Off[r] }

// Shim is the relay with the compliance rules in front of it: agent frames
// are repaired before the relay routes them, and the relay's outputs are
// checked before the engine writes them. Every repair is a translate.Note
// named after its rule. On a compliant stream the shim only reads: the
// agent's bytes reach the editor unchanged.
type Shim struct {
	r   *Relay
	opt ShimOptions
	on  [numRules]bool // by the i… indexes

	// methods are the editor requests in flight on the agent, by Ref.
	methods map[translate.Ref]string
	// prompts are the prompts in flight, by Ref. Several may be open on
	// one session: an agent that queues prompts (claude-agent-acp's
	// promptQueueing) is handed the next while a turn runs.
	prompts  map[translate.Ref]*openPrompt
	sessions map[string]*turnState
	// canTerminal is the editor's terminal capability, known once
	// initialize was seen (capsKnown).
	capsKnown, canTerminal bool
	elicitation            []byte // clientCapabilities.elicitation, raw
	// opening counts session/new, resume and fork requests in flight: while
	// one is, updates for an unknown session are held in early.
	opening int
	early   [][]byte
	// permits are the permission requests the editor has not answered, by
	// Call ref, with their session; withdrawn the ones the shim answered.
	permits   map[translate.Ref]string
	withdrawn map[translate.Ref]bool
	// held are prompt answers waiting for the quiet period's Tick.
	held []translate.Out
	// lateSeen: the agent sent a turn's update after the turn's answer.
	lateSeen bool
	// lastSID and lastTurn cache the last update's session lookup; entries
	// of sessions are never replaced, only added (or all reset).
	lastSID  string
	lastTurn *turnState
}

// turnState is what the shim knows of one session. Every rule that reasons
// about "the turn" asks it whether any prompt is still open: an update
// that comes while one is belongs to a turn that has not ended, whichever
// of the open prompts it is for.
type turnState struct {
	open    int  // prompts in flight
	ended   bool // a turn was answered and none is open or started since
	loading bool // session/load in flight: its updates replay history
	holding bool // its last turn's answer waits for the quiet period's Tick
}

// openPrompt is a prompt in flight.
type openPrompt struct {
	session   string
	cancelled bool // a session/cancel came while it was open
}

// NewShim returns the relay with the rules of opt in front of it.
func NewShim(opt ShimOptions) *Shim {
	s := &Shim{r: New(), opt: opt}
	for i, r := range Rules {
		s.on[i] = opt.On(r)
	}
	s.reset()
	return s
}

// Unwrap returns the relay behind the shim's rules, for a link whose
// frames are not ACP v1 (a v2 editor relayed to a v2 agent), which v1's
// rules would mangle.
func (s *Shim) Unwrap() translate.Translator { return s.r }

func (s *Shim) reset() {
	s.methods = map[translate.Ref]string{}
	s.prompts = map[translate.Ref]*openPrompt{}
	s.sessions = map[string]*turnState{}
	s.permits = map[translate.Ref]string{}
	s.withdrawn = map[translate.Ref]bool{}
	s.capsKnown, s.opening, s.early, s.held = false, 0, nil, nil
	s.lastSID, s.lastTurn = "", nil
}

func (s *Shim) session(id string) *turnState {
	t := s.sessions[id]
	if t == nil {
		t = &turnState{}
		s.sessions[id] = t
	}
	return t
}

func note(r Rule, session, format string, args ...any) translate.Out {
	return translate.Out{Kind: translate.Note, Method: string(r), Session: session, Body: []byte(fmt.Sprintf(format, args...))}
}

// FromEditor implements translate.Translator.
func (s *Shim) FromEditor(m translate.Msg) ([]translate.Out, error) {
	switch m.Kind {
	case translate.Request:
		s.methods[m.Ref] = m.Method
		switch m.Method {
		case "initialize":
			caps := gjson.GetBytes(m.Body, "clientCapabilities")
			s.capsKnown = true
			s.canTerminal = caps.Get("terminal").Bool()
			s.elicitation = []byte(caps.Get("elicitation").Raw)
		case "session/prompt":
			sid := gjson.GetBytes(m.Body, "sessionId").Str
			s.prompts[m.Ref] = &openPrompt{session: sid}
			t := s.session(sid)
			t.open++
			t.ended = false
			if t.holding {
				// What the agent sends from now on may be the new turn's:
				// the previous turn's answer goes out first, in the order
				// the agent sent it.
				held := s.releaseHeld(sid)
				outs, err := s.r.FromEditor(m)
				return take(held, outs), err
			}
		case "session/new", "session/resume", "session/fork":
			s.opening++
		case "session/load":
			s.session(gjson.GetBytes(m.Body, "sessionId").Str).loading = true
		}
	case translate.Notification:
		if m.Method == "session/cancel" {
			// The cancel covers every prompt open on the session.
			sid := gjson.GetBytes(m.Body, "sessionId").Str
			for _, p := range s.prompts {
				if p.session == sid {
					p.cancelled = true
				}
			}
		}
	case translate.Response:
		if s.withdrawn[m.Ref] {
			// The shim answered the agent already; the editor's answer
			// to a request it was told to drop has nowhere to go.
			delete(s.withdrawn, m.Ref)
			return nil, nil
		}
		delete(s.permits, m.Ref)
	case translate.Tick:
		out := s.held
		s.held = nil
		for _, o := range out {
			if t := s.sessions[o.Session]; t != nil {
				t.holding = false
				t.ended = t.open == 0
			}
		}
		return out, nil
	case translate.LinkDown:
		s.reset()
	}
	return s.r.FromEditor(m)
}

// FromAgent implements translate.Translator.
func (s *Shim) FromAgent(f []byte) ([]translate.Out, error) {
	env, perr := translate.ParseEnvelope(f)
	return s.FromAgentEnvelope(f, &env, perr)
}

// FromAgentEnvelope implements translate.EnvelopeTranslator.
func (s *Shim) FromAgentEnvelope(f []byte, parsed *translate.Envelope, perr *translate.Error) ([]translate.Out, error) {
	var pre []translate.Out // notes and frames that precede the relay's outputs
	env := *parsed
	if perr != nil && s.on[iEnvelope] && env.ID != nil && env.Method == "" && perr.Code == translate.CodeInvalidRequest {
		// Both or neither of result and error: the error wins, or the
		// editor learns the agent said nothing.
		errObj := env.Error
		if errObj == nil || (env.Result != nil && !gjson.ValidBytes(errObj)) {
			errObj = translate.Errorf(translate.CodeInternalError,
				"the agent answered without a result or an error; report it to the agent's author").JSON()
		}
		pre = append(pre, note(RuleEnvelope, "", "response %s carried %s", env.ID, perr.Reason))
		f = translate.ErrorFrame(clone(env.ID), translate.ErrorObject(errObj))
		env, perr = translate.ParseEnvelope(f)
	}
	if perr != nil {
		outs, err := s.r.fromAgent(f, &env, perr)
		return take(pre, outs), err
	}
	if env.Version != "2.0" && s.on[iEnvelope] {
		// The relay rebuilds what it sends the editor, jsonrpc included.
		pre = append(pre, note(RuleEnvelope, env.SessionID, "message without \"jsonrpc\":\"2.0\" (%.80s)", f))
		if env.IsNotification() {
			f = addVersion(f)
			env, _ = translate.ParseEnvelope(f)
		}
	}
	switch {
	case env.IsResponse():
		return s.response(f, &env, pre)
	case env.IsRequest():
		return s.request(f, &env, pre)
	}
	if env.Method == "session/update" {
		return s.update(f, &env, pre)
	}
	outs, err := s.r.fromAgent(f, &env, nil)
	return take(pre, outs), err
}

// take appends the relay's outputs to dst and clears them where the relay
// left them. The relay returns the same slice every time (see
// translate.Translator), and the engine clears only the slice a translator
// returns: unless cleared here, a large answer the shim passed on in a
// slice of its own would stay reachable from the relay's until the agent's
// next frame, which for an idle bridge never comes (60 MiB kept for good).
func take(dst, outs []translate.Out) []translate.Out {
	dst = append(dst, outs...)
	clear(outs)
	return dst
}

// addVersion inserts "jsonrpc":"2.0" at the start of an object frame.
func addVersion(f []byte) []byte {
	i := bytes.IndexByte(f, '{')
	if i < 0 {
		return f
	}
	rest := bytes.TrimLeft(f[i+1:], " \t\r\n")
	out := append([]byte(nil), f[:i+1]...)
	out = append(out, `"jsonrpc":"2.0"`...)
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// response handles an agent's answer to an editor request.
func (s *Shim) response(f []byte, env *translate.Envelope, pre []translate.Out) ([]translate.Out, error) {
	n, perr := strconv.ParseUint(string(env.ID), 10, 64)
	ref, pending := s.r.toEditor[n]
	if perr != nil || !pending {
		if s.on[iMethodNotFound] && env.Error != nil && string(env.ID) == "null" {
			// An id-less error may answer the one unknown method in flight.
			if id, ok := s.soleUnknown(); ok {
				f = translate.ErrorFrame(translate.IntID(id), translate.ErrorObject(env.Error))
				e2, _ := translate.ParseEnvelope(f)
				return s.response(f, &e2, pre)
			}
		}
		if s.on[iNotificationResponses] {
			return append(pre, note(RuleNotificationResponses, "", "dropped a response to no request: %.120s", f)), nil
		}
		outs, err := s.r.fromAgent(f, env, nil)
		return take(pre, outs), err
	}
	method := s.methods[ref]
	delete(s.methods, ref)
	outs, err := s.r.fromAgent(f, env, nil)
	if err != nil || len(outs) != 1 {
		return take(pre, outs), err
	}
	o := outs[0]
	clear(outs) // the relay's reused slice: see take
	var post []translate.Out
	var sid string
	cancelled := false
	if p := s.prompts[ref]; p != nil {
		sid, cancelled = p.session, p.cancelled
		delete(s.prompts, ref)
	}
	if o.Kind == translate.Reply {
		var notes []translate.Out
		o.Body, notes = s.repairResult(method, sid, cancelled, o.Body)
		pre = append(pre, notes...)
	} else if o.Kind == translate.Fail && s.on[iMethodNotFound] && !knownMethod(method) {
		if code := gjson.GetBytes(o.Body, "code"); code.Int() != translate.CodeMethodNotFound && unknownTo(method, o.Body) {
			pre = append(pre, note(RuleMethodNotFound, "", "%s answered %s instead of -32601", method, code.Raw))
			e := translate.Errorf(translate.CodeMethodNotFound,
				"the agent does not implement %s (it answered %s: %s)", method, code.Raw, gjson.GetBytes(o.Body, "message").Str)
			o.Body = e.With("agentError", json.RawMessage(o.Body)).JSON()
		}
	}
	switch method {
	case "session/new", "session/resume", "session/fork":
		s.opening--
		if o.Kind == translate.Reply {
			id := gjson.GetBytes(o.Body, "sessionId").Str
			s.session(id)
			post = s.release(id, post)
		} else {
			post = s.release("", post)
		}
	case "session/load":
		if t := s.sessions[gjson.GetBytes(o.Body, "sessionId").Str]; t != nil {
			t.loading = false
		}
		for _, t := range s.sessions {
			t.loading = false
		}
	case "session/prompt":
		t := s.session(sid)
		if t.open > 0 {
			t.open--
		}
		if t.open > 0 {
			// Another prompt of the session is open (an agent that
			// queues them): what comes next may be its turn's, so this
			// answer is neither held nor the end of the session's turns,
			// and the permission requests pending may be the other's.
			break
		}
		pre = s.withdraw(sid, pre)
		if s.on[iLateUpdates] && s.opt.Quiet >= 0 && o.Kind == translate.Reply {
			// Updates that come during the quiet period still belong to
			// the turn: they are written before its answer.
			d := s.opt.Quiet
			switch {
			case d != 0:
			case s.lateSeen:
				d = DefaultQuiet
			default:
				d = FirstQuiet
			}
			o.Session = sid
			t.holding = true
			s.held = append(s.held, o)
			return append(pre, translate.Out{Kind: translate.Timer, Delay: d}), nil
		}
		t.ended = true
	}
	if len(pre) == 0 && len(post) == 0 {
		return s.r.one(o), nil // the usual answer: the relay's reused slice, as the relay returns it
	}
	out := append(pre, o)
	return append(out, post...), nil
}

// soleUnknown returns the agent-hop id of the only request in flight whose
// method ACP does not define.
func (s *Shim) soleUnknown() (uint64, bool) {
	var found uint64
	n := 0
	for id, ref := range s.r.toEditor {
		if m, ok := s.methods[ref]; ok && !knownMethod(m) {
			found = id
			n++
		}
	}
	return found, n == 1
}

// repairResult applies the rules that look inside a successful answer.
// cancelled says the editor cancelled the prompt that body answers.
func (s *Shim) repairResult(method, sid string, cancelled bool, body json.RawMessage) (json.RawMessage, []translate.Out) {
	var notes []translate.Out
	if t := bytes.TrimSpace(body); (len(t) == 0 || string(t) == "null") && objectResult[method] {
		if s.on[iObjectResults] {
			notes = append(notes, note(RuleObjectResults, sid, "%s answered null", method))
			return json.RawMessage("{}"), notes
		}
		return body, nil
	}
	if !knownMethod(method) {
		return body, notes // the agent's own method: its result is its business
	}
	if s.on[iFieldNames] && bytes.IndexByte(body, '_') >= 0 {
		if b, what := camelCase(body); what != "" {
			notes = append(notes, note(RuleFieldNames, sid, "%s answer: %s", method, what))
			body = b
		}
	}
	switch method {
	case "initialize":
		if v := gjson.GetBytes(body, "protocolVersion"); v.Type == gjson.String && s.on[iProtocolVersion] {
			if f, err := strconv.ParseFloat(v.Str, 64); err == nil && f == float64(int64(f)) && f >= 1 {
				n := strconv.FormatInt(int64(f), 10)
				notes = append(notes, note(RuleProtocolVersion, "", "protocolVersion %s became %s", v.Raw, n))
				body = splice(body, v, n)
			}
		}
	case "session/prompt":
		v := gjson.GetBytes(body, "stopReason")
		if v.Str == "canceled" && s.on[iFieldNames] {
			notes = append(notes, note(RuleFieldNames, sid, `stopReason "canceled" became "cancelled"`))
			body = splice(body, v, `"cancelled"`)
			v = gjson.GetBytes(body, "stopReason")
		}
		if cancelled && v.Str != "cancelled" && s.on[iCancelledStopReason] {
			notes = append(notes, note(RuleCancelledStopReason, sid, "a cancelled turn ended with stopReason %s", v.Raw))
			if v.Exists() {
				body = splice(body, v, `"cancelled"`)
			}
			v = gjson.GetBytes(body, "stopReason")
		}
		if s.on[iSchema] && !stopReasons[v.Str] {
			notes = append(notes, note(RuleSchema, sid, "session/prompt answer with stopReason %s", orNone(v.Raw)))
		}
	case "session/new":
		if v := gjson.GetBytes(body, "sessionId"); s.on[iSchema] && v.Type != gjson.String {
			notes = append(notes, note(RuleSchema, sid, "session/new answer without a string sessionId"))
		}
	}
	return body, notes
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// splice replaces the value v (found in body by gjson) with raw.
func splice(body []byte, v gjson.Result, raw string) []byte {
	if !v.Exists() || v.Index <= 0 || v.Index+len(v.Raw) > len(body) {
		return body
	}
	out := make([]byte, 0, len(body)+len(raw))
	out = append(out, body[:v.Index]...)
	out = append(out, raw...)
	return append(out, body[v.Index+len(v.Raw):]...)
}

// releaseHeld takes the prompt answers of session sid out of the quiet
// period's hold, in order, for a new prompt on the session.
func (s *Shim) releaseHeld(sid string) []translate.Out {
	var out []translate.Out
	keep := s.held[:0]
	for _, o := range s.held {
		if o.Session == sid {
			out = append(out, o)
			continue
		}
		keep = append(keep, o)
	}
	clear(s.held[len(keep):])
	s.held = keep
	s.session(sid).holding = false
	return out
}

// release appends the held early updates for session id (all of them when
// no session is being opened any more) as outputs after the answer.
func (s *Shim) release(id string, post []translate.Out) []translate.Out {
	keep := s.early[:0]
	for _, f := range s.early {
		env, _ := translate.ParseEnvelope(f)
		if env.SessionID == id || s.opening <= 0 {
			outs, _ := s.r.fromAgent(f, &env, nil)
			post = take(post, outs)
			continue
		}
		keep = append(keep, f)
	}
	s.early = keep
	return post
}

// withdraw answers "cancelled" to the permission requests of session sid
// that are still pending when its turn ends, and tells the editor to drop
// them.
func (s *Shim) withdraw(sid string, out []translate.Out) []translate.Out {
	if !s.on[iDanglingPermissions] {
		return out
	}
	for ref, psid := range s.permits {
		if psid != sid {
			continue
		}
		id, ok := s.r.callIDs[ref]
		if !ok {
			continue
		}
		delete(s.permits, ref)
		delete(s.r.callIDs, ref)
		delete(s.r.callRefs, key(id))
		s.withdrawn[ref] = true
		out = append(out,
			note(RuleDanglingPermissions, sid, "permission request %s was still pending when the turn ended", id),
			translate.Out{Kind: translate.Frame, Body: translate.ResultFrame(id, json.RawMessage(`{"outcome":{"outcome":"cancelled"}}`))},
			translate.Out{Kind: translate.CancelCall, Ref: ref})
	}
	return out
}

// request handles an agent's request to the editor.
func (s *Shim) request(f []byte, env *translate.Envelope, pre []translate.Out) ([]translate.Out, error) {
	if s.on[iFieldNames] && env.SessionID == "" && bytes.Contains(env.Params, []byte(`"session_id"`)) {
		if b, what := camelCase(f); what != "" {
			pre = append(pre, note(RuleFieldNames, "", "%s request: %s", env.Method, what))
			f = b
			*env, _ = translate.ParseEnvelope(f)
		}
	}
	if s.on[iUnsupportedClientMethods] && s.capsKnown {
		if capName, ok := s.unadvertised(env.Method, env.Params); ok {
			e := translate.Errorf(translate.CodeMethodNotFound,
				"the editor did not advertise %s, so it does not serve %s; check clientCapabilities before calling", capName, env.Method)
			pre = append(pre, note(RuleUnsupportedClientMethods, env.SessionID, "%s without %s answered -32601", env.Method, capName))
			return append(pre, translate.Out{Kind: translate.Frame, Body: translate.ErrorFrame(clone(env.ID), e.JSON())}), nil
		}
	}
	outs, err := s.r.fromAgent(f, env, nil)
	if env.Method == "session/request_permission" && len(outs) == 1 && outs[0].Kind == translate.Call {
		s.permits[outs[0].Ref] = gjson.GetBytes(env.Params, "sessionId").Str
	}
	return take(pre, outs), err
}

// unadvertised names the client capability method needs when the editor did
// not advertise it. fs methods are not among them: the engine serves those
// from disk, confined to the session's directories, when the editor lacks
// the capability (bridge/fsfallback.go), so they never reach such an editor.
func (s *Shim) unadvertised(method string, params []byte) (string, bool) {
	switch {
	case method == "elicitation/create":
		// Each mode is advertised on its own: "elicitation": {} offers none.
		mode := translate.Get(params, "mode").Str
		if mode == "" || !gjson.ValidBytes(s.elicitation) {
			return "elicitation", len(s.elicitation) == 0
		}
		return "elicitation." + mode, !gjson.GetBytes(s.elicitation, gjson.Escape(mode)).IsObject()
	case len(method) > 9 && method[:9] == "terminal/":
		return "terminal", !s.canTerminal
	}
	return "", false
}

// update handles a session/update notification.
func (s *Shim) update(f []byte, env *translate.Envelope, pre []translate.Out) ([]translate.Out, error) {
	if (env.SessionID == "" || env.UpdateKind == "") && s.on[iFieldNames] {
		if b, what := camelCase(f); what != "" {
			pre = append(pre, note(RuleFieldNames, "", "session/update: %s", what))
			f = b
			*env, _ = translate.ParseEnvelope(f)
		}
	}
	kind := env.UpdateKind
	if kind == "" {
		kind = translate.Get(env.Params, "update.sessionUpdate").Str
	}
	sid := env.SessionID
	if sid == "" {
		sid = translate.Get(env.Params, "sessionId").Str
	}
	if kind != "" && !stableVariant(kind) && s.on[iUnstableVariants] {
		return append(pre, note(RuleUnstableVariants, sid, "dropped a %q update, which the stable ACP v1 schema does not have", kind)), nil
	}
	// A chunk whose envelope is Plain was read whole in the shape the
	// SDKs write it (wire.Envelope.Plain): its content is a text block,
	// so the schema rule has nothing left to check.
	if s.on[iSchema] && !(env.Plain && chunkKind(kind)) {
		if why := badUpdate(kind, env.Params); why != "" {
			pre = append(pre, note(RuleSchema, sid, "session/update %s: %s", kind, why))
			if s.opt.DropInvalid {
				return pre, nil
			}
		} else if kind != "" && sid != "" && !chunkKind(kind) && stableVariant(kind) {
			// Every update but the stream's chunks (which badUpdate's
			// fast path checks whole) against the schema itself; updates
			// of no session or kind, or of a kind the stable schema lacks,
			// are other rules' business.
			g, n, drop := schemaUpdate(f, env.Params, sid, kind, s.opt.DropInvalid)
			pre = append(pre, n...)
			if drop {
				return pre, nil
			}
			if g != nil {
				f = g
				*env, _ = translate.ParseEnvelope(f)
			}
		}
	}
	t := s.lastTurn
	if sid != s.lastSID || t == nil {
		// A one-entry cache: a turn's updates name one session.
		t = s.sessions[sid]
		s.lastSID, s.lastTurn = sid, t
	}
	if sid != "" && t == nil && s.opening > 0 && s.on[iEarlyUpdates] {
		s.early = append(s.early, f)
		return append(pre, note(RuleEarlyUpdates, sid, "a %q update came before the session's session/new answer; held", kind)), nil
	}
	if t != nil && (t.holding || t.ended && !t.loading) && turnVariant(kind) {
		s.lateSeen = true // from now on its answers are held the full quiet period
	}
	if t != nil && t.holding && turnVariant(kind) && s.on[iLateUpdates] {
		// Sent after the turn's answer, but within the quiet period: it
		// is written before the answer, where it belongs.
		pre = append(pre, note(RuleLateUpdates, sid, "a %q update came after its turn's answer, within the quiet period; written before the answer", kind))
	}
	if t != nil && t.ended && !t.loading && turnVariant(kind) && s.on[iLateUpdates] {
		pre = append(pre, note(RuleLateUpdates, sid, "a %q update came after its turn's answer", kind))
		if !s.opt.ForwardLate {
			return pre, nil
		}
	}
	outs, err := s.r.fromAgent(f, env, nil)
	if len(pre) == 0 {
		return outs, err
	}
	return take(pre, outs), err
}

// chunkKind reports whether kind is one of the streamed chunk updates,
// whose shape badUpdate checks on its fast path.
func chunkKind(kind string) bool {
	switch kind {
	case "user_message_chunk", "agent_message_chunk", "agent_thought_chunk":
		return true
	}
	return false
}

// schemaUpdate checks a session/update notification f (its params given)
// against the ACP v1 schema. The one obvious repair is made: members that
// are null where the schema wants a value are left out (claude-agent-acp
// sends usage_update with "used": null, which editors built on the SDK
// drop whole); an update whose required member was null is dropped. It
// returns the repaired frame (nil: unchanged), the notes, and whether the
// update is to be dropped (an irreparable one when dropInvalid is set).
func schemaUpdate(f, params []byte, sid, kind string, dropInvalid bool) ([]byte, []translate.Out, bool) {
	sch, err := acpschema.LoadSchema()
	if err != nil {
		return nil, nil, false
	}
	probs := sch.Validate("SessionNotification", params)
	if len(probs) == 0 {
		return nil, nil, false
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(params))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return nil, []translate.Out{note(RuleSchema, sid, "session/update %s: %s", kind, strings.Join(probs, "; "))}, dropInvalid
	}
	var removed []string
	for _, p := range probs {
		path, rest, ok := strings.Cut(p, ": ")
		if ok && strings.HasSuffix(strings.TrimSuffix(rest, " null"), ", got null") && dropMember(v, path) {
			removed = append(removed, path)
		}
	}
	if len(removed) == 0 {
		return nil, []translate.Out{note(RuleSchema, sid, "session/update %s: %s", kind, strings.Join(probs, "; "))}, dropInvalid
	}
	if left := sch.ValidateValue("SessionNotification", v); len(left) > 0 {
		return nil, []translate.Out{note(RuleSchema, sid, "dropped a session/update %s whose %s was null where the schema wants a value: %s",
			kind, strings.Join(removed, ", "), strings.Join(left, "; "))}, true
	}
	fixed, err := json.Marshal(v)
	if err != nil {
		return nil, nil, false
	}
	frame := translate.NotificationFrame("session/update", fixed)
	if id := gjson.GetBytes(f, "jsonrpc"); !id.Exists() {
		frame = f // not ours to rebuild; the envelope rule handles it
	}
	return frame, []translate.Out{note(RuleSchema, sid, "session/update %s: left out %s, null where the schema wants a value", kind, strings.Join(removed, ", "))}, false
}

// dropMember removes the null member at path (object keys joined by
// dots) from v, reporting whether there was one.
func dropMember(v any, path string) bool {
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		v = m[k]
	}
	m, ok := v.(map[string]any)
	last := keys[len(keys)-1]
	if !ok {
		return false
	}
	if x, had := m[last]; !had || x != nil {
		return false
	}
	delete(m, last)
	return true
}

// badUpdate returns why an update would fail the schema, or "".
func badUpdate(kind string, params []byte) string {
	switch kind {
	case "user_message_chunk", "agent_message_chunk", "agent_thought_chunk":
		if fastContentBlock(params) {
			return ""
		}
		// One walk: only an object content has a string "type".
		if translate.Get(params, "update.content.type").Type != gjson.String {
			return "content is not a content block"
		}
	case "tool_call", "tool_call_update":
		// (Searched from the 't': bytes.Index skips ahead on the first
		// byte, and quotes are everywhere.)
		if i := bytes.Index(params, []byte(`toolCallId":"`)); i > 0 && params[i-1] == '"' {
			return "" // the compact form of a string toolCallId
		}
		if translate.Get(params, "update.toolCallId").Type != gjson.String {
			return "no toolCallId"
		}
	}
	return ""
}

// Stable ACP v1 schema facts the rules check against.
var (
	stopReasons = map[string]bool{
		"end_turn": true, "max_tokens": true, "max_turn_requests": true, "refusal": true, "cancelled": true,
	}
	objectResult = map[string]bool{
		"initialize": true, "authenticate": true, "logout": true,
		"session/new": true, "session/load": true, "session/resume": true, "session/close": true,
		"session/list": true, "session/delete": true, "session/set_mode": true,
		"session/set_config_option": true, "session/prompt": true,
		"session/fork": true, "session/set_model": true,
	}
)

// knownMethod reports whether ACP defines method as an agent method.
func knownMethod(m string) bool {
	return objectResult[m]
}

// unknownTo reports whether errObj, the agent's answer to method (which
// ACP does not define), says the agent does not know it. Any error does for
// a method outside ACP's namespace rules; an extension method (_name) may
// exist and fail for its own reasons, so its error must name the method or
// say it is unknown.
func unknownTo(method string, errObj []byte) bool {
	if !strings.HasPrefix(method, "_") {
		return true
	}
	msg := strings.ToLower(gjson.GetBytes(errObj, "message").Str)
	if strings.Contains(msg, strings.ToLower(method)) {
		return true
	}
	for _, w := range []string{"unknown", "not found", "not implemented", "unsupported", "no such method", "unhandled"} {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// stableVariant reports whether kind is a sessionUpdate variant of the
// stable ACP v1 schema. (A switch: it runs on every update.)
func stableVariant(kind string) bool {
	switch kind {
	case "user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
		"tool_call", "tool_call_update", "plan",
		"available_commands_update", "current_mode_update",
		"config_option_update", "session_info_update", "usage_update":
		return true
	}
	return false
}

// turnVariant reports whether kind belongs to a turn; the others
// (commands, mode, info, usage) may come between turns.
func turnVariant(kind string) bool {
	switch kind {
	case "user_message_chunk", "agent_message_chunk", "agent_thought_chunk",
		"tool_call", "tool_call_update", "plan":
		return true
	}
	return false
}

// fastContentBlock reports that params' first "content" member is, in the
// compact form every SDK writes, an object whose first member is a string
// "type": a content block, without walking the JSON. false means "look
// properly".
func fastContentBlock(params []byte) bool {
	i := bytes.Index(params, []byte(`content":`))
	return i > 0 && params[i-1] == '"' && bytes.HasPrefix(params[i+len(`content":`):], []byte(`{"type":"`))
}
