// The shim's repairs of session/update notifications: field names, the
// schema's shape of each update kind, and updates to drop.

package acp

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acpschema"
	"github.com/tidwall/gjson"
)

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

// PassesUpdates implements translate.UpdatePasser: while a turn of sid
// runs, neither answered nor replaying history, update passes a plain
// chunk of it to the relay untouched (no rule has anything to say of it:
// its kind is stable, its shape the schema's, its turn open) and changes
// nothing but the one-entry lookup cache.
func (s *Shim) PassesUpdates(sid string) bool {
	t := s.sessions[sid]
	return t != nil && t.open > 0 && !t.ended && !t.holding && !t.loading && s.r.PassesUpdates(sid)
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
