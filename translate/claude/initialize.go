// initialize and authenticate: what the translator advertises for
// Claude Code, whose one login happens in the CLI, out of band.

package claude

import (
	"encoding/json"

	"github.com/acp-bridge/acp-bridge/translate"
)

// loginMethodID is the one auth method: logging in happens in the CLI, out
// of band (docs/agent-protocols.md#claude-stream-json-mapping).
const loginMethodID = "claude-login"

type authMethod struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

// initializeResult is the bridge's own initialize answer (no CLI is needed for
// it): what the reference adapter advertises that this dialect can deliver
// (docs/agent-protocols.md#claude-stream-json-mapping). The engine puts the
// bridge's agentInfo in front and keeps this one under _meta.
func initializeResult() any {
	type promptCapabilities struct {
		Image           bool `json:"image"`
		Audio           bool `json:"audio"`
		EmbeddedContext bool `json:"embeddedContext"`
	}
	type mcpCapabilities struct {
		HTTP bool `json:"http"`
		SSE  bool `json:"sse"`
	}
	type sessionCapabilities struct {
		// Presence objects (ACP spec, Initialization: capabilities): {}
		// means supported.
		Resume struct{} `json:"resume"`
		Close  struct{} `json:"close"`
	}
	type agentCapabilities struct {
		// _meta.claudeCode.promptQueueing says, as claude-agent-acp says
		// it, that a prompt sent while a turn runs is queued (see prompt).
		Meta json.RawMessage `json:"_meta"`
		// --resume restores a session (history replay waits for the
		// bridge's transcripts; see the package comment).
		LoadSession         bool                `json:"loadSession"`
		PromptCapabilities  promptCapabilities  `json:"promptCapabilities"`
		MCPCapabilities     mcpCapabilities     `json:"mcpCapabilities"`
		SessionCapabilities sessionCapabilities `json:"sessionCapabilities"`
	}
	type implementation struct {
		Name  string `json:"name"`
		Title string `json:"title"`
	}
	return struct {
		ProtocolVersion   int               `json:"protocolVersion"`
		AgentCapabilities agentCapabilities `json:"agentCapabilities"`
		AgentInfo         implementation    `json:"agentInfo"`
		AuthMethods       []authMethod      `json:"authMethods"`
	}{
		ProtocolVersion: 1,
		AgentCapabilities: agentCapabilities{
			Meta:               json.RawMessage(`{"claudeCode":{"promptQueueing":true}}`),
			LoadSession:        true,
			PromptCapabilities: promptCapabilities{Image: true, EmbeddedContext: true},
			MCPCapabilities:    mcpCapabilities{HTTP: true, SSE: true},
		},
		AgentInfo: implementation{Name: "claude-code", Title: "Claude Code"},
		AuthMethods: []authMethod{{
			ID:          loginMethodID,
			Name:        "Log in with Claude Code",
			Description: "Run `claude /login` in the terminal",
		}},
	}
}

// authenticate cannot log in itself: Claude Code's login is interactive and
// happens in the CLI. The answer says what to do.
func (t *translator) authenticate(m translate.Msg) []translate.Out {
	var p struct {
		MethodID string `json:"methodId"`
	}
	_ = json.Unmarshal(m.Body, &p)
	if p.MethodID != loginMethodID {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown auth method %q: the only one is %q", p.MethodID, loginMethodID)}
	}
	// Not -32000: that would send the editor back to this same method.
	return []translate.Out{failf(m.Ref, translate.CodeInternalError,
		"acp-bridge cannot log in to Claude Code for you: run `claude /login` in a terminal, then start a new session")}
}
