package bridge_test

import (
	"strings"
	"testing"
)

// TestDeepFrames_RefusedAndServingContinues: a line nested millions of
// levels deep, from the editor or from the agent, used to overflow the
// stack in gjson's recursive validator and kill the process. Now the editor
// gets -32700 naming the limit, the agent's frame is dropped, and both
// hops keep working.
func TestDeepFrames_RefusedAndServingContinues(t *testing.T) {
	deep := strings.Repeat("[", 6_000_000)
	h := newHarness(t, nil)
	h.send(deep)
	if got := h.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700`) ||
		!strings.Contains(got, "nested deeper than 10000 levels") {
		t.Errorf("answer to a deep line = %s", got)
	}
	h.send(`{"jsonrpc":"2.0","id":5,"method":"session/new","params":` + deep + `}`)
	if got := h.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700`) {
		t.Errorf("answer to a deep request = %s", got)
	}
	h.initialize()
	h.agentSend(deep)
	h.agentSend(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":` + deep + `}}`)
	h.newSession("1")
}
