package fakerules

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// AgentRPC is the agent/createSession, agent/prompt, agent/update design of
// docs/agent-protocols.md#agent-rpc (JSON-RPC 2.0; the server sends "initialized"
// after answering initialize). Tool updates carry data {id,name,arguments}.
// Until initialize is answered (after fakeagent.InitDelay) a request gets
// the design's "Server not initialized" (-32603) and a notification is
// dropped, so a client that does not wait for the answer is caught.
func AgentRPC(r io.Reader, w io.Writer, opt fakeagent.Options) error {
	c := newConn(r, w, opt)
	sessions := 0
	var initialized atomic.Bool
	for line := range c.in {
		var m rpc
		if json.Unmarshal(line, &m) != nil {
			c.send(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`)
			continue
		}
		id := string(m.ID)
		if m.Method != "initialize" && m.Method != "" && !initialized.Load() {
			fmt.Fprintf(os.Stderr, "fake agent-rpc agent: refused %s: it came before initialize was answered\n", m.Method)
			if m.ID != nil {
				c.send(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":"Server not initialized"}}`)
			}
			continue
		}
		var p struct {
			SessionID    string `json:"sessionId"`
			Prompt       string `json:"prompt"`
			WorkspaceDir string `json:"workspaceDir"`
		}
		_ = json.Unmarshal(m.Params, &p)
		update := func(kind, content, data string) {
			s := `{"jsonrpc":"2.0","method":"agent/update","params":{"sessionId":` + q(p.SessionID) + `,"updateType":"` + kind + `","content":` + q(content)
			if data != "" {
				s += `,"data":` + data
			}
			c.send(s + `}}`)
		}
		switch m.Method {
		case "initialize":
			go func() {
				time.Sleep(fakeagent.InitDelay)
				initialized.Store(true)
				c.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"1.0","capabilities":{"sessionManagement":true,"streaming":true,"toolExecution":true,"fileOperations":true,"webSearch":true},"serverInfo":{"name":"mini-agent","version":"0.1.0"}}}`)
				c.send(`{"jsonrpc":"2.0","method":"initialized","params":{}}`)
			}()
		case "agent/createSession":
			if p.WorkspaceDir == "" {
				c.send(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32602,"message":"workspaceDir is required"}}`)
				continue
			}
			sessions++
			c.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"sessionId":"uuid-` + fmt.Sprint(sessions) + `"}}`)
		case "agent/prompt":
			update("thinking", "Processing your request...", "")
			final := "You said: " + p.Prompt
			switch word(p.Prompt) {
			case "hello":
				update("response", "You said: ", "")
				update("response", p.Prompt, "")
			case "tool":
				update("tool_call", "List files", `{"id":"call_1","name":"bash","arguments":{"command":"ls"}}`)
				update("tool_result", "a.txt\n", `{"id":"call_1","name":"bash","status":"completed"}`)
				final = "Found a.txt"
			case "seam":
				// The seam matrix's turn (seam_matrix_e2e_test.go); the
				// format has no permission requests.
				update("response", "seam-before", "")
				update("tool_call", "Run the seam tool", `{"id":"seam-1","name":"bash","arguments":{"command":"true"}}`)
				update("tool_result", "", `{"id":"seam-1","name":"bash","status":"completed"}`)
				update("response", "seam-after", "")
				final = "seam-beforeseam-after"
			case "echo":
				final = string(line)
			case "fail":
				c.send(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":"model overloaded, try later"}}`)
				continue
			case "die":
				opt.Die()
				return nil
			case "slow":
				update("response", "working", "")
				deadline := time.After(5 * time.Second)
			wait:
				for {
					select {
					case l, ok := <-c.in:
						var cm rpc
						if !ok {
							return nil
						}
						if json.Unmarshal(l, &cm) == nil && cm.Method == "agent/cancelSession" {
							c.send(`{"jsonrpc":"2.0","id":` + string(cm.ID) + `,"result":{"cancelled":true}}`)
							break wait
						}
					case <-deadline:
						break wait
					}
				}
				c.send(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":"cancelled"}}`)
				continue
			}
			c.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":` + q(final) + `}}`)
		case "agent/cancelSession":
			c.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"cancelled":true}}`)
		case "shutdown":
			c.send(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)
		default:
			if m.ID != nil {
				c.send(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"Method not found"}}`)
			}
		}
	}
	return nil
}
