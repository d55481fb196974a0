package bridge

import (
	"encoding/json"

	"github.com/acp-bridge/acp-bridge/translate"
)

// agentOption is the id of the config option that switches a session's agent.
const agentOption = "agent"

// switchable reports whether sessions offer the agent option.
func (e *engine) switchable() bool { return false }

func (e *engine) switchAgent(req *request, s *session, params json.RawMessage) {
	e.fail(req, translate.Errorf(translate.CodeInvalidParams, "switching agents is not available"))
}

// addAgentOption adds the agent option to a session answer's configOptions.
func (e *engine) addAgentOption(s *session, out map[string]json.RawMessage) {}
