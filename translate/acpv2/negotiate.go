package acpv2

import (
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// Negotiator is the translator of an ACP link whose agent's version is not
// known in advance. It asks the agent for the highest version the bridge
// speaks (2) and takes the one the agent answers: 2 hands the link to the
// v2 Translator, 1 to the v1 relay (whatever translator v1 returns: the
// relay, or the relay behind the compliance shim), which has carried the
// exchange so far and goes on exactly as it would have. An agent that
// answers the request for 2 with an error is asked again for 1, with the
// editor's initialize as the relay sends it, once (some v1
// endpoints fail a v2 offer instead of answering 1, speakeasy-api/kit #213).
//
// The request for 2 is the editor's v1 initialize with protocolVersion 2
// and v2's info and capabilities beside clientInfo and clientCapabilities:
// a v1 agent reads the members it knows, a v2 agent the ones it knows. A v1-shaped answer that claims
// version 2 (agentCapabilities, no info: an agent that echoes the version
// asked) is taken as v1.
//
// A link that goes down negotiates again on the next: the agent may have
// been replaced by another release.
//
// The seam for a v2 editor: when the engine passes the editor's v2 frames
// through instead of translating them to v1, it calls SetEditorProtocol(2)
// before the link's initialize. The editor's initialize then goes to the
// agent as the editor wrote it, and an agent that answers 2 is relayed as
// faithfully as the v1 relay relays v1 (the relay never decodes params,
// results or updates: only ids are renumbered per hop). An agent that
// answers 1 to a v2 editor is relayed in v1, for the editor side to
// translate.
type Negotiator struct {
	force  int // 0: negotiate; 1 or 2: that version only
	newV1  func() translate.Translator
	editor int // the version the editor side speaks on this link: 1, or 2 (SetEditorProtocol)

	v1 translate.Translator
	v2 *Translator
	// version is what the link speaks: 0 until the agent answered
	// initialize.
	version int

	// The initialize in flight while version is 0.
	initRef    translate.Ref
	initParams json.RawMessage // the editor's, as the engine gave them
	asked      int             // the version asked for
	firstErr   json.RawMessage // the agent's answer to the request for 2, when it failed
}

// NewNegotiator returns the translator of one link. force 0 negotiates;
// 1 or 2 speaks that version only (--agent-protocol).
func NewNegotiator(force int, v1 func() translate.Translator) *Negotiator {
	n := &Negotiator{force: force, newV1: v1}
	n.reset()
	return n
}

func (n *Negotiator) reset() {
	*n = Negotiator{force: n.force, newV1: n.newV1, editor: n.editor}
	switch {
	case n.force == 1:
		n.v1, n.version = n.newV1(), 1
	case n.force == 2 && n.editor == 2:
		n.v1, n.version = relay(n.newV1()), 2 // v2 both ways: relayed
	case n.force == 2:
		n.v2, n.version = New(), 2
	default:
		n.v1 = n.newV1()
	}
}

// SetEditorProtocol says which ACP version the editor side of the engine
// speaks on this link: 2 when it passes a v2 editor's frames through. It is
// called before the link's first initialize.
func (n *Negotiator) SetEditorProtocol(v int) {
	n.editor = v
	n.reset()
}

// CanRelayV2 reports whether the link may carry a v2 editor's frames
// untouched: it does unless --agent-protocol forces version 1.
func (n *Negotiator) CanRelayV2() bool { return n.force != 1 }

// AgentProtocol reports the ACP version the agent hop speaks: 0 until the
// agent has answered initialize.
func (n *Negotiator) AgentProtocol() int { return n.version }

// FromEditor implements translate.Translator.
func (n *Negotiator) FromEditor(m translate.Msg) ([]translate.Out, error) {
	if m.Kind == translate.LinkDown {
		var outs []translate.Out
		var err error
		if n.v2 != nil {
			outs, err = n.v2.FromEditor(m)
		} else {
			outs, err = n.v1.FromEditor(m)
		}
		n.reset()
		return outs, err
	}
	switch {
	case n.v2 != nil:
		return n.v2.FromEditor(m)
	case n.version != 0:
		return n.v1.FromEditor(m)
	case m.Kind == translate.Request && m.Method == "initialize":
		n.initRef, n.initParams, n.asked, n.firstErr = m.Ref, clone(m.Body), ProtocolVersion, nil
		if n.editor != 2 {
			m.Body = offer(m.Body)
			m.Frame = nil // rebuilt: the params changed
		}
	}
	return n.v1.FromEditor(m)
}

// offer returns the editor's initialize params asking for version 2.
func offer(params json.RawMessage) json.RawMessage {
	o := decode(params)
	if o == nil {
		o = object{}
	}
	o["protocolVersion"] = json.RawMessage("2")
	v2 := decode(initializeParams(params))
	for _, k := range []string{"info", "capabilities"} {
		if _, ok := o[k]; !ok {
			o[k] = v2[k]
		}
	}
	return marshal(o)
}

// FromAgent implements translate.Translator.
func (n *Negotiator) FromAgent(frame []byte) ([]translate.Out, error) {
	switch {
	case n.v2 != nil:
		return n.v2.FromAgent(frame)
	case n.version != 0:
		return n.v1.FromAgent(frame)
	}
	outs, err := n.v1.FromAgent(frame)
	return n.decide(outs, err, frame)
}

// PassesUpdates implements translate.UpdatePasser: once the agent has
// answered v1, FromAgentEnvelope hands frames to the v1 translator with
// nothing around them, so its answer holds for the Negotiator too. Before
// that, and on a v2 link, nothing passes.
func (n *Negotiator) PassesUpdates(sid string) bool {
	if n.version != 1 || n.v2 != nil {
		return false
	}
	p, ok := n.v1.(translate.UpdatePasser)
	return ok && p.PassesUpdates(sid)
}

// FromAgentEnvelope implements translate.EnvelopeTranslator, so that the
// v1 relay keeps taking frames parsed off the engine's loop.
func (n *Negotiator) FromAgentEnvelope(frame []byte, env *translate.Envelope, perr *translate.Error) ([]translate.Out, error) {
	if n.v2 != nil {
		return n.v2.FromAgent(frame)
	}
	et, ok := n.v1.(translate.EnvelopeTranslator)
	if !ok {
		return n.FromAgent(frame)
	}
	outs, err := et.FromAgentEnvelope(frame, env, perr)
	if n.version != 0 {
		return outs, err
	}
	return n.decide(outs, err, frame)
}

// decide looks in the v1 translator's outputs for the answer to the
// initialize in flight, and replaces it with what the version the agent
// answered calls for.
func (n *Negotiator) decide(outs []translate.Out, err error, frame []byte) ([]translate.Out, error) {
	for i, o := range outs {
		if n.initParams == nil || o.Ref != n.initRef || (o.Kind != translate.Reply && o.Kind != translate.Fail) {
			continue
		}
		rest := append([]translate.Out(nil), outs[i+1:]...)
		decided, derr := n.answered(o, frame)
		outs = append(append(outs[:i:i], decided...), rest...)
		if derr != nil && err == nil {
			err = derr
		}
		break
	}
	return outs, err
}

// answered handles the agent's answer to the initialize in flight and
// returns what replaces it.
func (n *Negotiator) answered(o translate.Out, frame []byte) ([]translate.Out, error) {
	if o.Kind == translate.Fail {
		if n.asked == ProtocolVersion && n.editor != 2 {
			// Ask again for 1, exactly as the relay always has.
			n.asked, n.firstErr = 1, clone(o.Body)
			outs, err := n.v1.FromEditor(translate.Msg{Kind: translate.Request, Ref: n.initRef, Method: "initialize", Body: clone(n.initParams)})
			note := note("agent-protocol-retry", "the agent refused initialize with protocolVersion 2 (%s); asked again with 1", errorMessage(o.Body))
			return append([]translate.Out{note}, outs...), err
		}
		if n.firstErr != nil {
			// Both failed: the editor learns both causes.
			e := translate.Errorf(translate.CodeInternalError, "the agent refused initialize with protocolVersion 2 (%s) and with 1 (%s)",
				errorMessage(n.firstErr), errorMessage(o.Body)).With("agentError", json.RawMessage(o.Body))
			o.Body = e.JSON()
		}
		return []translate.Out{o}, nil
	}
	v := gjson.GetBytes(o.Body, "protocolVersion")
	isV2 := v.Raw == "2" && (gjson.GetBytes(o.Body, "info").Exists() || !gjson.GetBytes(o.Body, "agentCapabilities").Exists())
	if !isV2 {
		n.version = 1
		var outs []translate.Out
		if v.Raw == "2" {
			outs = append(outs, note("agent-protocol-echo", "the agent answered protocolVersion 2 in v1's shape (agentCapabilities, no info): taken as v1"))
			o.Body = withVersion1(o.Body)
		}
		return append(outs, o), nil
	}
	if n.editor == 2 {
		// v2 both ways: the relay goes on, frames untouched (the
		// compliance shim's rules are v1's: the relay goes on without
		// them).
		n.version, n.v1 = 2, relay(n.v1)
		return []translate.Out{o}, nil
	}
	// The agent speaks v2: the v2 translator takes the link over, its ids
	// after the one the relay gave initialize.
	// It reads the agent's own answer: a v1 translator (the shim) may have
	// repaired the one it returned by v1's rules.
	lastID := gjson.GetBytes(frame, "id").Uint()
	result := json.RawMessage(gjson.GetBytes(frame, "result").Raw)
	n.version, n.v2, n.v1 = 2, New(), nil
	return n.v2.Adopt(n.initRef, lastID, clone(result)), nil
}

// relay returns the plain relay of a v1 translator that wraps one (the
// compliance shim), or tr itself.
func relay(tr translate.Translator) translate.Translator {
	if u, ok := tr.(interface{ Unwrap() translate.Translator }); ok {
		return u.Unwrap()
	}
	return tr
}

// withVersion1 returns an initialize result with protocolVersion 1.
func withVersion1(result json.RawMessage) json.RawMessage {
	o := decode(result)
	if o == nil {
		return result
	}
	o["protocolVersion"] = json.RawMessage("1")
	return marshal(o)
}

func errorMessage(errObj json.RawMessage) string {
	if m := gjson.GetBytes(errObj, "message"); m.Type == gjson.String {
		return m.Str
	}
	return fmt.Sprintf("%.200s", errObj)
}
