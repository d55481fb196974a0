// The schema scenario: every message the agent wrote, in every scenario,
// validated against the ACP schema, and the helpers that describe what
// did not match.

package check

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

func scSchema(r *run) verdict {
	if v, ok := r.basicSession(); !ok {
		return v
	}
	if _, err := r.proto.loadSchema(); err != nil {
		return notRun("%v", err)
	}
	// This session's findings and those of the scenarios before it.
	all := append(append([]finding(nil), r.prior...), r.findings("schema")...)
	if len(all) == 0 {
		return pass("%d messages of this session and every message of the scenarios before match", len(r.messages()))
	}
	var probs, extra []string
	for _, f := range all {
		if len(probs) < 5 {
			probs = append(probs, fmt.Sprintf("%s #%d: %s", f.scenario, f.n, strings.Join(f.probs, "; ")))
		}
		if len(extra) < 10 {
			extra = append(extra, "("+f.scenario+") "+f.line)
		}
	}
	if len(all) > 5 {
		probs = append(probs, fmt.Sprintf("… and %d more", len(all)-5))
	}
	v := fail(nil, "%d message(s) do not match the ACP %s schema: %s", len(all), r.proto.name, strings.Join(probs, " | "))
	v.extra = extra
	return v
}

var envelopeKeys = map[string]bool{"jsonrpc": true, "id": true, "method": true, "params": true, "result": true, "error": true}

// validate checks one message from the agent: the JSON-RPC envelope, then
// its params, result or error against the schema.
func (r *run) validate(s *Schema, m Msg) []string {
	probs := unexpectedMembers(m)
	if v := m.Get("jsonrpc"); v.Str != "2.0" {
		probs = append(probs, fmt.Sprintf(`jsonrpc: want "2.0", got %s`, orAbsent(v)))
	}
	if id := m.Get("id"); id.Exists() && id.Type != gjson.String && id.Type != gjson.Null && (id.Type != gjson.Number || strings.ContainsAny(id.Raw, ".eE")) {
		probs = append(probs, "id: want a string, an integer or null, got "+id.Raw)
	}
	params := []byte(m.Get("params").Raw)
	if len(params) == 0 {
		params = []byte("null")
	}
	switch {
	case m.IsResponse():
		hasR, hasE := m.Get("result").Exists(), m.Get("error").Exists()
		if hasR == hasE {
			probs = append(probs, "a response must carry exactly one of result and error")
		}
		answered, method := r.answered(m)
		probs = append(probs, answered...)
		if hasE {
			probs = append(probs, prefix("error.", s.Validate("Error", []byte(m.Get("error").Raw)))...)
		} else if def := s.ResultDef(method); hasR && def != "" {
			probs = append(probs, prefix("result.", s.Validate(def, []byte(m.Get("result").Raw)))...)
		}
	case m.IsRequest():
		if def := s.RequestDef(m.method); def != "" {
			probs = append(probs, prefix("params.", s.Validate(def, params))...)
		} else if !strings.HasPrefix(m.method, "_") {
			probs = append(probs, fmt.Sprintf("method %q is not an agent→client method of ACP v1", m.method))
		}
	case m.IsNotification():
		if m.method == "$/cancel_request" && !r.agentSent(m.Get("params.requestId").Raw, m.N) {
			probs = append(probs, fmt.Sprintf("params.requestId: %s is not the id of a request the agent sent (ids are per direction: a $/cancel_request names a request its sender sent)", m.Get("params.requestId").Raw))
		}
		if def := s.NotificationDef(m.method); def != "" {
			probs = append(probs, prefix("params.", s.Validate(def, params))...)
		} else if !strings.HasPrefix(m.method, "_") {
			probs = append(probs, fmt.Sprintf("method %q is not an agent→client notification of ACP v1", m.method))
		}
	default:
		probs = append(probs, "neither a request, a response nor a notification")
	}
	return probs
}

// unexpectedMembers lists m's top-level members that JSON-RPC does not
// have.
func unexpectedMembers(m Msg) []string {
	var probs []string
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(m.Raw, &obj)
	for k := range obj {
		if !envelopeKeys[k] {
			probs = append(probs, fmt.Sprintf("unexpected top-level member %q", k))
		}
	}
	return probs
}

// answered checks the id of m, a response, against the client's requests,
// and returns the method of the request it answers ("" for none).
func (r *run) answered(m Msg) (probs []string, method string) {
	method, ours := r.methodOf(m.id)
	switch {
	case m.id == "null" && !m.IsError():
		probs = append(probs, "id: null is only for an error answering a request whose id could not be read")
	case !ours && m.id != "null":
		probs = append(probs, fmt.Sprintf("id: %s answers no request of the client (was a notification answered?)", m.id))
	}
	return probs, method
}

// agentSent reports whether the agent sent a request with raw id before
// transcript index before.
func (r *run) agentSent(id string, before int) bool {
	for _, m := range r.messages()[:before] {
		if !m.Out && m.IsRequest() && m.id == id {
			return true
		}
	}
	return false
}

// firstKey names the first of keys that m has.
func firstKey(m Msg, keys ...string) string {
	for _, k := range keys {
		if m.Get(k).Exists() {
			return "an " + k + " object"
		}
	}
	return "no result, no error"
}

func firstN(xs []string, n int) []string {
	if len(xs) > n {
		return append(xs[:n:n], fmt.Sprintf("… and %d more", len(xs)-n))
	}
	return xs
}

func orAbsent(v gjson.Result) string {
	if !v.Exists() {
		return "nothing"
	}
	return v.Raw
}

func prefix(p string, probs []string) []string {
	for i, x := range probs {
		probs[i] = p + x
	}
	return probs
}
