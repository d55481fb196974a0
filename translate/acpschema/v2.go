package acpschema

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// schemaV2JSON is the stable ACP v2 schema (schema/SOURCE.md says where it
// comes from).
//
//go:embed schema/acp-v2.json
var schemaV2JSON []byte

// v2Defs are the $defs a v2 schema must have.
var v2Defs = []string{"Error", "RequestId", "UpdateSessionNotification", "PromptResponse", "StateUpdate"}

var (
	schemaV2Once sync.Once
	schemaV2Val  *Schema
	schemaV2Err  error
)

// LoadSchemaV2 returns the embedded ACP v2 schema, compiled once. It is used
// as the v1 schema is: RequestDef, NotificationDef and ResultDef name the
// types of what an agent sends a v2 client.
func LoadSchemaV2() (*Schema, error) {
	schemaV2Once.Do(func() { schemaV2Val, schemaV2Err = parseSchema(schemaV2JSON, v2Defs) })
	return schemaV2Val, schemaV2Err
}

// ValidateToClient checks one whole JSON-RPC message an agent side writes
// to a client: a request's or notification's params against its method's
// type, a response's result against the type of the request it answers
// (answered names that request's method; "" when unknown, which checks only
// the envelope) and an error against Error. Extension methods (starting
// with "_") carry anything.
func (s *Schema) ValidateToClient(msg []byte, answered string) []string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return []string{"not a JSON object: " + err.Error()}
	}
	var probs []string
	if string(m["jsonrpc"]) != `"2.0"` {
		probs = append(probs, `"jsonrpc" is not "2.0"`)
	}
	var method string
	if raw, ok := m["method"]; ok {
		if err := json.Unmarshal(raw, &method); err != nil {
			return append(probs, `"method" is not a string`)
		}
	}
	params := m["params"]
	if params == nil {
		params = json.RawMessage("null")
	}
	_, hasID := m["id"]
	check := func(def, what string, raw json.RawMessage) {
		if def == "" {
			if !strings.HasPrefix(method, "_") {
				probs = append(probs, fmt.Sprintf("%s: no such method in this protocol version", what))
			}
			return
		}
		for _, p := range s.Validate(def, raw) {
			probs = append(probs, what+": "+p)
		}
	}
	switch {
	case method != "" && hasID:
		check(s.RequestDef(method), method+" params", params)
	case method != "":
		check(s.NotificationDef(method), method+" params", params)
	case !hasID:
		probs = append(probs, `neither "method" nor "id"`)
	case m["error"] != nil:
		for _, p := range s.Validate("Error", m["error"]) {
			probs = append(probs, "error: "+p)
		}
	case m["result"] == nil:
		probs = append(probs, `a response without "result" or "error"`)
	case answered != "" && !strings.HasPrefix(answered, "_"):
		def := s.ResultDef(answered)
		if def == "" {
			probs = append(probs, fmt.Sprintf("result of %s: no such method in this protocol version", answered))
			break
		}
		for _, p := range s.Validate(def, m["result"]) {
			probs = append(probs, answered+" result: "+p)
		}
	}
	return probs
}
