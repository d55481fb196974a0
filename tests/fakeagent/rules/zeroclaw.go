package fakerules

import (
	"encoding/json"
	"io"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// ZeroClaw is the first `zeroclaw acp` (docs/agent-protocols.md#zeroclaw):
// snake_case params, session/event notifications, tool events without ids,
// session/stop as teardown. There is no cancel.
func ZeroClaw(r io.Reader, w io.Writer, opt fakeagent.Options) error {
	c := newConn(r, w, opt)
	sessions := map[string]bool{}
	n := 0
	for line := range c.in {
		var m rpc
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		id := string(m.ID)
		var p struct {
			SessionID    string `json:"session_id"`
			WorkspaceDir string `json:"workspace_dir"`
			Prompt       string `json:"prompt"`
		}
		_ = json.Unmarshal(m.Params, &p)
		event := func(rest string) {
			c.send(`{"jsonrpc":"2.0","method":"session/event","params":{"session_id":` + q(p.SessionID) + `,` + rest + `}}`)
		}
		switch m.Method {
		case "initialize":
			c.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocol_version":"1.0","server_info":{"name":"zeroclaw-acp","version":"0.1.0"},"capabilities":{"streaming":true,"max_sessions":10,"session_timeout_secs":3600},"methods":["initialize","session/new","session/prompt","session/stop"]}}`)
		case "session/new":
			if p.WorkspaceDir == "" {
				c.send(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32602,"message":"workspace_dir missing"}}`)
				continue
			}
			n++
			sid := "0f0e-" + string(rune('a'+n))
			sessions[sid] = true
			c.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"sessionId":"` + sid + `","workspace_dir":` + q(p.WorkspaceDir) + `}}`)
		case "session/prompt":
			if !sessions[p.SessionID] {
				c.send(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32000,"message":"session not found"}}`)
				continue
			}
			event(`"type":"thinking","content":"Thinking about it"`)
			final := "You said: " + p.Prompt
			switch word(p.Prompt) {
			case "hello":
				event(`"type":"chunk","content":"You said: "`)
				event(`"type":"chunk","content":` + q(p.Prompt))
			case "tool":
				event(`"type":"tool_call","name":"shell","args":{"command":"ls"}`)
				event(`"type":"tool_call","name":"file_read","args":{"path":"a.txt"}`)
				event(`"type":"tool_result","name":"file_read","output":"hello"`)
				event(`"type":"tool_result","name":"shell","output":"a.txt"`)
				event(`"type":"chunk","content":"Found a.txt"`)
				final = "Found a.txt"
			case "echo":
				event(`"type":"chunk","content":` + q(string(line)))
				final = string(line)
			case "fail":
				c.send(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":"provider error: rate limited"}}`)
				continue
			case "die":
				opt.Die()
				return nil
			case "slow":
				event(`"type":"chunk","content":"working"`)
				time.Sleep(500 * time.Millisecond)
				event(`"type":"chunk","content":"late"`)
			}
			c.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"session_id":` + q(p.SessionID) + `,"content":` + q(final) + `}}`)
		case "session/stop":
			delete(sessions, p.SessionID)
			c.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"session_id":` + q(p.SessionID) + `,"stopped":true}}`)
		default:
			if m.ID != nil {
				c.send(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"Method not found"}}`)
			}
		}
	}
	return nil
}
