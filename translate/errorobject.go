package translate

import (
	"bytes"
	"encoding/json"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Get is gjson.GetBytes without its copies: the result's Raw and Str share
// b's memory, so b must not change while they are in use. Translators get
// frames they own and never modify, which makes this safe on the hot path,
// where gjson.GetBytes would allocate a copy of every value it finds.
func Get(b []byte, path string) gjson.Result {
	if len(b) == 0 {
		return gjson.Result{}
	}
	return gjson.Get(unsafe.String(&b[0], len(b)), path)
}

// ErrorObject returns raw, an agent's JSON-RPC error object, in a form an
// editor accepts: raw itself (compacted onto one line) when its "code" is an
// integer and its "message" a string, exactly as spelled, else a -32603
// that says the agent's error was malformed and carries it in data. Strict
// editors reject a whole message whose error object is not well-formed.
func ErrorObject(raw json.RawMessage) json.RawMessage {
	code, msg := Get(raw, "code"), Get(raw, "message")
	if code.Type == gjson.Number && !strings.ContainsAny(code.Raw, ".eE") && msg.Type == gjson.String {
		if !bytes.ContainsAny(raw, "\r\n") { // (a CR is a line break to some readers too)
			return raw
		}
		var b bytes.Buffer
		if json.Compact(&b, raw) == nil {
			return b.Bytes()
		}
	}
	data := json.RawMessage(bytes.Clone(raw))
	if !json.Valid(data) {
		data, _ = json.Marshal(string(raw))
	}
	return Errorf(CodeInternalError, "the agent answered with a malformed error object (it needs an integer code and a string message): %.200s", raw).
		With("agentError", data).JSON()
}
