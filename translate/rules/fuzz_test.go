package rules

import (
	"bytes"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate/translatetest"
)

// fuzzCase is one profile's fuzz setup: a handshake that leaves a prompt
// (editor id 2) running, and the lines that must then end that prompt
// whatever the fuzzed frames did: a session/cancel plus, for profiles that
// forward the cancel, the agent's end of the turn.
type fuzzCase struct {
	setup, finish string
}

var fuzzCases = map[string]fuzzCase{
	"mini-agent-ws": {
		setup: `editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
event> link-up
agent> {"type":"connection_established","clientId":"c","timestamp":"t","protocol":"acp","version":"1.0"}
agent> {"id":"u1","type":"initialize_response","timestamp":"t","data":{}}
editor> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
agent> {"id":"u2","type":"new_session_response","timestamp":"t","session_id":"S","data":{"sessionId":"S"}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hi"}]}}`,
		finish: `editor> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}`,
	},
	"agent-rpc": {
		setup: `editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
agent> {"jsonrpc":"2.0","id":1,"result":{}}
editor> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
agent> {"jsonrpc":"2.0","id":2,"result":{"sessionId":"u-1"}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"u-1","prompt":[{"type":"text","text":"hi"}]}}`,
		finish: `editor> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"u-1"}}
agent> {"jsonrpc":"2.0","id":3,"result":{}}`,
	},
	"open-interpreter": {
		setup: `editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
event> link-up
agent> {"auth":true}
editor> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hi"}]}}`,
		finish: `editor> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"sess-1"}}
agent> {"role":"server","type":"status","content":"complete"}`,
	},
	"zeroclaw": {
		setup: `editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
agent> {"jsonrpc":"2.0","id":1,"result":{}}
editor> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
agent> {"jsonrpc":"2.0","id":2,"result":{"sessionId":"z-1"}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"z-1","prompt":[{"type":"text","text":"hi"}]}}`,
		finish: `editor> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"z-1"}}`,
	},
	"chat-lines": {
		setup: `editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
editor> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"session-1","prompt":[{"type":"text","text":"hi"}]}}`,
		finish: `editor> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"session-1"}}
event> tick 1h`,
	},
	// Not shipped: turnScope (rules_test.go), for turn { key }, turn.sent
	// in matches and the cancel block's ack and grace.
	"turn-scope": {
		setup: `editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
editor> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"session-1","prompt":[{"type":"text","text":"hi"}]}}`,
		finish: `editor> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"session-1"}}
event> tick 1h`,
	},
	// Not shipped: turnKeep (rules_test.go), for keep in events and turn.NAME.
	"turn-keep": {
		setup: `editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
editor> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"session-1","prompt":[{"type":"text","text":"hi"}]}}`,
		finish: `editor> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"session-1"}}
event> tick 1h`,
	},
	// Not shipped: turnKeepKey (rules_test.go), for a turn key compared
	// with a kept turn value.
	"turn-keep-key": {
		setup: `editor> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}
editor> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}
editor> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"session-1","prompt":[{"type":"text","text":"hi"}]}}`,
		finish: `editor> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"session-1"}}
event> tick 1h`,
	},
}

// fuzzProfile is the profile of fuzz case name.
func fuzzProfile(t testing.TB, name string) *Profile {
	src := map[string]string{"turn-scope": turnScope, "turn-keep": turnKeep, "turn-keep-key": turnKeepKey}[name]
	if src == "" {
		return shipped(t, name)
	}
	p, diags := Parse(name+".hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return p
}

// FuzzProfiles feeds arbitrary agent frames (one per line) to every
// shipped profile with a prompt running: no panic, no invariant broken
// (answers only for live requests, valid one-line JSON, well-formed
// updates and errors), and afterwards every editor request is answered
// once the editor cancels and the agent ends the turn.
func FuzzProfiles(f *testing.F) {
	for name := range fuzzCases {
		seeds, err := translatetest.AgentLines("testdata/" + name + "/*.txtar")
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(strings.Join(func() []string {
			var s []string
			for _, b := range seeds {
				s = append(s, string(b))
			}
			return s
		}(), "\n")))
	}
	f.Add([]byte(`{"role":"assistant","type":"code","start":true}` + "\n" + `{"role":"server","type":"status","content":"complete"}`))
	f.Add([]byte("not json\n{}\n[]\n\"x\"\n{\"id\":2}"))
	profiles := map[string]*Profile{}
	for name := range fuzzCases {
		profiles[name] = fuzzProfile(f, name)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzProfiles(t, profiles, data) })
}

func fuzzProfiles(t *testing.T, profiles map[string]*Profile, data []byte) {
	{
		for name, fc := range fuzzCases {
			dr, err := translatetest.NewDriver(profiles[name].Dialect(), nil, "options.hcl")
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(fc.setup, "\n") {
				if _, err := dr.Feed(l); err != nil {
					t.Fatalf("%s setup: %v", name, err)
				}
			}
			for _, frame := range bytes.Split(data, []byte("\n")) {
				dr.Agent(frame)
			}
			for _, l := range strings.Split(fc.finish, "\n") {
				if _, err := dr.Feed(l); err != nil {
					t.Fatalf("%s finish: %v", name, err)
				}
			}
			dr.Finish(nil)
			if p := dr.Problems(); len(p) > 0 {
				t.Fatalf("%s with input %q:\n%s", name, data, strings.Join(p, "\n"))
			}
		}
	}
}
