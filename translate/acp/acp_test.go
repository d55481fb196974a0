package acp_test

import (
	"testing"

	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/translatetest"
)

func TestGolden(t *testing.T) {
	translatetest.Run(t, acp.Dialect, "testdata/*.txtar")
}

const fuzzSetup = `
editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
agent> {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}
editor> {"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"s","prompt":[]}}
`

// FuzzFromAgent feeds arbitrary agent frames to a relay with a prompt
// running: no panic, and no answer for a request the editor never made.
func FuzzFromAgent(f *testing.F) {
	seeds, err := translatetest.AgentLines("testdata/*.txtar")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		f.Add(s)
	}
	translatetest.FuzzAgent(f, acp.Dialect, "", fuzzSetup)
}
