package bridge

// Switching a session's agent (durable sessions, durable.go): with two or
// more agents configured (Durable.Agents), every session offers a "select"
// config option, "agent". Setting it ends the session's backend session
// (never two live per session), opens one on the chosen agent in the same
// cwd, primes it with the transcript (the history preamble on its first
// prompt), records the switch in the transcript and tells the editor
// (config_option_update). Later prompts go to the new agent; session/load
// restores the agent that was last active. A switch while a turn runs is
// refused.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/internal/wire"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// agentOption is the id of the config option that switches a session's agent.
const agentOption = "agent"

// switchable reports whether sessions offer the agent option.
func (d *durableSessions) switchable() bool {
	return d.on() && len(d.cfg.Sessions.Agents) >= 2
}

// agentOptionJSON is the agent option with current selected.
func (d *durableSessions) agentOptionJSON(current string) json.RawMessage {
	type choice struct {
		Value string `json:"value"`
		Name  string `json:"name"`
	}
	opt := struct {
		ID           string   `json:"id"`
		Name         string   `json:"name"`
		Description  string   `json:"description"`
		Type         string   `json:"type"`
		CurrentValue string   `json:"currentValue"`
		Options      []choice `json:"options"`
	}{ID: agentOption, Name: "Agent", Type: "select", CurrentValue: current,
		Description: "The agent this conversation goes to; switching carries the conversation over (acp-bridge)"}
	for _, b := range d.cfg.Sessions.Agents {
		opt.Options = append(opt.Options, choice{b.Name, b.Name})
	}
	out, _ := json.Marshal(opt)
	return out
}

// withAgentOption returns configOptions (a JSON array, or empty) with the
// agent option set to current, in place of any earlier one.
func (d *durableSessions) withAgentOption(configOptions json.RawMessage, current string) json.RawMessage {
	opts := []json.RawMessage{d.agentOptionJSON(current)}
	gjson.ParseBytes(configOptions).ForEach(func(_, o gjson.Result) bool {
		if o.Get("id").Str != agentOption {
			opts = append(opts, json.RawMessage(o.Raw))
		}
		return true
	})
	out, _ := json.Marshal(opts)
	return out
}

// withAgentOptionResult adds the agent option to a session/new answer.
func (d *durableSessions) withAgentOptionResult(s *session, result json.RawMessage) json.RawMessage {
	if !d.switchable() || s == nil || s.b == nil {
		return result
	}
	return withKey(result, "configOptions", d.withAgentOption(json.RawMessage(gjson.GetBytes(result, "configOptions").Raw), s.b.bind.Name))
}

// switchAgent serves session/set_config_option of the agent option.
func (d *durableSessions) switchAgent(req *request, s *session, params json.RawMessage) {
	to := gjson.GetBytes(params, "value").Str
	i := slices.IndexFunc(d.cfg.Sessions.Agents, func(b Binding) bool { return b.Name == to })
	if i < 0 {
		var names []string
		for _, b := range d.cfg.Sessions.Agents {
			names = append(names, b.Name)
		}
		d.core.fail(req, translate.Errorf(translate.CodeInvalidParams, "no agent %q: the agent option takes one of %s", to, strings.Join(names, ", ")))
		return
	}
	from := s.b.bind
	answer := func() {
		opts := d.withAgentOption(nil, s.b.bind.Name)
		d.core.answer(req, json.RawMessage(`{"configOptions":`+string(opts)+`}`))
	}
	if to == from.Name && !s.b.attaching {
		answer()
		return
	}
	if len(s.prompts) > 0 || s.b.attaching {
		d.core.fail(req, translate.Errorf(translate.CodeInvalidRequest,
			"session %s cannot switch to agent %s while a turn is running: wait for it to end or cancel it, then switch", s.id, to).With("sessionId", s.id))
		return
	}
	bind := d.cfg.Sessions.Agents[i]
	d.log.Info("switching a session's agent", "session", s.id, "from", from.Name, "to", to)
	// End the old backend session first: never two live per session.
	d.detach(s, "the session switched to agent "+to, nil)
	s.b.bind = bind
	s.b.switched = true
	s.b.attaching = true
	d.store().Append(s.id, store.Record{Kind: store.KindSwitch, Agent: bind.Name, Dialect: bind.Dialect.Name, Sync: true})
	d.readHistory(s.id, false, func(primer string, _ int, _ error) {
		d.attach(s, primer, func(aerr *translate.Error, _ json.RawMessage) {
			s.b.switched = false
			if req.retired {
				return
			}
			if aerr != nil {
				// Back to the old agent, re-attached on the next request.
				s.b.bind = from
				d.store().Append(s.id, store.Record{Kind: store.KindSwitch, Agent: from.Name, Dialect: from.Dialect.Name, Sync: true})
				d.core.fail(req, translate.Errorf(translate.CodeInternalError,
					"could not switch session %s to agent %s (%s); it stays with agent %s", s.id, to, errorMessage(aerr.JSON()), from.Name).With("sessionId", s.id))
				return
			}
			update := fmt.Sprintf(`{"sessionId":%s,"update":{"sessionUpdate":"config_option_update","configOptions":%s}}`,
				mustJSON(s.id), d.withAgentOption(nil, to))
			d.core.writeEditorSession(editorMsg{head: updateHead, body: []byte(update), tail: closeBrace}, s.id)
			answer()
		})
	})
}

// detach ends s's backend session: a link of its own is closed, a shared
// one is told session/close when the agent has it. s is left parked. then,
// if not nil, runs once that is done.
func (d *durableSessions) detach(s *session, why string, then func()) {
	if then == nil {
		then = func() {}
	}
	done := then
	if s.link.down == nil {
		if s.link.control {
			if gjson.GetBytes(d.caps[s.b.bind.Name], "sessionCapabilities.close").IsObject() {
				d.core.internal(s.link, "session/close", d.toBackend(s, json.RawMessage(`{"sessionId":`+mustJSON(s.id)+`}`)), s.id, func(translate.Out) { then() })
				done = func() {}
			}
		} else {
			d.links.retireLink(s.link, why)
		}
	}
	defer done()
	d.setBackend(s, "")
	s.b.resumeID = ""
	if s.b.idle != nil {
		s.b.idle.Stop()
	}
	s.link = d.parkedLink(s.b.bind)
}

func mustJSON(v string) string {
	return string(wire.AppendString(nil, v))
}
