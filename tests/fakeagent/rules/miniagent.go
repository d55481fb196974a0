package fakerules

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// MiniAgent is the Mini-Agent fork's enhanced_server.py
// (docs/agent-protocols.md#mini-agent-ws): connection_established on connect,
// replies with fresh ids, status_update with camelCase sessionId, error
// frames, heartbeats, and a cancelSession that poisons the session. Client
// frames with a key outside the dataclass fields fail to parse, as in the real
// server.
func MiniAgent(r io.Reader, w io.Writer, opt fakeagent.Options) error {
	c := newConn(r, w, opt)
	n := 0
	fresh := func() string { n++; return fmt.Sprintf("uuid-%d", n) }
	ts := `"timestamp":"2026-03-01T12:00:00.000000"`
	c.send(`{"type":"connection_established","clientId":"client-1",` + ts + `,"protocol":"acp","version":"1.0"}`)
	sid := ""
	poisoned := false
	for line := range c.in {
		var f map[string]json.RawMessage
		if json.Unmarshal(line, &f) != nil {
			c.send(`{"id":"` + fresh() + `","type":"error",` + ts + `,"error":"Invalid JSON in message"}`)
			continue
		}
		bad := ""
		for k := range f {
			switch k {
			case "id", "type", "timestamp", "session_id", "data", "error":
			default:
				bad = k
			}
		}
		var typ, id, stamp string
		_ = json.Unmarshal(f["type"], &typ)
		if json.Unmarshal(f["id"], &id) != nil || json.Unmarshal(f["timestamp"], &stamp) != nil || bad != "" {
			c.send(`{"id":"` + fresh() + `","type":"error",` + ts + `,"error":"Message processing error: bad field ` + bad + `"}`)
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, stamp); err != nil {
			c.send(`{"id":"` + fresh() + `","type":"error",` + ts + `,"error":"Message processing error: timestamp"}`)
			continue
		}
		var data struct {
			WorkspaceDir string `json:"workspaceDir"`
			Prompt       string `json:"prompt"`
		}
		_ = json.Unmarshal(f["data"], &data)
		var session string
		_ = json.Unmarshal(f["session_id"], &session)
		switch typ {
		case "initialize":
			c.send(`{"id":"` + fresh() + `","type":"initialize_response",` + ts + `,"data":{"protocol_version":"1.0","features":["real_time_communication","session_management"],"agent_info":{"name":"mini-agent","version":"0.1.0","description":"fake"}}}`)
		case "newSession":
			if data.WorkspaceDir == "" {
				c.send(`{"id":"` + fresh() + `","type":"error",` + ts + `,"error":"Session creation failed: no workspaceDir"}`)
				continue
			}
			sid = "sid-" + fresh()
			c.send(`{"id":"` + fresh() + `","type":"new_session_response",` + ts + `,"session_id":"` + sid + `","data":{"sessionId":"` + sid + `","workspaceDir":` + q(data.WorkspaceDir) + `,"createdAt":"2026-03-01T12:00:00"}}`)
		case "prompt":
			if session != sid || sid == "" {
				c.send(`{"id":"` + fresh() + `","type":"error",` + ts + `,"error":"Invalid session ID"}`)
				continue
			}
			if poisoned {
				c.send(`{"id":"` + fresh() + `","type":"error",` + ts + `,"error":"Session has been cancelled"}`)
				continue
			}
			c.send(`{"type":"status_update","sessionId":"` + sid + `","status":"processing",` + ts + `}`)
			content := "You said: " + data.Prompt
			switch word(data.Prompt) {
			case "echo":
				content = string(line)
			case "fail":
				c.send(`{"id":"` + fresh() + `","type":"error",` + ts + `,"error":"Agent processing failed: Agent.run() takes 1 positional argument but 2 were given"}`)
				continue
			case "die":
				opt.Die()
				return nil
			case "slow":
				// The prompt runs inline: nothing else is read meanwhile.
				time.Sleep(400 * time.Millisecond)
				content = "late answer"
			}
			c.send(`{"id":"` + fresh() + `","type":"prompt_response",` + ts + `,"session_id":"` + sid + `","data":{"content":` + q(content) + `,"messageId":"m-` + fresh() + `","status":"completed"}}`)
		case "cancelSession":
			poisoned = true
			c.send(`{"id":"` + fresh() + `","type":"cancel_session_response",` + ts + `,"session_id":"` + sid + `","data":{"status":"cancelled"}}`)
		case "heartbeat":
			c.send(`{"id":"` + fresh() + `","type":"heartbeat_response",` + ts + `,"data":{"status":"alive","active_sessions":1}}`)
		default:
			c.send(`{"id":"` + fresh() + `","type":"error",` + ts + `,"error":"Unknown message type: ` + typ + `"}`)
		}
	}
	return nil
}
