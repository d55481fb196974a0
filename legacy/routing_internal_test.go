package legacy

import "testing"

// The HTTP transport routes by a message's exact member names: JSON-RPC's
// are case-sensitive, so "Id", "METHOD" or "SessionId" name nothing.
func TestRoutingReadsExactNames(t *testing.T) {
	for _, c := range []struct {
		frame, in  string
		id, method string
		session    string
	}{
		{`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1"}}`, "params", "3", "session/prompt", "s1"},
		{`{"jsonrpc":"2.0","id":"a","result":{"sessionId":"s2"}}`, "result", `"a"`, "", "s2"},
		{`{"Id":{},"METHOD":"x","params":{"SessionId":"s"}}`, "params", "", "", ""},
		{`{"id":null,"method":"m"}`, "params", "null", "m", ""},
		{`{"id":1,"method":7,"params":[1]}`, "params", "1", "", ""},
		{`not json`, "params", "", "", ""},
	} {
		r := routing([]byte(c.frame), c.in)
		if string(r.ID) != c.id || r.Method != c.method || r.SessionID != c.session {
			t.Errorf("routing(%s) = id %q method %q session %q, want %q %q %q", c.frame, r.ID, r.Method, r.SessionID, c.id, c.method, c.session)
		}
	}
}
