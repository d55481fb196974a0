package claude

import (
	"errors"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// decode checks that frame is one stream-json message (a JSON object with a
// string "type", docs/agent-protocols.md#claude-stream-json-messages) and
// returns it parsed. The result holds a copy of the frame: it may be kept
// after the call.
func decode(frame []byte) (gjson.Result, error) {
	if err := translate.Valid(frame); err != nil {
		return gjson.Result{}, err
	}
	r := gjson.ParseBytes(frame)
	if !r.IsObject() {
		return gjson.Result{}, errors.New("not a JSON object")
	}
	if typ := r.Get("type"); typ.Type != gjson.String || typ.Str == "" {
		return gjson.Result{}, errors.New(`no "type" string`)
	}
	return r, nil
}

// FromAgent implements translate.Translator for one line of the CLI's
// stdout. Control requests of the CLI are answered in the same call or,
// for permissions, once the editor has answered; an error comes with the
// answer the CLI needs already in the outputs.
func (t *translator) FromAgent(frame []byte) ([]translate.Out, error) {
	msg, err := decode(frame)
	if err != nil {
		return nil, fmt.Errorf("claude: unusable line from the CLI: %w", err)
	}
	typ := msg.Get("type").Str
	switch typ {
	case "control_response":
		return t.controlResponse(msg)
	case "control_request":
		return t.cliControlRequest(msg)
	case "control_cancel_request":
		return t.controlCancel(msg), nil
	}
	if t.session == "" || t.closed {
		return []translate.Out{note("CLI message " + typ + " with no session open")}, nil
	}
	if typ == "user" {
		if outs, ok := t.echo(msg); ok {
			return outs, nil
		}
	}
	if t.staleTurns > 0 && (typ == "stream_event" || typ == "assistant" || typ == "user") {
		// Output of a turn the engine gave up on (see result): the
		// editor already saw it end.
		return nil, nil
	}
	switch typ {
	case "system":
		return t.system(msg), nil
	case "stream_event":
		return t.streamEvent(msg), nil
	case "assistant":
		return t.assistant(msg), nil
	case "user":
		return t.userMessage(msg), nil
	case "result":
		return t.result(msg), nil
	}
	// rate_limit_event, tool_progress, auth_status, keep_alive… from
	// newer CLIs (docs/agent-protocols.md#claude-stream-json-messages).
	return []translate.Out{t.note("CLI message type " + typ)}, nil
}

func (t *translator) note(detail string) translate.Out {
	o := note(detail)
	o.Session = t.session
	return o
}

// system handles system messages: init reports the session's permission
// mode, which the editor is told of when it changed; compaction and local
// command output are shown as agent messages; other subtypes (hooks, task
// progress, session state…) are ignored. Nothing here depends on where in
// the turn a system message comes: Claude Code 2.1 sends them between a
// tool result and the next assistant message.
func (t *translator) system(msg gjson.Result) []translate.Out {
	subtype := msg.Get("subtype").Str
	switch subtype {
	case "init":
	case "status":
		// Compacting takes a while; say so, as claude-agent-acp does.
		if msg.Get("status").Str == "compacting" {
			return []translate.Out{t.chunk("agent_message_chunk", "Compacting...")}
		}
		return nil
	case "compact_boundary":
		// The context was compacted: its size is unknown until the next
		// assistant message, and taken as empty until then.
		if t.turn != nil {
			t.turn.contextUsed, t.turn.haveContext = 0, true
		}
		return []translate.Out{t.chunk("agent_message_chunk", "\n\nCompacting completed.")}
	case "local_command_output":
		if s := msg.Get("content").Str; s != "" {
			return []translate.Out{t.chunk("agent_message_chunk", s)}
		}
		return nil
	default:
		// session_state_changed, hooks, task progress, api_retry and the
		// subtypes of newer CLIs: nothing an editor shows.
		return []translate.Out{t.note("CLI system message " + quoteSubtype(subtype))}
	}
	mode := msg.Get("permissionMode").Str
	if !isMode(mode) || mode == t.mode {
		return nil
	}
	t.mode = mode
	return []translate.Out{t.modeUpdate(), t.configUpdate()}
}
