package claude

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/acp-bridge/acp-bridge/translate"
)

// FromEditor implements translate.Translator.
func (t *translator) FromEditor(m translate.Msg) ([]translate.Out, error) {
	switch m.Kind {
	case translate.Request:
		return t.editorRequest(m), nil
	case translate.Notification:
		if m.Method == "session/cancel" {
			var p struct {
				SessionID string `json:"sessionId"`
			}
			if json.Unmarshal(m.Body, &p) == nil && p.SessionID != "" && p.SessionID == t.session {
				return t.cancelTurn(), nil
			}
		}
		// Unknown notifications, and cancels for other sessions, are
		// ignored (receivers may ignore notifications they do not know).
		return nil, nil
	case translate.Response:
		return t.editorResponse(m)
	case translate.CancelRequest:
		// The CLI cancels only the whole turn.
		if t.turn != nil && t.turn.ref == m.Ref {
			return t.cancelTurn(), nil
		}
		if i := slices.IndexFunc(t.queue, func(q *turn) bool { return q.ref == m.Ref }); i >= 0 {
			q := t.queue[i]
			t.queue = slices.Delete(t.queue, i, i+1)
			t.dropped[q.uuid] = true
			return []translate.Out{reply(q.ref, stopReason{StopReason: "cancelled"})}, nil
		}
		return nil, nil
	case translate.Abandon:
		return t.abandon(m.Ref), nil
	case translate.LinkUp, translate.Tick:
		return nil, nil
	case translate.LinkDown:
		// The engine has answered what was pending and withdrawn the
		// editor's calls; this translator's process is gone.
		t.turn = nil
		t.staleTurns = 0
		t.queue = nil
		t.perms.Clear()
		clear(t.ctl)
		t.closed = true
		return nil, nil
	}
	return nil, fmt.Errorf("claude: unexpected editor input kind %d", m.Kind)
}

func (t *translator) editorRequest(m translate.Msg) []translate.Out {
	switch m.Method {
	case "initialize":
		return []translate.Out{reply(m.Ref, initializeResult())}
	case "authenticate":
		return t.authenticate(m)
	case "session/new", "session/load", "session/resume":
		return t.openSession(m)
	case "session/prompt":
		return t.prompt(m)
	case "session/set_mode":
		return t.setMode(m)
	case "session/set_config_option":
		return t.setConfigOption(m)
	case "session/set_model":
		return t.setModel(m)
	case "session/close":
		return t.closeSession(m)
	}
	return []translate.Out{failf(m.Ref, translate.CodeMethodNotFound,
		"%s is not available: Claude Code's stream-json protocol (dialect claude-stream-json) has no equivalent", m.Method)}
}

func (t *translator) prompt(m translate.Msg) []translate.Out {
	var p struct {
		SessionID string            `json:"sessionId"`
		Prompt    []json.RawMessage `json:"prompt"`
	}
	if err := json.Unmarshal(m.Body, &p); err != nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/prompt params are not of the expected shape: %v", err)}
	}
	if outs := t.checkSession(m.Ref, p.SessionID); outs != nil {
		return outs
	}
	blocks, err := promptBlocks(p.Prompt)
	if err != nil {
		return []translate.Out{fail(m.Ref, err.JSON())}
	}
	if len(blocks) == 0 {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/prompt needs at least one content block")}
	}
	t.prompts++
	tr := &turn{ref: m.Ref, local: localCommand(blocks), uuid: SessionUUID(fmt.Sprintf("%s/prompt/%d", t.session, t.prompts))}
	switch {
	case t.turn != nil && !t.turn.abandoned:
		// Queued, as claude-agent-acp queues it: the CLI takes the
		// message when it can, and its echo says when (see echo).
		t.queue = append(t.queue, tr)
	case t.turn != nil:
		// The engine answered the running turn itself (abandoned); the
		// CLI ends it, interrupted, before it takes this message.
		t.staleTurns++
		t.turn = tr
	default:
		t.turn = tr
	}
	type message struct {
		Role    string           `json:"role"`
		Content []anthropicBlock `json:"content"`
	}
	// session_id "default" is what the SDKs send
	// (docs/agent-protocols.md#claude-stream-json-messages);
	// the CLI keeps the session it was started with.
	return []translate.Out{frame(struct {
		Type            string          `json:"type"`
		Message         message         `json:"message"`
		ParentToolUseID json.RawMessage `json:"parent_tool_use_id"`
		SessionID       string          `json:"session_id"`
		UUID            string          `json:"uuid"`
	}{"user", message{"user", blocks}, json.RawMessage("null"), "default", tr.uuid})}
}

// dropQueued answers the queued prompts that were cancelled (all of them
// when all is true) "cancelled", as claude-agent-acp answers them on
// session/cancel, and remembers them so that a turn the CLI starts for one
// of them is stopped.
func (t *translator) dropQueued(all bool) []translate.Out {
	var outs []translate.Out
	t.queue = slices.DeleteFunc(t.queue, func(q *turn) bool {
		if !all && !q.cancelled {
			return false
		}
		t.dropped[q.uuid] = true
		if !q.abandoned {
			outs = append(outs, reply(q.ref, stopReason{StopReason: "cancelled"}))
		}
		return true
	})
	return outs
}

// cancelTurn interrupts the running turn: a control interrupt to the CLI
// (once per turn), and every pending permission withdrawn from the editor
// and denied toward the CLI, so that neither waits for the other
// (agentclientprotocol/claude-agent-acp #830, #851: permission deadlocks
// with several requests pending). The turn's result answers the prompt "cancelled".
func (t *translator) cancelTurn() []translate.Out {
	if t.turn == nil || t.closed {
		return nil
	}
	// The queued prompts are answered "cancelled" after the running one
	// (see result), so that the editor never sees a later prompt end
	// first.
	for _, q := range t.queue {
		q.cancelled = true
	}
	var outs []translate.Out
	if !t.turn.cancelled {
		t.turn.cancelled = true
		outs = append(outs, t.controlRequest(&ctlRequest{kind: ctlInterrupt}, struct {
			Subtype string `json:"subtype"`
		}{"interrupt"}))
	}
	return append(outs, t.withdrawPermissions("The user cancelled the turn", true)...)
}

// withdrawPermissions withdraws every outstanding permission request, in
// Ref order: $/cancel_request to the editor and a deny to the CLI.
func (t *translator) withdrawPermissions(why string, interrupt bool) []translate.Out {
	return t.perms.Withdraw(nil, func(p *permission) []translate.Out {
		return []translate.Out{controlSuccess(p.requestID, deny(why, interrupt))}
	})
}

// abandon forgets an editor request the engine answered itself.
func (t *translator) abandon(ref translate.Ref) []translate.Out {
	if t.turn != nil && t.turn.ref == ref {
		// The engine answered the prompt (cancel grace or shutdown): stop
		// the CLI's turn too, and take the result, when it comes, as the
		// end of a turn nobody waits for.
		outs := t.cancelTurn()
		t.turn.abandoned = true
		return outs
	}
	if i := slices.IndexFunc(t.queue, func(q *turn) bool { return q.ref == ref }); i >= 0 {
		t.dropped[t.queue[i].uuid] = true
		t.queue = slices.Delete(t.queue, i, i+1)
	}
	if t.openRef == ref {
		t.openRef = 0
	}
	t.reopens = slices.DeleteFunc(t.reopens, func(r reopen) bool { return r.ref == ref })
	for _, c := range t.ctl {
		if c.ref == ref {
			c.ref = 0
		}
	}
	return nil
}

type stopReason struct {
	StopReason string          `json:"stopReason"`
	Usage      *usage          `json:"usage,omitempty"`
	Meta       json.RawMessage `json:"_meta,omitempty"`
}
