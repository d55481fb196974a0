package trace

import (
	"bytes"
	"strings"
	"testing"
)

// The page says which ACP version each hop negotiated: the editor hop's
// from acp-bridge's _meta, the agent hop's from the agent's answer; and
// the initialize answers' arrows carry their version.
func TestWriteHTML_Protocols(t *testing.T) {
	mk := func(hop, dir string, link int, msg string) Record {
		r := Record{Hop: hop, Dir: dir, Link: link}
		Classify(&r, []byte(msg))
		return r
	}
	recs := []Record{
		mk("editor", "in", 0, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"zed","version":"1"}}}`),
		mk("agent", "out", 1, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`),
		mk("agent", "in", 1, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`),
		mk("editor", "out", 0, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":2,"_meta":{"acp-bridge":{"editorProtocol":2,"agentProtocol":1}}}}`),
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, "t", recs); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`4 messages, 0 notes; agent hop (link 1) answered ACP 1; editor hop ACP 2, agent hop ACP 1`,
		`result #0 ACP 1`,
		`result #1 ACP 2`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
}
