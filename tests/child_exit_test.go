//go:build unix

package tests

import (
	"strings"
	"testing"
	"time"
)

// An agent that exits at once, before the editor has sent anything,
// still gets the editor's initialize an answer: an error that says how
// it ended.
func TestChild_AgentThatExitsAtOnceIsReported(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"bare", nil},
		{"with a flag", []string{"--log-level", "info"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := StartBridge(t, append(tc.flags, "--", "/bin/sh", "-c", "exit 7"), nil, nil)
			b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
			l := b.Next(10 * time.Second)
			if msg := l.Get("error.message").String(); !strings.Contains(msg, "exited with status 7") {
				t.Fatalf("initialize of an agent that exited with status 7: %s", l)
			}
		})
	}
}
