// The agent's requests to the editor through the shim: permission
// requests remembered by session, and capabilities the editor did not
// advertise.

package acp

import (
	"bytes"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

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
