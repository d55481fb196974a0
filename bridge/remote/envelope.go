// What routing reads of a message: one JSON object on one line (no
// batches), and its id, method and session.

package remote

import (
	"bytes"
	"encoding/json"
	"errors"
)

// oneLine checks that body is one JSON object and returns it on one line
// (the engine's input is newline-delimited): as is when it already is one,
// else without its insignificant whitespace.
func oneLine(body []byte) ([]byte, error) {
	// JSON's own whitespace only: bytes.TrimSpace would also take a
	// trailing \v or U+0085 that makes the body invalid JSON.
	trimmed := bytes.Trim(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' && json.Valid(trimmed) {
		return nil, errBatch
	}
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, errors.New("the body is not a JSON-RPC message (one JSON object)")
	}
	if bytes.ContainsAny(trimmed, "\r\n") {
		var b bytes.Buffer
		_ = json.Compact(&b, trimmed)
		return b.Bytes(), nil
	}
	return trimmed, nil
}

var errBatch = errors.New("JSON-RPC batches are not supported")

// envelope is what routing needs from a message.
type envelope struct {
	id      string // the raw id, "" when absent
	method  string
	session string // params.sessionId, or result.sessionId of a response
}

func (e envelope) isRequest() bool { return e.method != "" && e.id != "" }

// parseEnvelope reads a message's members by their exact names: JSON-RPC's
// are case-sensitive, where encoding/json's struct tags would also take
// "Id" or "METHOD" for them (FuzzEnvelope found `{"Id":{}}` routed as a
// message with an id).
func parseEnvelope(line []byte) envelope {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return envelope{}
	}
	var e envelope
	if id := m["id"]; len(id) > 0 {
		e.id = string(id)
	}
	_ = json.Unmarshal(m["method"], &e.method)
	if sid, ok := sessionIDOf(m["params"]); ok {
		e.session = sid
	} else if sid, ok := sessionIDOf(m["result"]); ok {
		e.session = sid
	}
	return e
}

// sessionIDOf returns raw's "sessionId" member when raw is an object whose
// sessionId, if any, is a string (ok); "" when it has none.
func sessionIDOf(raw json.RawMessage) (string, bool) {
	var obj map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &obj) != nil || obj == nil {
		return "", false
	}
	sid, ok := obj["sessionId"]
	if !ok {
		return "", true
	}
	var s string
	if json.Unmarshal(sid, &s) != nil {
		return "", false
	}
	return s, true
}
