// Package acp is the ACP v1 relay dialect: the agent already speaks ACP v1, so
// the translator passes every message through as raw bytes and only re-numbers
// request ids on the agent hop (ids are per hop: each side numbers its own
// requests). Params, results, errors, _meta, unknown fields and extension
// methods are never decoded, so nothing is lost. The compliance rules that
// repair imperfect agents will live here too.
package acp

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/hcl/v2"
	"github.com/tidwall/gjson"
)

// Dialect is the ACP v1 relay.
var Dialect = translate.Dialect{
	Name:    "acp",
	Summary: "ACP v1 agent, relayed: ids renumbered per hop, initialize gains _meta[\"acp-bridge\"] (the agent keeps its agentInfo), multi-line frames compacted, null results repaired to {}",
	Relay:   true,
	Configure: func(options hcl.Body) (func() translate.Translator, hcl.Diagnostics) {
		if options != nil {
			var none struct{}
			if diags := hcldecode.DecodeBody(options, nil, &none); diags.HasErrors() {
				return nil, diags
			}
		}
		return func() translate.Translator { return New() }, nil
	},
}

// Relay is the translator of one ACP v1 agent link.
type Relay struct {
	nextAgentID uint64
	// toEditor maps the ids of requests sent to the agent to the editor
	// request they carry. Entries stay after Abandon so that the agent's
	// late answer still reaches the engine, which drops it and so learns
	// that the abandoned turn is over.
	toEditor map[uint64]translate.Ref
	agentID  map[translate.Ref]uint64

	nextCall translate.Ref
	// callIDs maps the translator's Call refs to the agent's raw request id.
	callIDs map[translate.Ref]json.RawMessage
	// callRefs maps the agent's request id key back, for $/cancel_request.
	callRefs map[string]translate.Ref
	// outs is reused for every FromAgent result, and sent for every frame
	// FromEditor returns (see translate.Translator): apart, so that a
	// caller that answers an agent's frame with an editor message (the v2
	// negotiator) keeps the outputs it is going through.
	outs, sent []translate.Out
	// initializing is the agent-hop id of an initialize not answered yet
	// (0: none), so that a first frame that is not JSON-RPC at all can fail
	// it with a hint instead of leaving it to time out.
	initializing uint64
}

// New returns a relay translator.
func New() *Relay {
	return &Relay{
		toEditor: make(map[uint64]translate.Ref),
		agentID:  make(map[translate.Ref]uint64),
		callIDs:  make(map[translate.Ref]json.RawMessage),
		callRefs: make(map[string]translate.Ref),
	}
}

// FromEditor implements translate.Translator.
func (r *Relay) FromEditor(m translate.Msg) ([]translate.Out, error) {
	switch m.Kind {
	case translate.Request:
		// Agent-hop ids count from 1: some agents test ids for truthiness
		// (mcp-remote's `if (!id)` lets id 0 bypass its interceptors).
		r.nextAgentID++
		id := r.nextAgentID
		r.toEditor[id] = m.Ref
		r.agentID[m.Ref] = id
		if m.Method == "initialize" {
			r.initializing = id
		}
		if f := spliceID(m, id); f != nil {
			return r.frame(f), nil
		}
		return r.frame(translate.RequestFrame(translate.IntID(id), m.Method, m.Body)), nil
	case translate.Notification:
		if len(m.Frame) >= passLarge {
			return r.frame(m.Frame), nil // already a JSON-RPC 2.0 notification
		}
		return r.frame(translate.NotificationFrame(m.Method, m.Body)), nil
	case translate.Response:
		id, ok := r.callIDs[m.Ref]
		if !ok {
			return nil, fmt.Errorf("acp: editor answered unknown call %d", m.Ref)
		}
		delete(r.callIDs, m.Ref)
		delete(r.callRefs, key(id))
		if m.Error != nil {
			return r.frame(translate.ErrorFrame(id, clone(m.Error))), nil
		}
		result := m.Body
		if result == nil {
			result = json.RawMessage("null")
		}
		return r.frame(translate.ResultFrame(id, clone(result))), nil
	case translate.CancelRequest, translate.Abandon:
		id, ok := r.agentID[m.Ref]
		if !ok {
			return nil, nil
		}
		if m.Kind == translate.Abandon {
			delete(r.agentID, m.Ref)
		}
		params := []byte(`{"requestId":` + strconv.FormatUint(id, 10) + `}`)
		return r.frame(translate.NotificationFrame("$/cancel_request", params)), nil
	case translate.LinkUp, translate.Tick:
		return nil, nil
	case translate.LinkDown:
		// The engine has answered everything routed here; start afresh.
		*r = *New()
		return nil, nil
	}
	return nil, fmt.Errorf("acp: unexpected editor message kind %d", m.Kind)
}

// FromAgent implements translate.Translator. The frame is kept: results,
// params and pass-through notifications are slices of it.
func (r *Relay) FromAgent(f []byte) ([]translate.Out, error) {
	env, perr := translate.ParseEnvelope(f)
	return r.fromAgent(f, &env, perr)
}

// FromAgentEnvelope implements translate.EnvelopeTranslator.
func (r *Relay) FromAgentEnvelope(f []byte, env *translate.Envelope, perr *translate.Error) ([]translate.Out, error) {
	return r.fromAgent(f, env, perr)
}

// fromAgent relays one parsed agent frame; the shim calls it with the
// envelope it parsed (and perhaps repaired) itself.
func (r *Relay) fromAgent(f []byte, env *translate.Envelope, perr *translate.Error) ([]translate.Out, error) {
	if perr != nil {
		if env.ID != nil && env.Method != "" {
			// A malformed request still deserves an answer, or the agent waits.
			return frame(translate.ErrorFrame(clone(env.ID), perr.JSON())), perr
		}
		if ref, ok := r.toEditor[r.initializing]; ok && r.initializing != 0 {
			// The agent's first words are not JSON-RPC: it does not speak
			// ACP, and initialize would otherwise only time out.
			delete(r.toEditor, r.initializing)
			delete(r.agentID, ref)
			r.initializing = 0
			hint := translate.Errorf(translate.CodeInternalError,
				"the agent does not speak ACP: it answered initialize with %.120s (%s); pick its dialect with --dialect (see 'acp-bridge dialects')", f, perr.Reason)
			return []translate.Out{{Kind: translate.Fail, Ref: ref, Body: hint.JSON()}}, perr
		}
		return nil, perr
	}
	switch {
	case env.IsResponse():
		n, err := strconv.ParseUint(string(env.ID), 10, 64)
		ref, ok := r.toEditor[n]
		if err != nil || !ok {
			return nil, fmt.Errorf("acp: agent answered unknown request id %s", env.ID)
		}
		delete(r.toEditor, n)
		delete(r.agentID, ref)
		if n == r.initializing {
			r.initializing = 0
		}
		if env.Error != nil {
			return r.one(translate.Out{Kind: translate.Fail, Ref: ref, Body: translate.ErrorObject(env.Error)}), nil
		}
		return r.one(translate.Out{Kind: translate.Reply, Ref: ref, Body: env.Result}), nil
	case env.IsRequest():
		r.nextCall++
		ref := r.nextCall
		id := clone(env.ID)
		r.callIDs[ref] = id
		r.callRefs[key(id)] = ref
		return []translate.Out{{Kind: translate.Call, Ref: ref, Method: env.Method, Body: env.Params}}, nil
	default:
		if env.Method == "$/cancel_request" {
			ref, ok := r.callRefs[key(json.RawMessage(gjson.GetBytes(env.Params, "requestId").Raw))]
			if !ok {
				return nil, nil // already answered or unknown: ignored, as $/cancel_request allows
			}
			return []translate.Out{{Kind: translate.CancelCall, Ref: ref}}, nil
		}
		var session string
		if env.Method == "session/update" {
			// An update an editor cannot route would be rejected whole by its
			// parser (sessionId is required); drop it here, where it is counted.
			session = env.SessionID
			if session == "" || env.UpdateKind == "" {
				// Not read by the scanner (an escape, another type): ask gjson.
				sid, kind := translate.Get(env.Params, "sessionId"), translate.Get(env.Params, "update.sessionUpdate")
				if sid.Type != gjson.String || sid.Str == "" || kind.Type != gjson.String || kind.Str == "" {
					return []translate.Out{{Kind: translate.Note, Method: "unroutable-updates",
						Body: []byte("session/update without sessionId or update.sessionUpdate dropped")}}, nil
				}
				session = sid.Str
			}
		}
		if env.Version == "2.0" {
			// Already an ACP notification: pass the agent's bytes through.
			return r.one(translate.Out{Kind: translate.Forward, Method: env.Method, Body: f, Params: env.Params, Session: session}), nil
		}
		return []translate.Out{{Kind: translate.Notify, Method: env.Method, Body: env.Params, Session: session}}, nil
	}
}

// PassesUpdates implements translate.UpdatePasser: the relay forwards
// every ACP update as the agent wrote it, whatever its state (fromAgent's
// last case, which reads and writes nothing of the relay's).
func (r *Relay) PassesUpdates(string) bool { return true }

// passLarge is the size from which the relay sends the editor's own frame on
// instead of building a new one: a copy of a 60 MiB prompt would double the
// bridge's memory for it. Smaller messages are rebuilt, so the agent sees
// the usual compact form.
const passLarge = 64 << 10

// spliceID rewrites the id of the editor's request to the agent-hop id in
// the frame's own memory when the frame is large, and returns the frame;
// nil when it cannot. Every other byte stays as the editor wrote it (no
// padding): when the new id is shorter, the shorter side of the frame, the
// bytes before the id or those after it, moves up to close the gap; when it
// is longer, the bytes after the id move into the frame's spare capacity
// (the engine's line reader leaves some), and without that the frame is
// rebuilt. The params must be the editor's own: the engine rewrites none
// but initialize's, which is small. m.Body may be moved by the splice; the
// relay does not use it afterwards.
func spliceID(m translate.Msg, id uint64) []byte {
	f, at := m.Frame, m.IDAt
	if len(f) < passLarge || at <= 0 || at >= len(f) {
		return nil
	}
	n := tokenLen(f[at:])
	if n == 0 || at+n > len(f) {
		return nil
	}
	var buf [20]byte
	newID := strconv.AppendUint(buf[:0], id, 10)
	end := at + n // the first byte after the old id
	switch d := len(newID) - n; {
	case d == 0:
	case d < 0 && at <= len(f)-end:
		// Shorter, and the head is the smaller side: move it up by -d.
		copy(f[-d:], f[:at])
		f = f[-d:] // the id is still at offset at
	case d < 0:
		// Shorter, and the tail is the smaller side: move it down.
		copy(f[at+len(newID):], f[end:])
		f = f[:len(f)+d]
	case d <= cap(f)-len(f):
		// Longer, with room after the frame: move the tail up.
		f = f[:len(f)+d]
		copy(f[end+d:], f[end:len(f)-d])
	default:
		return nil
	}
	copy(f[at:], newID)
	return f
}

// tokenLen is the length of the id token at the start of b: a string
// (escapes skipped) or a number; 0 for anything else.
func tokenLen(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	if b[0] == '"' {
		for i := 1; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return 0
	}
	i := 0
	for i < len(b) && (b[i] >= '0' && b[i] <= '9' || b[i] == '-' || b[i] == '+' || b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		i++
	}
	return i
}

// one returns o as the only output, in the reused slice.
func (r *Relay) one(o translate.Out) []translate.Out {
	r.outs = append(r.outs[:0], o)
	return r.outs
}

// clone copies a borrowed slice; nil stays nil so absent params stay absent.
func clone(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// frame returns b as FromEditor's one output, in r's reused slice.
func (r *Relay) frame(b []byte) []translate.Out {
	r.sent = append(r.sent[:0], translate.Out{Kind: translate.Frame, Body: b})
	return r.sent
}

func frame(b []byte) []translate.Out {
	return []translate.Out{{Kind: translate.Frame, Body: b}}
}

// key canonicalises an agent's raw id for map lookups (1 and "1" differ).
func key(raw json.RawMessage) string {
	r := gjson.ParseBytes(raw)
	if r.Type == gjson.String {
		return "s:" + r.Str
	}
	return "r:" + r.Raw
}
