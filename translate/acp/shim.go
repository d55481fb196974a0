package acp

import (
	"bytes"
	"fmt"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
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
