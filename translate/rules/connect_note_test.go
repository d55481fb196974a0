package rules

import (
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
)

// A profile whose connect block waits for a frame says which one, as a
// note, when it starts waiting; a frame that does not match while it waits
// is reported against that frame, so that "initialize timed out" can be
// told as "the agent never sent the connect frame, it sent this instead".
func TestConnectExpectNoted(t *testing.T) {
	newTr, diags := shipped(t, "mini-agent-ws").Dialect().Configure(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	tr := newTr()
	notes := func(outs []translate.Out, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range outs {
			if o.Kind == translate.Note {
				got = append(got, o.Method+": "+string(o.Body))
			}
		}
		return got
	}
	if _, err := tr.FromEditor(translate.Msg{Kind: translate.Request, Ref: 1, Method: "initialize", Body: []byte(`{"protocolVersion":1}`)}); err != nil {
		t.Fatal(err)
	}
	got := notes(tr.FromEditor(translate.Msg{Kind: translate.LinkUp}))
	want := `connect-expect: profile mini-agent-ws waits for the agent's connect frame matching { "type" = "connection_established" }`
	if len(got) != 1 || got[0] != want {
		t.Errorf("at link up, notes = %q, want [%q]", got, want)
	}
	got = notes(tr.FromAgent([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`)))
	if len(got) != 1 || !strings.Contains(got[0], `still waits for the connect frame matching { "type" = "connection_established" }; got {"jsonrpc"`) {
		t.Errorf("a frame that is not the connect frame: notes = %q", got)
	}
}
