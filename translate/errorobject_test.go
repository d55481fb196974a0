package translate_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
)

// An agent's error object is passed on as it came when it is well formed,
// and put on one line when it is not: a CR between its tokens is a line
// break to some readers, as a newline is to all (FuzzFromAgent of acpv0
// found the CR).
func TestErrorObjectStaysOnOneLine(t *testing.T) {
	for _, raw := range []string{
		`{"code":1,"message":"m"}`,
		"{\"code\":\r0,\"message\":\"\"}",
		"{\"code\":1,\n\"message\":\"m\"}",
		"{\"code\":1,\r\n \"message\":\"m\",\"data\":{\"x\":\r1}}",
		"{\"code\":1.5,\r\"message\":\"m\"}",
	} {
		got := translate.ErrorObject(json.RawMessage(raw))
		if bytes.ContainsAny(got, "\r\n") {
			t.Errorf("ErrorObject(%q) = %q: a line break in it", raw, got)
		}
		if !json.Valid(got) {
			t.Errorf("ErrorObject(%q) = %q: not JSON", raw, got)
		}
	}
	if raw := `{"code":1,"message":"m"}`; string(translate.ErrorObject(json.RawMessage(raw))) != raw {
		t.Errorf("a well-formed error object on one line was not passed on as it came")
	}
}
